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
#include <time.h>
#include <unistd.h>
#include <uthash.h>

#include "core/native.h"
#include "target/memread.h"
#include "target/procmaps.h"
#include "target/unwtab.h"
#include "util/clock.h"
#include "util/log.h"

/* The vDSO is one image per kernel: one entry, whatever its device says. */
#define VDSO_KEY_INODE UINT64_MAX
#define VDSO_MAX (1 << 20)
#define MAX_IDLE_FILES 256

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
	int fd;	       /* the file, kept open for naming its frames */
	size_t bytes;  /* of its table */
	char *path;
	char open_path[32];
};

struct native {
	const struct sampler *sm;
	struct native_file *files;
	uint32_t *free_slots; /* a stack of unused slots */
	uint32_t nfree;
	uint32_t nidle; /* files no process maps, kept for the next one */
	uint64_t next_id;
	struct native_stats st;
};

struct native *native_new(const struct sampler *sm)
{
	struct native *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->sm = sm;
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

static void file_free(struct native *n, struct native_file *f)
{
	if (f->slot) {
		n->sm->ops->del_table(n->sm->impl, f->slot);
		n->free_slots[n->nfree++] = f->slot;
		n->st.files--;
		n->st.table_bytes -= f->bytes;
	}
	if (f->fd >= 0)
		close(f->fd);
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
	free(n);
}

/* Reads the PT_LOAD segments of the ELF file open at fd into f, once:
 * every mapping of the file computes its bias from them. */
static void read_loads(struct native_file *f)
{
	Elf *e = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
	size_t nph = 0;
	if (!e)
		return;
	if (elf_kind(e) == ELF_K_ELF && !elf_getphdrnum(e, &nph)) {
		for (size_t i = 0; i < nph && i < 4096 && f->nloads < MAX_LOADS; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			f->loads[f->nloads++] = (struct load_seg){
			    .offset = ph.p_offset,
			    .vaddr = ph.p_vaddr,
			    .filesz = ph.p_filesz,
			    .align = ph.p_align > 1 ? ph.p_align : 1,
			};
		}
	}
	elf_end(e);
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

static uint32_t table_entries(const struct unwtab *t, struct tp_urow **out)
{
	uint32_t n = t->npages + t->nrows;
	struct tp_urow *v = calloc(n, sizeof(*v));
	if (!v)
		return 0;
	for (uint32_t i = 0; i < t->npages; i++)
		v[i].pc = t->pages[i];
	memcpy(v + t->npages, t->rows, (size_t)t->nrows * sizeof(*v));
	*out = v;
	return n;
}

/* Builds f's table from its open fd and gives it to BPF; on failure f keeps
 * slot 0 and its mappings are followed by frame pointers. */
static void file_load(struct native *n, struct native_file *f)
{
	struct unwtab t = {0};
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
	int ret = unwtab_build(f->open_path, &t);
	n->st.build_ns += clock_ns(CLOCK_MONOTONIC) - t0;
	if (ret) {
		log_debug("%s: no unwind table (%s): its frames are followed by frame pointer",
			  f->path, strerror(-ret));
		n->st.files_failed++;
		return;
	}
	struct tp_urow *entries = NULL;
	struct tp_ufile info = {.base = t.base, .npages = t.npages, .nrows = t.nrows};
	if (!n->nfree || !table_entries(&t, &entries)) {
		log_debug("%s: no room for its unwind table", f->path);
		n->st.files_failed++;
		unwtab_free(&t);
		return;
	}
	uint32_t slot = n->free_slots[n->nfree - 1];
	ret = n->sm->ops->put_table(n->sm->impl, slot, &info, entries);
	if (ret) {
		log_debug("%s: BPF refused its unwind table (%u rows): %s", f->path, t.nrows,
			  strerror(-ret));
		n->st.files_failed++;
	} else {
		n->nfree--;
		f->slot = slot;
		f->bytes = (size_t)(t.npages + t.nrows) * sizeof(struct tp_urow);
		n->st.files++;
		n->st.table_bytes += f->bytes;
	}
	free(entries);
	unwtab_free(&t);
}

/* Opens what the mapping maps: through map_files, which reaches the very
 * file even in another mount namespace or after it was deleted, else
 * through the process's root. The vDSO is copied out of the process into
 * a memfd. */
static int open_mapping(pid_t pid, const struct map_entry *me)
{
	char p[4096 + 64];
	if (!strcmp(me->path, "[vdso]")) {
		size_t len = me->end - me->start;
		if (len > VDSO_MAX)
			return -E2BIG;
		void *buf = malloc(len);
		if (!buf)
			return -ENOMEM;
		int fd = mem_read(pid, me->start, buf, len);
		if (!fd) {
			fd = memfd_create("vdso", MFD_CLOEXEC);
			if (fd < 0)
				fd = -errno;
		}
		if (fd >= 0 && write(fd, buf, len) != (ssize_t)len) {
			close(fd);
			fd = -EIO;
		}
		free(buf);
		return fd;
	}
	snprintf(p, sizeof(p), "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)me->start,
		 (unsigned long long)me->end);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	snprintf(p, sizeof(p), "/proc/%d/root%s", pid, me->path);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}

static bool is_vdso(const struct map_entry *me)
{
	return !strcmp(me->path, "[vdso]");
}

/* The file behind me, new (its table built) or shared; NULL for anonymous
 * code, or when it cannot be opened (then frame pointers). */
static void idle_sweep(struct native *n);

static struct native_file *file_get(struct native *n, pid_t pid, const struct map_entry *me)
{
	struct file_key k = {0};
	if (is_vdso(me)) {
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
	if (f) {
		if (!f->refs++)
			n->nidle--;
		return f;
	}
	if (n->nidle > MAX_IDLE_FILES || !n->nfree)
		idle_sweep(n);
	int fd = open_mapping(pid, me);
	if (fd < 0) {
		log_debug("pid %d: cannot open %s: %s: its frames are followed by frame pointer",
			  pid, me->path, strerror(-fd));
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(me->path))) {
		free(f);
		close(fd);
		return NULL;
	}
	f->key = k;
	f->fd = fd;
	snprintf(f->open_path, sizeof(f->open_path), "/proc/self/fd/%d", fd);
	f->refs = 1;
	f->id = ++n->next_id;
	read_loads(f);
	file_load(n, f);
	HASH_ADD(hh, n->files, key, sizeof(f->key), f);
	return f;
}

/* Lets go of a mapping's hold on f. A file no process maps any more keeps
 * its table (the next short-lived process of the same interpreter maps it
 * again) until MAX_IDLE_FILES such files are kept or the slots run out. Its
 * fd stays open meanwhile, so its inode cannot be reused by another file. */
static void file_put(struct native *n, struct native_file *f)
{
	if (f && !--f->refs)
		n->nidle++;
}

/* Frees the files no process maps. */
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

/* A new mapping: its file, its bias, its prefixes in the trie. */
static struct native_map map_add(struct native *n, pid_t pid, const struct map_entry *me)
{
	struct native_map m = {
	    .start = me->start,
	    .end = me->end,
	    .offset = me->offset,
	    .inode = me->inode,
	    .dev_major = me->dev_major,
	    .dev_minor = me->dev_minor,
	};
	struct tp_umap um = {.flags = TP_UM_FP};
	m.bias = me->start - me->offset;
	m.file = file_get(n, pid, me);
	if (m.file) {
		if (is_vdso(me))
			m.bias = me->start;
		else
			map_bias(m.file, me->start, me->offset, &m.bias);
		if (m.file->slot) {
			um.file = m.file->slot;
			um.flags = 0;
		}
	}
	um.bias = m.bias;
	m.nranges = ranges(n, pid, m.start, m.end, &um);
	n->st.ranges += m.nranges;
	return m;
}

int native_scan(struct native *n, pid_t pid, struct native_proc *np)
{
	struct proc_maps pm;
	int ret = procmaps_read(pid, &pm);
	if (ret)
		return ret;
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
	for (size_t i = 0; i < pm.n; i++)
		if (pm.v[i].perms[2] == 'x' && !known[i])
			np->v[np->n++] = map_add(n, pid, &pm.v[i]);
	qsort(np->v, np->n, sizeof(*np->v), map_cmp);
	free(known);
	procmaps_free(&pm);
	return 0;
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
		struct tp_umap um = {.bias = m.bias, .flags = TP_UM_FP};
		if (m.file) {
			m.file->refs++;
			if (m.file->slot) {
				um.file = m.file->slot;
				um.flags = 0;
			}
		}
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
	np->v = NULL;
	np->n = 0;
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
	return f->open_path;
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
