/* nativesym.c - native addresses to function names, one index per file.
 *
 * Each file is indexed once: its function symbols from .symtab and .dynsym,
 * then, when it has no .symtab, from its separate debug file (found by
 * build-id under /usr/lib/debug/.build-id/, in the process's root, then the
 * host's), else from its MiniDebugInfo (.gnu_debugdata, an xz-compressed ELF
 * holding a .symtab). The merged table is copied out of the files, which are
 * then closed: the cache holds no descriptors and no mappings.
 *
 * Indexes are keyed by build-id, and found through the device and inode of
 * the file first, so a new process of a known interpreter costs one hash
 * lookup and no open(2). Files that are not ELF are remembered too.
 */
#include "profile/nativesym.h"

#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* uthash's default on allocation failure is exit(); this flag instead. */
#define uthash_nonfatal_oom(ent) ((ent)->oom = true)
#include <uthash.h>

#include "profile/debuginfod.h"
#include "profile/profile.h"
#include "proc/elfsym.h"
#include "proc/safeopen.h"
#include "util/budget.h"

/* libstdc++'s demangler (<cxxabi.h> is C++ only). Returns a malloc()ed
 * string and *status 0, or NULL. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

#define BUILD_ID_HEX (2 * 64 + 1)
#define MAX_LOADS 16
#define DEFAULT_MAX_FILES 512
#define DEFAULT_MAX_BYTES ((size_t)256 << 20)
/* An unpacked .gnu_debugdata bigger than this is not a symbol table. */
#define MINIDEBUG_MAX ((size_t)64 << 20)
/* The most one file's index may hold (functions and names): a file with
 * more symbols is indexed up to this, the rest cut before anything is
 * allocated for them. libpython's index is about 1 MiB, libtorch_cpu's
 * .dynsym about 40. */
#define FILE_INDEX_MAX ((size_t)64 << 20)

struct nfunc {
	uint64_t start;
	uint64_t end;  /* == start: size unknown, only start itself is named */
	uint32_t name; /* offset into the module's names */
	uint8_t src;   /* enum nativesym_source */
	uint8_t bind;
	uint16_t pad;
};

struct nalias;

struct nmod {
	char build_id[BUILD_ID_HEX];
	struct nfunc *funcs;
	size_t nfuncs, cap;
	char *names;
	size_t names_len, names_cap;
	char **demangled; /* per func, made on first lookup; NULL until then */
	struct elf_load loads[MAX_LOADS];
	size_t nloads;
	size_t bytes;
	/* Indexed while its debug file was on its way (debuginfod): 1 +
	 * dinfod_ended() then; 0 otherwise. */
	uint64_t awaiting;
	struct nmod *prev, *next; /* LRU, most recent first */
	struct nalias *aliases;	  /* device+inode keys that lead here */
	bool in_hash;
	bool oom;
	UT_hash_handle hh; /* by build_id */
};

struct akey {
	uint64_t dev, ino, size, mtime_ns;
};

struct nalias {
	struct akey key;
	struct nmod *mod; /* NULL: the file is not a readable ELF */
	int err;
	struct nalias *next_of_mod;
	bool oom;
	UT_hash_handle hh;
};

struct nativesym {
	struct budget *budget;
	struct nmod *by_id;
	struct nalias *by_inode;
	struct nmod *lru_head, *lru_tail;
	size_t nmods, naliases, bytes;
	size_t max_files, max_bytes;
	uint64_t cut, over_budget;
	struct dinfod *dinfod;
	uint64_t seen_ended; /* dinfod_ended() as nativesym_changed() last saw it */
};

struct nativesym *nativesym_new(void)
{
	struct nativesym *ns = calloc(1, sizeof(*ns));

	if (!ns)
		return NULL;
	ns->max_files = DEFAULT_MAX_FILES;
	ns->max_bytes = DEFAULT_MAX_BYTES;
	return ns;
}

static void mod_free(struct nmod *m)
{
	if (m->demangled)
		for (size_t i = 0; i < m->nfuncs; i++)
			free(m->demangled[i]);
	free(m->demangled);
	free(m->funcs);
	free(m->names);
	free(m);
}

