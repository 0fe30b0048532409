/* native.c - the registry of executable mappings and unwind tables behind
 * native unwinding (native.h). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

#include "core/native.h"
#include "proc/elfsym.h"
#include "proc/memread.h"
#include "proc/procfs.h"
#include "proc/procmaps.h"
#include "proc/mapfile.h"
#include "proc/perfmap.h"
#include "proc/safeopen.h"
#include "proc/unwtab.h"
#include "util/clock.h"
#include "util/log.h"

/* The vDSO is one image per kernel: one entry, whatever its device says. */
#define VDSO_KEY_INODE UINT64_MAX
#define MAX_IDLE_FILES 256
/* Descriptors kept open, the most recently used files': one per file, for
 * naming frames after their processes exit. Far under any RLIMIT_NOFILE
 * (1,024 by default): a process that maps thousands of files costs no
 * more (the rest are named through /proc/PID/map_files). */
#define MAX_OPEN_FILES 64
/* The work of one native_scan(): new files opened and built, and time;
 * the rest waits for the next turn of the loop, so that the ring is read
 * between (a process mapping thousands of files must not stall taipan). */
#define SCAN_FILES 64
#define SCAN_NS (100 * 1000000ULL)

struct file_key {
	uint64_t inode;
	uint32_t dev_major, dev_minor;
};

/* A PT_LOAD segment: what a mapping's bias is computed from. */
struct load_seg {
	uint64_t offset, vaddr, filesz, align;
};
#define MAX_LOADS 16

struct native_file {
	UT_hash_handle hh;
	struct file_key key;
	struct load_seg loads[MAX_LOADS];
	uint32_t nloads;
	uint32_t slot; /* in ufiles; 0 when the table failed: frame pointers */
	uint32_t refs; /* mappings that use it */
	uint64_t id;   /* native_file_id() */
	int fd;	       /* the file, while it is among the MAX_OPEN_FILES; else -1 */
	struct native_file *fd_prev, *fd_next; /* the open ones, most recent first */
	uint64_t size, mtime_ns;	       /* what it was: an inode number reused */
	size_t bytes;			       /* of its table */
	char *path;
	char open_path[32];
};

struct native {
	const struct sampler *sm;
	struct budget *budget;
	struct native_file *files;
	struct native_file *fd_head, *fd_tail;
	uint32_t nfds;
	uint32_t *free_slots; /* a stack of unused slots */
	uint32_t nfree;
	uint32_t nidle; /* files no process maps, kept for the next one */
	uint64_t next_id;
	/* The rules the tables' rows name, and how many of them BPF has. */
	struct unwtab_rules rules;
	uint32_t rules_sent;
	struct native_stats st;
};

struct native *native_new(const struct sampler *sm, struct budget *budget)
{
	struct native *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->sm = sm;
	n->budget = budget;
	n->free_slots = malloc(TP_MAX_UFILES * sizeof(*n->free_slots));
	if (!n->free_slots) {
		free(n);
		return NULL;
	}
	/* Slot 0 means "none"; hand out low slots first. */
	for (uint32_t s = TP_MAX_UFILES - 1; s >= 1; s--)
		n->free_slots[n->nfree++] = s;
	elf_version(EV_CURRENT);
	return n;
}

/* Closes f's descriptor, if open. */
static void fd_close(struct native *n, struct native_file *f)
{
	if (f->fd < 0)
		return;
	close(f->fd);
	f->fd = -1;
	f->open_path[0] = '\0';
	if (f->fd_prev)
		f->fd_prev->fd_next = f->fd_next;
	else
		n->fd_head = f->fd_next;
	if (f->fd_next)
		f->fd_next->fd_prev = f->fd_prev;
	else
		n->fd_tail = f->fd_prev;
	f->fd_prev = f->fd_next = NULL;
	n->nfds--;
	n->st.fds = n->nfds;
}

/* Keeps fd open as f's, closing the least recently opened past
 * MAX_OPEN_FILES. */
