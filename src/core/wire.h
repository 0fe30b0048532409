/* wire.h - samples as the ring buffer carries them: packed, each array cut
 * to its used entries (taipan_abi.h, struct tp_sample). BPF packs
 * (bpf/sample.bpf.h, submit()); user space unpacks, and packs where it
 * stands in for BPF (the tests' fake sampler). */
#ifndef TAIPAN_WIRE_H
#define TAIPAN_WIRE_H

#include <stddef.h>

#include "taipan_abi.h"

/* Packs s into out (room for sizeof(*s)); returns the bytes written. The
 * counts must be within their arrays. */
size_t wire_pack(const struct tp_sample *s, void *out);

/* Unpacks the len bytes at wire into *out: 0, or -1 when they are not a
 * whole packed sample (a count beyond its array, or a size that does not
 * match the counts). Only the used entries of out's arrays are written. */
int wire_unpack(const void *wire, size_t len, struct tp_sample *out);

#endif /* TAIPAN_WIRE_H */
