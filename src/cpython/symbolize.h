/* symbolize.h - Python frames (code object, position) to names, files, lines. */
#ifndef TAIPAN_SYMBOLIZE_H
#define TAIPAN_SYMBOLIZE_H

#include <stdint.h>

#include "profile/profile.h"
#include "cpython/pyproc.h"
#include "taipan_abi.h"

struct symbolizer;

/* A symbolizer for one process; it keeps what it needs from pp. NULL when out
 * of memory. */
struct symbolizer *symbolizer_new(const struct pyproc *pp);
void symbolizer_free(struct symbolizer *sz);

/* Fills out (a Python frame) from f: qualified name (co_qualname on 3.11+,
 * else Class.name through self/cls, else the name), file, and the line being
 * run. The strings belong to sz and live until symbolizer_free(). Returns 0;
 * or a negative errno when the code object could not be read, out then being
 * the marker frame "[unknown]"; or -ESTALE when the object now at f->code is
 * not the one the sample saw (tp_frame.ident), out then being the marker
 * "[code object freed]"; or SYMBOLIZER_SKIP for a frame that CPython runs on
 * its own behalf (3.13's __init__ shim), which stacks leave out as BPF does
 * the other shims. Each code object is read once and cached. */
#define SYMBOLIZER_SKIP 1
int symbolizer_frame(struct symbolizer *sz, const struct tp_frame *f, struct prof_frame *out);

/* Keeps BPF's first look at a code object (struct tp_code_ev), for a frame
 * of it whose object is gone by the time it is named. Returns 0 or -ENOMEM. */
int symbolizer_describe(struct symbolizer *sz, const struct tp_code_ev *ev);

/* Code objects named from BPF's first look so far. */
uint64_t symbolizer_snapshots_used(const struct symbolizer *sz);

/* Code objects read, and how many of them failed. */
void symbolizer_counts(const struct symbolizer *sz, uint64_t *codes, uint64_t *failed);

struct budget;
/* Charges what sz holds to b (util/budget.h) from now on: sz reads nothing
 * new once b is spent. NULL: none. */
void symbolizer_set_budget(struct symbolizer *sz, struct budget *b);

/* The bytes sz holds. */
size_t symbolizer_bytes(const struct symbolizer *sz);

/* Code objects whose line table was another's, kept once. */
uint64_t symbolizer_lines_shared(const struct symbolizer *sz);

#endif /* TAIPAN_SYMBOLIZE_H */
