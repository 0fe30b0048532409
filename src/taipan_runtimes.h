/* taipan_runtimes.h - every runtime's ABI, and the lists of them for the
 * code that must know them all: each runtime's BPF unit (bpf/taipan.bpf.c).
 * A runtime is one row in each list, after its tag (enum tp_runtime) and its
 * ABI header.
 */
#ifndef TAIPAN_RUNTIMES_H
#define TAIPAN_RUNTIMES_H

#include "taipan_abi.h"
#include "cpython/abi.h"

/* X(TAG, NAME): the runtime's BPF unit defines NAME_start and NAME_whole
 * (bpf/sample.bpf.h). */
#define TP_RUNTIMES(X) X(TP_RT_CPYTHON, cpython)

#endif /* TAIPAN_RUNTIMES_H */