/* Unlinks m from every structure and frees it with its aliases. */
static void mod_evict(struct nativesym *ns, struct nmod *m)
{
	struct nalias *a, *next;

	for (a = m->aliases; a; a = next) {
		next = a->next_of_mod;
		HASH_DEL(ns->by_inode, a);
		ns->naliases--;
		free(a);
	}
	if (m->in_hash)
		HASH_DEL(ns->by_id, m);
	if (m->prev)
		m->prev->next = m->next;
	else
		ns->lru_head = m->next;
	if (m->next)
		m->next->prev = m->prev;
	else
		ns->lru_tail = m->prev;
	ns->nmods--;
	ns->bytes -= m->bytes;
	budget_give(ns->budget, m->bytes);
	mod_free(m);
}

/* Takes n more bytes for m from the budget, evicting the least recently
 * used other files while it is short. Returns whether it got them. */
static bool mod_charge(struct nativesym *ns, struct nmod *m, size_t n)
{
	while (!budget_take(ns->budget, n)) {
		struct nmod *victim = ns->lru_tail;

		if (victim == m)
			victim = m->prev;
		if (!victim)
			return false;
		mod_evict(ns, victim);
	}
	m->bytes += n;
	if (m->prev || m->next || ns->lru_head == m)
		ns->bytes += n;
	return true;
}

void nativesym_free(struct nativesym *ns)
{
	struct nalias *a, *tmp;

	if (!ns)
		return;
	while (ns->lru_head)
		mod_evict(ns, ns->lru_head);
	HASH_ITER(hh, ns->by_inode, a, tmp)
	{
		HASH_DEL(ns->by_inode, a);
		free(a);
	}
	free(ns);
}

/* Drops least recently used files until the bounds hold, keeping the most
 * recent one; and forgets the non-ELF files when they outnumber the rest. */
static void enforce_limits(struct nativesym *ns)
{
	while (ns->lru_tail && ns->lru_tail != ns->lru_head &&
	       (ns->nmods > ns->max_files || ns->bytes > ns->max_bytes))
		mod_evict(ns, ns->lru_tail);
	if (ns->naliases > 4 * ns->max_files + 64) {
		struct nalias *a, *tmp;

		HASH_ITER(hh, ns->by_inode, a, tmp)
		{
			if (a->mod)
				continue;
			HASH_DEL(ns->by_inode, a);
			ns->naliases--;
			free(a);
		}
	}
}

void nativesym_set_budget(struct nativesym *ns, struct budget *b)
{
	ns->budget = b;
}

void nativesym_set_limits(struct nativesym *ns, size_t max_files, size_t max_bytes)
{
	ns->max_files = max_files ? max_files : 1;
	ns->max_bytes = max_bytes;
	enforce_limits(ns);
}

void nativesym_counts(const struct nativesym *ns, size_t *files, size_t *bytes)
{
	*files = ns->nmods;
	*bytes = ns->bytes;
}

void nativesym_limited(const struct nativesym *ns, uint64_t *cut, uint64_t *over_budget)
{
	*cut = ns->cut;
	*over_budget = ns->over_budget;
}

static void lru_touch(struct nativesym *ns, struct nmod *m)
{
	if (ns->lru_head == m)
		return;
	/* unlink (m is in the list unless it is new) */
	if (m->prev || m->next || ns->lru_tail == m) {
		if (m->prev)
			m->prev->next = m->next;
		if (m->next)
			m->next->prev = m->prev;
		else
			ns->lru_tail = m->prev;
	}
	m->prev = NULL;
	m->next = ns->lru_head;
	if (ns->lru_head)
		ns->lru_head->prev = m;
	ns->lru_head = m;
	if (!ns->lru_tail)
		ns->lru_tail = m;
}

/* Remembers that key leads to m (or, m NULL, to error err). Failure to
 * allocate only loses the shortcut. */