static void fd_keep(struct native *n, struct native_file *f, int fd)
{
	while (n->nfds >= MAX_OPEN_FILES && n->fd_tail)
		fd_close(n, n->fd_tail);
	f->fd = fd;
	snprintf(f->open_path, sizeof(f->open_path), "/proc/self/fd/%d", fd);
	f->fd_next = n->fd_head;
	if (n->fd_head)
		n->fd_head->fd_prev = f;
	n->fd_head = f;
	if (!n->fd_tail)
		n->fd_tail = f;
	n->nfds++;
	n->st.fds = n->nfds;
}

static void file_free(struct native *n, struct native_file *f)
{
	if (f->slot) {
		n->sm->ops->del_table(n->sm->impl, f->slot);
		n->free_slots[n->nfree++] = f->slot;
		n->st.files--;
		n->st.table_bytes -= f->bytes;
		budget_give(n->budget, f->bytes);
	}
	fd_close(n, f);
	free(f->path);
	free(f);
}

void native_free(struct native *n)
{
	if (!n)
		return;
	struct native_file *f, *tmp;
	HASH_ITER(hh, n->files, f, tmp)
	{
		HASH_DEL(n->files, f);
		file_free(n, f);
	}
	free(n->free_slots);
	unwtab_rules_free(&n->rules);
	free(n);
}

/* Reads the PT_LOAD segments of the ELF file open at fd into f, once:
 * every mapping of the file computes its bias from them. */
static void read_loads(struct native_file *f, int fd)
{
	struct elf_load loads[MAX_LOADS];
	struct elf_file *ef;
	size_t n = 0;
	int dfd = dup(fd);

	if (dfd < 0 || elf_file_open_fd(dfd, &ef))
		return;
	int ret = elf_file_loads(ef, loads, MAX_LOADS, &n);
	if (!ret || ret == -E2BIG) {
		for (size_t i = 0; i < n; i++)
			f->loads[f->nloads++] = (struct load_seg){
			    .offset = loads[i].offset,
			    .vaddr = loads[i].vaddr,
			    .filesz = loads[i].filesz,
			    .align = loads[i].align > 1 ? loads[i].align : 1,
			};
	}
	elf_file_close(ef);
}

/* The bias of a mapping of f that starts at start, file offset off: the
 * PT_LOAD segment holding off says which link-time address the mapping's
 * first byte has. -ENOEXEC when none does. */
static int map_bias(const struct native_file *f, uint64_t start, uint64_t off, uint64_t *bias)
{
	for (uint32_t i = 0; i < f->nloads; i++) {
		const struct load_seg *l = &f->loads[i];
		/* Segments start mid-page; the mapping starts at the page. */
		uint64_t poff = l->offset & ~(l->align - 1);
		if (off < poff || off >= l->offset + l->filesz)
			continue;
		*bias = start - ((l->vaddr & ~(l->align - 1)) + (off - poff));
		return 0;
	}
	return -ENOEXEC;
}

/* t packed, its new rules given to BPF first. NULL when there is no room
 * (errno ENOSPC: the rules are full) or BPF refused them. */
static uint32_t *table_words(struct native *n, const struct unwtab *t)
{
	uint32_t *w = unwtab_pack(t, &n->rules);
	if (!w)
		return NULL;
	if (n->rules.n > n->rules_sent) {
		int ret =
		    n->sm->ops->put_rules(n->sm->impl, n->rules_sent, n->rules.n - n->rules_sent,
					  n->rules.v + n->rules_sent);
		if (ret) {
			free(w);
			errno = -ret;
			return NULL;
		}
		n->rules_sent = n->rules.n;
		n->st.rules = n->rules.n;
	}
	return w;
}

/* Builds f's table from fd (which it leaves open) and gives it to BPF;
 * on failure f keeps slot 0 and its mappings are followed by frame
 * pointers. */
