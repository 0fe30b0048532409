/* pyproc.h - is this process Python, which version, and where is its state?
 *
 * Everything is learnt from /proc/PID/maps, the mapped ELF files (through
 * /proc/PID/map_files or /proc/PID/root) and the target's memory. The target
 * is never executed, stopped or written to.
 */
#ifndef TAIPAN_PYPROC_H
#define TAIPAN_PYPROC_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cpython/linetable.h"
#include "proc/memread.h"
#include "cpython/pyoffsets.h"
#include "cpython/abi.h"
#include "cpython/constants.h"

struct pyproc {
	pid_t pid;
	uint32_t ns_pid; /* pid in the process's own namespace, 0 when the same */
	char comm[TP_COMM_LEN];
	uint32_t hexversion; /* PY_VERSION_HEX; micro and release may be 0 when unknown */
	unsigned int major, minor;
	bool free_threaded;	    /* a free-threaded build (PEP 703), from _Py_DebugOffsets */
	char version[24];	    /* "3.11.7", "3.13.15t" when free-threaded, or "3.8" when
				     * only the minor is known */
	const char *version_source; /* which source answered: for logs */
	const char *layout_source;  /* where the offsets came from */
	char binary[PATH_MAX];	    /* the ELF holding the interpreter, as the process sees it */
	uint64_t bias;		    /* load bias of that ELF */
	uint64_t runtime_addr;	    /* &_PyRuntime in the target, 0 before 3.7 */
	uint64_t code_type_addr;    /* &PyCode_Type in the target, 0 if unknown */
	struct py_layout layout;
	enum py_linetable_kind linetable;
	bool lasti_in_units;	 /* f_lasti counts code units (3.10), not bytes */
	enum py_objdict objdict; /* where instance attributes live */
	struct tp_py_proc tp;	 /* what BPF gets, in its procs entry */
	/* Where its memory is read: NULL for the live process (pid), else a
	 * captured image's reader (src/cpython/capture.h). */
	mem_reader read;
	void *read_ctx;
};

/* Decodes a str's PyASCIIObject.state as pp's build lays it out (3.14t+
 * shift its bits: cpython/constants.h): the size of its characters (1, 2 or 4)
 * when it is compact, the only form taipan reads, else 0; *ascii says
 * whether its data follows the PyASCIIObject (else a
 * PyCompactUnicodeObject). */
static inline unsigned int pyproc_str_kind(const struct pyproc *pp, uint32_t state, bool *ascii)
{
	bool byte_interned =
	    pp->free_threaded && (pp->major > 3 || pp->minor >= PY_STATE_FT_SINCE_MINOR);
	unsigned int sh = byte_interned ? PY_STATE_FT_SHIFT : 0,
		     kind = (state >> (PY_STATE_KIND_SHIFT + sh)) & PY_STATE_KIND_MASK;
	*ascii = (state >> (PY_STATE_ASCII_SHIFT + sh)) & 1;
	if (!((state >> (PY_STATE_COMPACT_SHIFT + sh)) & 1) ||
	    (kind != 1 && kind != 2 && kind != 4))
		return 0;
	return kind;
}

/* Reads len bytes of pp's memory at addr, with mem_read()'s contract. */
int pyproc_read(const struct pyproc *pp, uint64_t addr, void *buf, size_t len);

/* Reads a NUL-terminated string of pp's, as mem_read_cstr(). */
int pyproc_read_cstr(const struct pyproc *pp, uint64_t addr, char *buf, size_t max);

/* Classifies pid. Returns:
 *   0        a supported Python process; *out is filled
 *  -ENOEXEC  not a Python process (nothing that looks like CPython is mapped)
 *  -ENOTSUP  Python, but a version or build taipan cannot read (err says which)
 *  -ESRCH    the process is gone
 *  other negative errno on other failures.
 * err always gets a one-line message naming the pid and what to do. */
int pyproc_inspect(pid_t pid, struct pyproc *out, char *err, size_t errlen);

/* Facts read from interpreter files, shared by every process that maps the
 * same file (device, inode, size, mtime): a new process of a known
 * interpreter is classified without parsing ELF again, and so is a process
 * of a known non-Python program. Bounded. */
struct pyproc_cache;
struct pyproc_cache *pyproc_cache_new(void);
void pyproc_cache_free(struct pyproc_cache *c);

/* pyproc_inspect() with a cache (c may be NULL). */
int pyproc_inspect_cached(struct pyproc_cache *c, pid_t pid, struct pyproc *out, char *err,
			  size_t errlen);

/* Derives what depends on the version from pp->major, pp->minor and
 * pp->layout: the BPF offsets and flags in pp->tp, the line-table kind and
 * the unit of f_lasti (what pyproc_inspect() does once it knows them).
 * Returns 0, or -ENOTSUP with err filled. */
int pyproc_derive(struct pyproc *pp, char *err, size_t errlen);

/* 3.13+: pp->layout and pp->free_threaded from the _Py_DebugOffsets at
 * pp->runtime_addr, read through pp's reader, checked against
 * pp->hexversion's minor; a free-threaded build's pp->version gets its
 * "t". Returns 0, or a negative errno with err saying why (-ENOTSUP: not a
 * _Py_DebugOffsets taipan can use). */
int pyproc_read_debug_offsets(struct pyproc *pp, char *err, size_t errlen);

#endif /* TAIPAN_PYPROC_H */