static void alias_add(struct nativesym *ns, const struct akey *key, struct nmod *m, int err)
{
	struct nalias *a = calloc(1, sizeof(*a));

	if (!a)
		return;
	a->key = *key;
	a->mod = m;
	a->err = err;
	HASH_ADD(hh, ns->by_inode, key, sizeof(a->key), a);
	if (a->oom) {
		free(a);
		return;
	}
	ns->naliases++;
	if (m) {
		a->next_of_mod = m->aliases;
		m->aliases = a;
	}
}

/* --- building an index ---------------------------------------------------- */

/* PLT stubs named at most, per file. */
#define PLT_MAX 65536

struct collect {
	struct nmod *m;
	uint8_t src; /* NATIVESYM_SRC_* for .symtab entries of this file */
	bool symtab_seen;
	bool *cut;    /* set when the index reached its limit */
	size_t limit; /* bytes of functions and names the index may hold */
	int err;
};

static int add_func(const struct elf_func *f, void *ctx)
{
	struct collect *c = ctx;
	struct nmod *m = c->m;
	size_t len = strlen(f->name) + 1;
	struct nfunc *nf;

	if (!f->dynsym)
		c->symtab_seen = true;
	if (*c->cut)
		return 0;
	if (m->nfuncs == m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 256;
		struct nfunc *nv;

		/* Cut before allocating past the limit. */
		if (ncap * sizeof(*nv) + m->names_cap > c->limit) {
			*c->cut = true;
			return 0;
		}
		nv = realloc(m->funcs, ncap * sizeof(*nv));

		if (!nv)
			return c->err = -ENOMEM;
		m->funcs = nv;
		m->cap = ncap;
	}
	if (m->names_len + len > m->names_cap) {
		size_t ncap = m->names_cap ? m->names_cap * 2 : 4096;
		char *nv;

		while (ncap < m->names_len + len)
			ncap *= 2;
		if (ncap > UINT32_MAX || m->cap * sizeof(*m->funcs) + ncap > c->limit) {
			*c->cut = true;
			return 0;
		}
		nv = realloc(m->names, ncap);
		if (!nv)
			return c->err = -ENOMEM;
		m->names = nv;
		m->names_cap = ncap;
	}
	memcpy(m->names + m->names_len, f->name, len);
	nf = &m->funcs[m->nfuncs++];
	nf->start = f->value;
	/* A hostile size must not wrap around. */
	nf->end = f->size > UINT64_MAX - f->value ? UINT64_MAX : f->value + f->size;
	nf->name = m->names_len;
	nf->src = f->dynsym ? NATIVESYM_SRC_DYNSYM : c->src;
	nf->bind = f->bind;
	m->names_len += len;
	return 0;
}

/* Adds ef's functions to m, up to limit bytes of index (past it *cut is
 * set and the rest left out). Returns 0 or a negative errno; *symtab tells
 * whether ef had a .symtab (with functions). */
static int collect_from(struct nmod *m, struct elf_file *ef, uint8_t src, bool *symtab,
			size_t limit, bool *cut)
{
	struct collect c = {.m = m, .src = src, .limit = limit, .cut = cut};
	int r = elf_file_funcs(ef, add_func, &c);

	if (symtab)
		*symtab = c.symtab_seen;
	return r ? c.err : 0;
}

/* perf's preference among symbols at one address (choose_best_symbol), so
 * that names agree with perf report: a size over none (the size-0 one is
 * often a folded .cold part's other name), not weak, then global, then
 * fewer leading underscores, then the longer name. Lower ranks first. */
static int bind_rank(int bind)
{
	return bind == STB_GLOBAL ? 0 : bind == STB_LOCAL ? 1 : 2;
}

static size_t underscores(const char *s)
{
	size_t n = 0;

	while (s[n] == '_')
		n++;
	return n;
}

static int nfunc_cmp(const void *a, const void *b, void *names)
{
	const struct nfunc *x = a, *y = b;
	const char *nx = (const char *)names + x->name, *ny = (const char *)names + y->name;
	size_t ux, uy, lx, ly;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if ((x->end == x->start) != (y->end == y->start))
		return x->end == x->start ? 1 : -1;
	if (bind_rank(x->bind) != bind_rank(y->bind))
		return bind_rank(x->bind) - bind_rank(y->bind);
	ux = underscores(nx);
	uy = underscores(ny);
	if (ux != uy)
		return ux < uy ? -1 : 1;
	lx = strlen(nx);
	ly = strlen(ny);
	if (lx != ly)
		return lx > ly ? -1 : 1;
	if (x->src != y->src)
		return x->src < y->src ? -1 : 1;
	return strcmp(nx, ny);
}