static void file_load(struct native *n, struct native_file *f, int fd)
{
	struct unwtab t = {0};
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
	int dfd = dup(fd);
	int ret = dfd < 0 ? -errno : unwtab_build_fd(dfd, &t);
	n->st.build_ns += clock_ns(CLOCK_MONOTONIC) - t0;
	if (ret) {
		log_debug("%s: no unwind table (%s): its frames are followed by frame pointer",
			  f->path, strerror(-ret));
		n->st.files_failed++;
		return;
	}
	uint32_t *words = NULL;
	struct tp_ufile info = {.base = t.base, .npages = t.npages, .nrows = t.nrows};
	size_t bytes = unwtab_bytes(&t);
	if (!budget_take(n->budget, bytes)) {
		log_debug(
		    "%s: its unwind table (%zu bytes) is over the memory budget (--max-memory)",
		    f->path, bytes);
		n->st.files_failed++;
		n->st.files_over_budget++;
		unwtab_free(&t);
		return;
	}
	if (!n->nfree || !(words = table_words(n, &t))) {
		log_debug("%s: no room for its unwind table%s", f->path,
			  n->nfree && errno == ENOSPC ? " (the rules BPF holds are full)" : "");
		n->st.files_failed++;
		budget_give(n->budget, bytes);
		unwtab_free(&t);
		return;
	}
	uint32_t slot = n->free_slots[n->nfree - 1];
	ret = n->sm->ops->put_table(n->sm->impl, slot, &info, words);
	if (ret) {
		log_debug("%s: BPF refused its unwind table (%u rows): %s", f->path, t.nrows,
			  strerror(-ret));
		n->st.files_failed++;
		budget_give(n->budget, bytes);
	} else {
		n->nfree--;
		f->slot = slot;
		f->bytes = bytes;
		n->st.files++;
		n->st.table_bytes += f->bytes;
	}
	free(words);
	unwtab_free(&t);
}

static void idle_sweep(struct native *n);

/* The file behind me if taipan has it already (a hold is taken), else
 * NULL. */
static struct native_file *file_find(struct native *n, const struct map_entry *me)
{
	struct file_key k = {
	    .inode = me->inode, .dev_major = me->dev_major, .dev_minor = me->dev_minor};
	struct native_file *f;
	if (!me->inode || me->path[0] != '/')
		return NULL;
	HASH_FIND(hh, n->files, &k, sizeof(k), f);
	if (f && !f->refs++)
		n->nidle--;
	return f;
}

/* Whether the file mapped at me is still the idle f whose descriptor was
 * closed: the inode number may have gone to another file since. */
static bool still_same(pid_t pid, const struct map_entry *me, const struct native_file *f)
{
	char p[96];
	struct stat st;
	snprintf(p, sizeof(p), "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)me->start,
		 (unsigned long long)me->end);
	if (stat(p, &st))
		return false;
	return (uint64_t)st.st_size == f->size &&
	       (uint64_t)st.st_mtim.tv_sec * 1000000000ULL + (uint64_t)st.st_mtim.tv_nsec ==
		   f->mtime_ns;
}

/* The file behind me, new (its table built: *built set) or shared; NULL
 * for anonymous code, or when it cannot be opened (then frame pointers). */
