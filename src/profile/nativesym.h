/* nativesym.h - names for native code addresses: ELF symbols, separate debug
 * files and MiniDebugInfo, C++ demangled, cached per file.
 *
 * Addresses are link-time virtual addresses (what nm, readelf -s, addr2line
 * and gdb's "info symbol" use for a file on its own). nativesym_vaddr()
 * turns the file offset of a sampled address into one. An address is named
 * only when a function symbol covers it; otherwise it stays unnamed and is
 * shown as module+0xVADDR (nativesym_format()), never as a neighbour.
 */
#ifndef TAIPAN_NATIVESYM_H
#define TAIPAN_NATIVESYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A cache of indexed files, keyed by build-id (else device and inode), so
 * that every process mapping one libpython shares one index. Bounded (LRU).
 * Not thread-safe. */
struct nativesym;

/* A new, empty cache with the default bounds. NULL when out of memory. */
struct nativesym *nativesym_new(void);
/* Frees it and every index. Accepts NULL. */
void nativesym_free(struct nativesym *ns);

/* Changes the bounds: at most max_files indexed files and max_bytes of
 * index memory (each at least one file is kept). Evicts at once if needed. */
void nativesym_set_limits(struct nativesym *ns, size_t max_files, size_t max_bytes);

/* How many files are indexed and the bytes their indexes hold. */
void nativesym_counts(const struct nativesym *ns, size_t *files, size_t *bytes);

/* How many files were indexed only in part (past the per-file bound of
 * 64 MiB, cut before it was allocated) and how many not kept at all (the
 * budget had no room, even with every other file evicted). */
void nativesym_limited(const struct nativesym *ns, uint64_t *cut, uint64_t *over_budget);

struct budget;
/* Takes the memory of every index from b (util/budget.h) from now on,
 * evicting the least recently used files when it is short. NULL: none. */
void nativesym_set_budget(struct nativesym *ns, struct budget *b);

/* Fetches the debug files it lacks through d (profile/debuginfod.h;
 * NULL: none): a stripped file without a local debug file is indexed from
 * what it has while its debug file is on its way, and again once it came,
 * so that later lookups find its functions. */
struct dinfod;
void nativesym_set_debuginfod(struct nativesym *ns, struct dinfod *d);
/* Whether a fetch ended since the last call: a file indexed while its
 * debug file was on its way is indexed again at its next lookup, so names
 * cached from the first index are to be looked up again. */
bool nativesym_changed(struct nativesym *ns);

/* A mapped file, as the caller knows it from /proc/PID/maps. */
struct nativesym_file {
	/* Where taipan opens it: "/proc/PID/root/usr/lib/libc.so.6" for a
	 * process in another mount namespace, or /proc/PID/map_files/... */
	const char *path;
	/* The process's root as taipan opens it ("/proc/PID/root"); NULL or
	 * "" for the host's. Debug files are looked for under it (resolved
	 * inside it: a symlink there never leads out), then on the host. */
	const char *root;
	/* The process whose root root is (0: none said): a debug file in
	 * its root is read only if that process's user may read it. */
	pid_t pid;
	/* The file as the process names it; NULL: path without the root
	 * prefix. */
	const char *module;
	/* From maps; both 0 when unknown (then path is stat()ed, and size
	 * and mtime come from there too). */
	uint64_t dev, ino;
	/* Optional (0 when unknown): the file's size and st_mtim in ns. Part
	 * of the key with dev and ino, so that a file deleted and replaced
	 * under a reused inode number (a package upgrade) is indexed anew. */
	uint64_t size, mtime_ns;
};

/* Which table named an address. */
enum nativesym_source {
	NATIVESYM_SRC_NONE = 0, /* unnamed */
	NATIVESYM_SRC_SYMTAB,	/* the file's own .symtab */
	NATIVESYM_SRC_DYNSYM,	/* the file's .dynsym */
	NATIVESYM_SRC_DEBUG,	/* /usr/lib/debug/.build-id/xx/rest.debug */
	NATIVESYM_SRC_MINIDEBUG /* .gnu_debugdata (MiniDebugInfo) */
};

/* What an address is. */
struct nativesym_sym {
	const char *name;     /* demangled function name; NULL when unnamed */
	uint64_t offset;      /* vaddr minus the function's start, when named */
	uint64_t vaddr;	      /* the address looked up */
	const char *module;   /* the file as the process names it (caller's string) */
	const char *build_id; /* lowercase hex, "" when the file has none */
	enum nativesym_source source;
};

/* Names link-time address vaddr of file f. Returns 0 with *out filled (its
 * name NULL when no function symbol covers vaddr), or a negative errno
 * naming why the file could not be read: -ENOENT/-EACCES/... from open(2),
 * -ENOEXEC for a file that is not a readable 64-bit ELF (truncated ones
 * included), -ENOMEM. out->module is filled even on failure, and build_id
 * is then "". Strings of *out other than module belong to ns and live until
 * the next nativesym_lookup() or nativesym_vaddr() call (the file's index
 * may be evicted then): copy or intern them. */
int nativesym_lookup(struct nativesym *ns, const struct nativesym_file *f, uint64_t vaddr,
		     struct nativesym_sym *out);

/* The link-time address of file offset off of f (what a sampled address is
 * in its mapping: addr - map start + map offset), through the PT_LOAD
 * segment holding it. Returns 0, -ERANGE when no segment maps off, or
 * nativesym_lookup()'s errors. */
int nativesym_vaddr(struct nativesym *ns, const struct nativesym_file *f, uint64_t off,
		    uint64_t *vaddr);

/* Writes s's frame name into buf: "name" when it is named (offsets are not
 * part of a frame's name), else "MODULE+0xVADDR" with MODULE the base name
 * of s->module. Returns snprintf()'s value. */
int nativesym_format(const struct nativesym_sym *s, char *buf, size_t size);

struct prof_frame;
/* Names link-time address vaddr of file f as a native frame of a profile:
 * out's name (written into buf, len bytes: the function, else
 * "MODULE+0xVADDR"), module (f as the process names it) and build-id; the
 * caller sets its addr. The one naming of a native frame, for the session's
 * stacks and dump's walker alike. Returns the function's name as the
 * symbol table has it (for the merge's kind), or NULL when unnamed. The
 * strings live as nativesym_lookup()'s do. */
const char *nativesym_frame(struct nativesym *ns, const struct nativesym_file *f, uint64_t vaddr,
			    char *buf, size_t len, struct prof_frame *out);

#endif /* TAIPAN_NATIVESYM_H */