/* Sorts by address, keeps one name per address, and cuts each function at
 * the next one's start, so that a lookup needs one binary search and an
 * address is never named after a symbol that does not cover it. */
static void finish_index(struct nmod *m)
{
	size_t j = 0;

	if (!m->nfuncs)
		return;
	qsort_r(m->funcs, m->nfuncs, sizeof(*m->funcs), nfunc_cmp, m->names);
	for (size_t i = 0; i < m->nfuncs; i++) {
		if (j && m->funcs[j - 1].start == m->funcs[i].start) {
			/* Aliases: the preferred one keeps the widest extent. */
			if (m->funcs[i].end > m->funcs[j - 1].end)
				m->funcs[j - 1].end = m->funcs[i].end;
			continue;
		}
		m->funcs[j++] = m->funcs[i];
	}
	m->nfuncs = j;
	for (size_t i = 0; i + 1 < m->nfuncs; i++)
		if (m->funcs[i].end > m->funcs[i + 1].start)
			m->funcs[i].end = m->funcs[i + 1].start;
}

/* Unpacks an xz stream. Returns 0 with a malloc()ed *out, -EBADMSG for a
 * corrupt or truncated one, -EFBIG past MINIDEBUG_MAX, or -ENOMEM. */
static int unxz(const void *in, size_t inlen, void **out, size_t *outlen)
{
	lzma_stream strm = LZMA_STREAM_INIT;
	size_t cap = inlen < 4096 ? 16384 : inlen * 4, len = 0;
	unsigned char *buf = NULL;
	lzma_ret ret;
	int err;

	if (cap > MINIDEBUG_MAX)
		cap = MINIDEBUG_MAX;
	if (lzma_stream_decoder(&strm, 256 << 20, 0) != LZMA_OK)
		return -ENOMEM;
	strm.next_in = in;
	strm.avail_in = inlen;
	for (;;) {
		if (!buf || len == cap) {
			unsigned char *nb;

			if (buf) {
				if (cap >= MINIDEBUG_MAX) {
					err = -EFBIG;
					goto out;
				}
				cap = cap * 2 > MINIDEBUG_MAX ? MINIDEBUG_MAX : cap * 2;
			}
			nb = realloc(buf, cap);
			if (!nb) {
				err = -ENOMEM;
				goto out;
			}
			buf = nb;
		}
		strm.next_out = buf + len;
		strm.avail_out = cap - len;
		ret = lzma_code(&strm, LZMA_FINISH);
		len = cap - strm.avail_out;
		if (ret == LZMA_STREAM_END)
			break;
		if (ret == LZMA_MEM_ERROR) {
			err = -ENOMEM;
			goto out;
		}
		/* LZMA_OK with room left, or LZMA_BUF_ERROR: no progress with
		 * all the input given, so it ends early. */
		if (ret != LZMA_OK || strm.avail_out) {
			err = -EBADMSG;
			goto out;
		}
	}
	*out = buf;
	*outlen = len;
	buf = NULL;
	err = 0;
out:
	lzma_end(&strm);
	free(buf);
	return err;
}

/* Adds the functions of ef's .gnu_debugdata, if it has a usable one. */
static int add_minidebug(struct nmod *m, struct elf_file *ef, size_t limit, bool *cut)
{
	struct elf_file *mini;
	const void *xz;
	size_t xzlen, len;
	void *img;
	int err;

	if (elf_file_section_bytes(ef, ".gnu_debugdata", &xz, &xzlen))
		return 0;
	err = unxz(xz, xzlen, &img, &len);
	if (err)
		return err == -ENOMEM ? err : 0; /* corrupt: as if absent */
	err = elf_file_open_mem(img, len, &mini);
	if (err) {
		free(img);
		return err == -ENOMEM ? err : 0;
	}
	err = collect_from(m, mini, NATIVESYM_SRC_MINIDEBUG, NULL, limit, cut);
	elf_file_close(mini);
	return err;
}