static struct native_file *file_get(struct native *n, pid_t pid, const struct map_entry *me,
				    bool *built)
{
	struct file_key k = {0};
	*built = false;
	if (mapfile_is_vdso(me)) {
		k.inode = VDSO_KEY_INODE;
	} else {
		if (!me->inode || me->path[0] != '/')
			return NULL;
		k.inode = me->inode;
		k.dev_major = me->dev_major;
		k.dev_minor = me->dev_minor;
	}
	struct native_file *f;
	HASH_FIND(hh, n->files, &k, sizeof(k), f);
	/* A file some process maps holds its inode; an idle one whose
	 * descriptor was closed may have lost it to another file. */
	if (f && !f->refs && f->fd < 0 && !mapfile_is_vdso(me) && !still_same(pid, me, f)) {
		HASH_DEL(n->files, f);
		file_free(n, f);
		n->nidle--;
		f = NULL;
	}
	if (f) {
		if (!f->refs++)
			n->nidle--;
		return f;
	}
	if (n->nidle > MAX_IDLE_FILES || !n->nfree)
		idle_sweep(n);
	int fd = mapfile_open(pid, me);
	if (fd < 0) {
		log_debug("pid %d: cannot open %s: %s: its frames are followed by frame pointer",
			  pid, me->path, strerror(-fd));
		return NULL;
	}
	struct stat st;
	f = calloc(1, sizeof(*f));
	if (!f || fstat(fd, &st) || !(f->path = strdup(me->path))) {
		free(f);
		close(fd);
		return NULL;
	}
	f->key = k;
	f->fd = -1;
	f->size = (uint64_t)st.st_size;
	f->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ULL + (uint64_t)st.st_mtim.tv_nsec;
	f->refs = 1;
	f->id = ++n->next_id;
	read_loads(f, fd);
	file_load(n, f, fd);
	fd_keep(n, f, fd);
	HASH_ADD(hh, n->files, key, sizeof(f->key), f);
	*built = true;
	return f;
}

/* Lets go of a mapping's hold on f. A file no process maps any more keeps
 * its table (the next short-lived process of the same interpreter maps it
 * again) until MAX_IDLE_FILES such files are kept or the slots run out. An
 * idle file whose descriptor was closed is checked before it is used again
 * (still_same). */
static void file_put(struct native *n, struct native_file *f)
{
	if (f && !--f->refs)
		n->nidle++;
}

/* Frees the files no process maps; their slots are cleared with the next
 * batch of tables. */
static void idle_sweep(struct native *n)
{
	struct native_file *f, *tmp;
	HASH_ITER(hh, n->files, f, tmp)
	{
		if (f->refs)
			continue;
		HASH_DEL(n->files, f);
		file_free(n, f);
	}
	n->nidle = 0;
}

/* Calls set_range (add) or del_range for each aligned prefix of
 * [start, end) of tgid. Returns how many prefixes succeeded. */
static uint32_t ranges(struct native *n, pid_t pid, uint64_t start, uint64_t end,
		       const struct tp_umap *v)
{
	uint32_t done = 0;
	while (start < end) {
		int bits = start ? __builtin_ctzll(start) : 63;
		while (bits > 0 && (bits >= 64 || start + (1ULL << bits) > end ||
				    start + (1ULL << bits) < start))
			bits--;
		struct tp_umap_key k = {
		    .prefixlen = 32 + 64 - (uint32_t)bits,
		    .tgid = (uint32_t)pid,
		    .addr_be = __builtin_bswap64(start),
		};
		int ret = v ? n->sm->ops->set_range(n->sm->impl, &k, v)
			    : n->sm->ops->del_range(n->sm->impl, &k);
		if (!ret)
			done++;
		else if (v)
			n->st.range_errors++;
		start += 1ULL << bits;
	}
	return done;
}

static void map_forget(struct native *n, pid_t pid, struct native_map *m)
{
	ranges(n, pid, m->start, m->end, NULL);
	n->st.ranges -= m->nranges;
	file_put(n, m->file);
}

