/* pystr.h - a CPython str object read out of the target as UTF-8: the one
 * decoder of the symbolizer (names and file names of code objects) and of
 * the thread names. */
#ifndef TAIPAN_CPYTHON_PYSTR_H
#define TAIPAN_CPYTHON_PYSTR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpython/pyproc.h"

/* A read of the target's memory, with mem_read()'s contract. */
typedef int (*pystr_reader)(void *ctx, uint64_t addr, void *buf, size_t len);

/* Reads the str at obj (a bytes str on 2.7) of pp's build through rd, as
 * UTF-8 into buf (cap bytes, NUL-terminated): at most max_chars characters,
 * cut at a character when longer. Characters that UTF-8 cannot carry (lone
 * surrogates, past U+10FFFF) become U+FFFD; 2.7's bytes are copied as they
 * are. Only the compact forms are read: names and file names always are.
 * Returns the length written, or -1 when obj is not a readable str; *cut
 * says whether it was cut. */
int pystr_read(const struct pyproc *pp, pystr_reader rd, void *ctx, uint64_t obj, size_t max_chars,
	       char *buf, size_t cap, bool *cut);

#endif /* TAIPAN_CPYTHON_PYSTR_H */