void nativesym_set_debuginfod(struct nativesym *ns, struct dinfod *d)
{
	ns->dinfod = d;
}

bool nativesym_changed(struct nativesym *ns)
{
	uint64_t ended = ns->dinfod ? dinfod_ended(ns->dinfod) : 0;

	if (ended == ns->seen_ended)
		return false;
	ns->seen_ended = ended;
	return true;
}

/* Adds the functions of the debug file open at fd (< 0: none; it is
 * closed), if it is one of m's build: 1 when it is not (not ELF, or a stale
 * debug file of another build, which would name wrongly), else
 * collect_from()'s result, *found set when it succeeded. */
static int add_debug_fd(struct nmod *m, int fd, bool *found, size_t limit, bool *cut)
{
	struct elf_file *dbg;
	char id[BUILD_ID_HEX];
	int err;

	if (fd < 0 || elf_file_open_fd(fd, &dbg))
		return 1;
	if (elf_file_build_id(dbg, id, sizeof(id)) || strcmp(id, m->build_id)) {
		elf_file_close(dbg);
		return 1;
	}
	err = collect_from(m, dbg, NATIVESYM_SRC_DEBUG, NULL, limit, cut);
	elf_file_close(dbg);
	*found = !err;
	return err;
}

/* The functions of the debug file of build-id m->build_id that debuginfod
 * fetched, if it is there; m->awaiting set when it is on its way. */
static int add_fetched(struct nmod *m, struct dinfod *d, bool *found, size_t limit, bool *cut)
{
	char path[PATH_MAX];
	uint64_t ended = dinfod_ended(d);
	int err = dinfod_find(d, m->build_id, path, sizeof(path));

	if (err == -EAGAIN)
		m->awaiting = ended + 1;
	if (err)
		return err == -ENOMEM ? err : 0;
	/* In libdebuginfod's cache, taipan's own: a regular file only. */
	err = add_debug_fd(m, safe_open(path), found, limit, cut);
	return err > 0 ? 0 : err;
}

/* Adds the functions of the separate debug file of build-id m->build_id,
 * looked for in root (resolved inside it, and read only if as may read it:
 * safe_open_in()), then on the host, then through debuginfod d (NULL:
 * not). *found says whether one was used. */
static int add_debug_file(struct nmod *m, const char *root, const struct safe_reader *as,
			  struct dinfod *d, bool *found, size_t limit, bool *cut)
{
	const char *roots[2] = {root && *root && strcmp(root, "/") ? root : NULL, "/"};
	char path[PATH_MAX];

	*found = false;
	if (strlen(m->build_id) < 4)
		return 0;
	if (snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%.2s/%s.debug", m->build_id,
		     m->build_id + 2) >= (int)sizeof(path))
		return 0;
	for (int i = 0; i < 2; i++) {
		int err;

		if (!roots[i])
			continue;
		/* A target's root is its owner's: a symlink there must not
		 * lead taipan to a file of the host. */
		err =
		    add_debug_fd(m, safe_open_in(roots[i], path, i ? NULL : as), found, limit, cut);
		if (err <= 0)
			return err;
	}
	return d ? add_fetched(m, d, found, limit, cut) : 0;
}

/* Indexes ef (already open) into a new module, of at most limit bytes. */
static int index_file(struct elf_file *ef, const char *build_id, const char *root,
		      const struct safe_reader *as, struct dinfod *d, size_t limit,
		      struct nmod **out, bool *cut)
{
	struct nmod *m = calloc(1, sizeof(*m));
	bool symtab = false, debug = false;
	int err;