static int map_cmp(const void *a, const void *b)
{
	const struct native_map *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

static bool same_mapping(const struct native_map *m, const struct map_entry *me)
{
	return m->start == me->start && m->end == me->end && m->offset == me->offset &&
	       m->inode == me->inode && m->dev_major == me->dev_major &&
	       m->dev_minor == me->dev_minor;
}

/* A new mapping: its file (built only if may_build, else unknown files
 * are left to frame pointers) and its bias. Its prefixes go into the trie
 * later (map_publish), once its file's table is visible to BPF. */
static struct native_map map_new(struct native *n, pid_t pid, const struct map_entry *me,
				 bool may_build, bool *built)
{
	struct native_map m = {
	    .start = me->start,
	    .end = me->end,
	    .offset = me->offset,
	    .inode = me->inode,
	    .dev_major = me->dev_major,
	    .dev_minor = me->dev_minor,
	};
	m.bias = me->start - me->offset;
	*built = false;
	m.file = may_build || mapfile_is_vdso(me) ? file_get(n, pid, me, built) : file_find(n, me);
	if (m.file) {
		if (mapfile_is_vdso(me))
			m.bias = me->start;
		else
			map_bias(m.file, me->start, me->offset, &m.bias);
	}
	return m;
}

/* What BPF is told of m: its table's slot, or frame pointers where it has
 * none. */
static struct tp_umap map_umap(const struct native_map *m)
{
	struct tp_umap um = {.bias = m->bias, .flags = TP_UM_FP, .start = m->start, .end = m->end};
	if (m->file && m->file->slot) {
		um.file = m->file->slot;
		um.flags = 0;
	}
	return um;
}

/* Puts m's prefixes into the trie. */
static void map_publish(struct native *n, pid_t pid, struct native_map *m)
{
	struct tp_umap um = map_umap(m);
	m->nranges = ranges(n, pid, m->start, m->end, &um);
	n->st.ranges += m->nranges;
}

static void flush(struct native *n)
{
	if (n->sm->ops->flush_tables) {
		int ret = n->sm->ops->flush_tables(n->sm->impl);
		if (ret)
			log_debug("BPF refused a batch of unwind tables: %s", strerror(-ret));
	}
}

/* Whether mapping i of pm is of a file that nearly every stack of the
 * process passes through: the executable (the first mapping's file), the C
 * and C++ runtimes, the dynamic loader, libpython. A scan builds theirs
 * first. */
static bool core_mapping(const struct proc_maps *pm, size_t i)
{
	static const char *const core[] = {"libc.so",	"libc-",	 "ld-linux",
					   "libpython", "libstdc++.so",	 "libgcc_s.so",
					   "libm.so",	"libpthread.so", "libffi.so"};
	const char *path = pm->v[i].path, *base = strrchr(path, '/');
	if (!path[0])
		return false;
	if (pm->n && !strcmp(path, pm->v[0].path))
		return true;
	base = base ? base + 1 : path;
	for (size_t j = 0; j < sizeof(core) / sizeof(core[0]); j++)
		if (!strncmp(base, core[j], strlen(core[j])))
			return true;
	return false;
}

/* Notes a mapping left for the next turn (none kept without memory). */
static void pending_add(struct native_proc *np, const struct map_entry *me)
{
	uint64_t *v = realloc(np->pending, (np->npending + 1) * 2 * sizeof(*v));
	if (!v)
		return;
	np->pending = v;
	v[2 * np->npending] = me->start;
	v[2 * np->npending + 1] = me->end;
	np->npending++;
}

bool native_pending(const struct native_proc *np, uint64_t addr)
{
	for (size_t i = 0; i < np->npending; i++)
		if (addr >= np->pending[2 * i] && addr < np->pending[2 * i + 1])
			return true;
	return false;
}

int native_scan(struct native *n, pid_t pid, struct native_proc *np)
{
	struct proc_maps pm;
	int ret = procmaps_read(pid, &pm);
	if (ret)
		return ret;
	if (!np->perfmap)
		np->perfmap = perfmap_new(pid, n->budget); /* reads nothing yet */
	n->st.scans++;
	bool *known = calloc(pm.n ? pm.n : 1, sizeof(*known));
	struct native_map *v = realloc(np->v, (np->n + pm.n ? np->n + pm.n : 1) * sizeof(*v));
	if (!known || !v) {
		free(known);
		if (v)
			np->v = v;
		procmaps_free(&pm);
		return -ENOMEM;
	}
	np->v = v;
	/* What is still mapped as it was stays; the rest goes first, so that
	 * a new mapping at the same place is not undone by its predecessor. */
	for (size_t i = 0; i < np->n; i++)
		np->v[i].seen = false;
	for (size_t i = 0; i < pm.n; i++) {
		const struct native_map *have = native_find(np, pm.v[i].start);
		if (pm.v[i].perms[2] == 'x' && have && same_mapping(have, &pm.v[i])) {
			np->v[have - np->v].seen = true;
			known[i] = true;
		}
	}
	size_t keep = 0;
	for (size_t i = 0; i < np->n; i++) {
		if (np->v[i].seen)
			np->v[keep++] = np->v[i];
		else
			map_forget(n, pid, &np->v[i]);
	}
	np->n = keep;
	/* The new ones, as many as one turn's work allows: first those that
	 * nearly every stack passes through (pass 0), then the rest in the
	 * order of the maps. */
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
	uint32_t opened = 0, capped = 0;
	if (!np->scan_since) {
		np->scan_since = t0;
		np->scan_built = 0;
	}
	size_t first = np->n;
	bool more = false;
	np->npending = 0;
	for (size_t k = 0; k < 2 * pm.n; k++) {
		size_t i = k % pm.n;
		if (pm.v[i].perms[2] != 'x' || known[i] || core_mapping(&pm, i) != (k < pm.n))
			continue;
		if (np->n >= NATIVE_MAPS_PER_PROC) {
			capped++;
			continue;
		}
		if (more || opened >= SCAN_FILES || clock_ns(CLOCK_MONOTONIC) - t0 > SCAN_NS) {
			more = true;
			pending_add(np, &pm.v[i]);
			continue;
		}
		bool built;
		bool may_build = np->nbuilt < NATIVE_BUILDS_PER_PROC;
		np->v[np->n] = map_new(n, pid, &pm.v[i], may_build, &built);
		if (!may_build && !np->v[np->n].file)
			n->st.builds_capped++;
		if (built) {
			opened++;
			np->nbuilt++;
		}
		np->n++;
	}
	n->st.maps_capped += capped - np->ncapped;
	np->ncapped = capped;
	/* The tables first, in one batch; then the ranges that lead to them. */
	flush(n);
	for (size_t i = first; i < np->n; i++)
		map_publish(n, pid, &np->v[i]);
	qsort(np->v, np->n, sizeof(*np->v), map_cmp);
	free(known);
	procmaps_free(&pm);
	np->scan_built += opened;
	if (more)
		n->st.scans_partial++;
	return more ? -EAGAIN : 0;
}

int native_fork(struct native *n, pid_t child, const struct native_proc *parent,
		struct native_proc *np)
{
	native_drop(n, child, np);
	if (!parent->n)
		return 0;
	np->v = malloc(parent->n * sizeof(*np->v));
	if (!np->v)
		return -ENOMEM;
	for (size_t i = 0; i < parent->n; i++) {
		struct native_map m = parent->v[i];
		struct tp_umap um = map_umap(&m);
		if (m.file)
			m.file->refs++;
		m.nranges = ranges(n, child, m.start, m.end, &um);
		n->st.ranges += m.nranges;
		np->v[np->n++] = m;
	}
	return 0;
}

void native_drop(struct native *n, pid_t pid, struct native_proc *np)
{
	for (size_t i = 0; i < np->n; i++)
		map_forget(n, pid, &np->v[i]);
	free(np->v);
	free(np->pending);
	perfmap_free(np->perfmap);
	n->st.maps_capped -= np->ncapped;
	*np = (struct native_proc){0};
}

const struct native_map *native_find(const struct native_proc *np, uint64_t addr)
{
	size_t lo = 0, hi = np->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (np->v[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < np->n && np->v[lo].start <= addr && addr < np->v[lo].end)
		return &np->v[lo];
	return NULL;
}

const char *native_file_open_path(const struct native_file *f)
{
	return f->open_path[0] ? f->open_path : NULL;
}

uint64_t native_file_id(const struct native_file *f)
{
	return f->id;
}

const char *native_file_path(const struct native_file *f)
{
	return f->path;
}

void native_get_stats(const struct native *n, struct native_stats *out)
{
	*out = n->st;
}