	*cut = false;
	if (!m)
		return -ENOMEM;
	snprintf(m->build_id, sizeof(m->build_id), "%s", build_id);
	err = elf_file_loads(ef, m->loads, MAX_LOADS, &m->nloads);
	if (err && err != -E2BIG)
		goto fail;
	err = collect_from(m, ef, NATIVESYM_SRC_SYMTAB, &symtab, limit, cut);
	/* A file with a .symtab has all its functions already. */
	if (!err && !symtab)
		err = add_debug_file(m, root, as, d, &debug, limit, cut);
	if (!err && !symtab && !debug)
		err = add_minidebug(m, ef, limit, cut);
	/* The stubs of the PLT, which no symbol table names: a thread is
	 * often caught in one on its way into the library it calls. */
	if (!err) {
		struct collect c = {
		    .m = m, .src = NATIVESYM_SRC_DYNSYM, .limit = limit, .cut = cut};
		if (elf_file_plt(ef, PLT_MAX, add_func, &c))
			err = c.err ? c.err : -ENOMEM;
	}
	if (err)
		goto fail;
	finish_index(m);
	*out = m;
	return 0;
fail:
	mod_free(m);
	return err;
}

/* The index of f: from the cache, or built. Returns 0 or a negative errno. */
static int get_mod(struct nativesym *ns, const struct nativesym_file *f, struct nmod **out)
{
	char id[BUILD_ID_HEX] = "";
	struct elf_file *ef;
	struct nalias *a;
	struct akey key;
	struct nmod *m = NULL;
	int err;

	key.dev = f->dev;
	key.ino = f->ino;
	key.size = f->size;
	key.mtime_ns = f->mtime_ns;
	if (!key.dev && !key.ino) {
		struct stat st;

		if (stat(f->path, &st) < 0)
			return -errno;
		key.dev = st.st_dev;
		key.ino = st.st_ino;
		key.size = st.st_size;
		key.mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000u + st.st_mtim.tv_nsec;
	}
	HASH_FIND(hh, ns->by_inode, &key, sizeof(key), a);
	/* Indexed while its debug file was on its way, which has come (or
	 * will not): indexed again. */
	if (a && a->mod && a->mod->awaiting && ns->dinfod &&
	    dinfod_ended(ns->dinfod) + 1 != a->mod->awaiting) {
		char path[PATH_MAX];

		if (dinfod_find(ns->dinfod, a->mod->build_id, path, sizeof(path)) != -EAGAIN) {
			mod_evict(ns, a->mod);
			a = NULL;
		} else {
			a->mod->awaiting = dinfod_ended(ns->dinfod) + 1;
		}
	}
	if (a) {
		if (!a->mod)
			return a->err;
		lru_touch(ns, a->mod);
		*out = a->mod;
		return 0;
	}

	err = elf_file_open(f->path, &ef);
	if (err) {
		/* Only what the file is, not what the moment was (a
		 * vanished process, a full descriptor table). */
		if (err == -ENOEXEC)
			alias_add(ns, &key, NULL, err);
		return err;
	}
	if (elf_file_build_id(ef, id, sizeof(id)))
		id[0] = '\0';
	if (id[0])
		HASH_FIND_STR(ns->by_id, id, m);
	if (!m) {
		size_t limit = FILE_INDEX_MAX < ns->max_bytes ? FILE_INDEX_MAX : ns->max_bytes;
		/* A process's root holds what its user put there: only what
		 * that user may read is read (unknown: only what anyone may). */
		struct safe_reader as = {(uid_t)-1, (gid_t)-1};
		bool cut;

		if (f->pid)
			safe_reader_of(f->pid, &as);
		err = index_file(ef, id, f->root, f->pid ? &as : NULL, ns->dinfod, limit, &m, &cut);
		if (err) {
			elf_file_close(ef);
			return err;
		}
		if (cut)
			ns->cut++;
		/* Its memory from the budget, older files evicted for it;
		 * with no room even so, it is not kept. */
		if (!mod_charge(ns, m, sizeof(*m) + m->cap * sizeof(*m->funcs) + m->names_cap)) {
			ns->over_budget++;
			mod_free(m);
			elf_file_close(ef);
			return -ENOBUFS;
		}
		if (id[0]) {
			HASH_ADD_STR(ns->by_id, build_id, m);
			m->in_hash = !m->oom;
		}
		ns->nmods++;
		ns->bytes += m->bytes;
	}
	elf_file_close(ef);
	lru_touch(ns, m);
	alias_add(ns, &key, m, 0);
	enforce_limits(ns);
	*out = m;
	return 0;
}

/* --- lookups -------------------------------------------------------------- */

static const char *module_of(const struct nativesym_file *f)
{
	size_t n;

	if (f->module)
		return f->module;
	if (f->root && *f->root) {
		n = strlen(f->root);
		if (!strncmp(f->path, f->root, n) && f->path[n] == '/')
			return f->path + n;
	}
	return f->path;
}

/* The name of m's function i, demangled once (its memory from the
 * budget; the raw name when there is none left). */
static const char *func_name(struct nativesym *ns, struct nmod *m, size_t i)
{
	const char *raw = m->names + m->funcs[i].name;
	int status = -1;
	char *d;

	if (strncmp(raw, "_Z", 2))
		return raw;
	if (!m->demangled) {
		if (!mod_charge(ns, m, m->nfuncs * sizeof(*m->demangled)))
			return raw;
		m->demangled = calloc(m->nfuncs, sizeof(*m->demangled));
		if (!m->demangled) {
			m->bytes -= m->nfuncs * sizeof(*m->demangled);
			ns->bytes -= m->nfuncs * sizeof(*m->demangled);
			budget_give(ns->budget, m->nfuncs * sizeof(*m->demangled));
			return raw;
		}
	}
	if (m->demangled[i])
		return m->demangled[i];
	d = __cxa_demangle(raw, NULL, NULL, &status);
	if (!d || status != 0 || !mod_charge(ns, m, strlen(d) + 1)) {
		free(d);
		return raw;
	}
	m->demangled[i] = d;
	return d;
}

int nativesym_lookup(struct nativesym *ns, const struct nativesym_file *f, uint64_t vaddr,
		     struct nativesym_sym *out)
{
	size_t lo = 0, hi;
	struct nmod *m;
	int err;

	memset(out, 0, sizeof(*out));
	out->vaddr = vaddr;
	out->module = module_of(f);
	out->build_id = "";
	err = get_mod(ns, f, &m);
	if (err)
		return err;
	out->build_id = m->build_id;
	/* The last function starting at or before vaddr. */
	hi = m->nfuncs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->funcs[mid].start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	lo--;
	if (vaddr < m->funcs[lo].end ||
	    (m->funcs[lo].end == m->funcs[lo].start && vaddr == m->funcs[lo].start)) {
		out->name = func_name(ns, m, lo);
		out->offset = vaddr - m->funcs[lo].start;
		out->source = m->funcs[lo].src;
	}
	return 0;
}

int nativesym_vaddr(struct nativesym *ns, const struct nativesym_file *f, uint64_t off,
		    uint64_t *vaddr)
{
	struct nmod *m;
	int err;

	err = get_mod(ns, f, &m);
	if (err)
		return err;
	for (size_t i = 0; i < m->nloads; i++) {
		const struct elf_load *l = &m->loads[i];

		if (off >= l->offset && off - l->offset < l->filesz) {
			*vaddr = l->vaddr + (off - l->offset);
			return 0;
		}
	}
	return -ERANGE;
}

int nativesym_format(const struct nativesym_sym *s, char *buf, size_t size)
{
	const char *base;

	if (s->name)
		return snprintf(buf, size, "%s", s->name);
	base = s->module ? strrchr(s->module, '/') : NULL;
	base = base ? base + 1 : s->module ? s->module : "?";
	return snprintf(buf, size, "%s+0x%" PRIx64, base, s->vaddr);
}

const char *nativesym_frame(struct nativesym *ns, const struct nativesym_file *f, uint64_t vaddr,
			    char *buf, size_t len, struct prof_frame *out)
{
	struct nativesym_sym sym;
	nativesym_lookup(ns, f, vaddr, &sym);
	nativesym_format(&sym, buf, len);
	out->kind = PROF_FRAME_NATIVE;
	out->name = buf;
	out->module = module_of(f);
	out->build_id = sym.build_id && *sym.build_id ? sym.build_id : NULL;
	return sym.name;
}
