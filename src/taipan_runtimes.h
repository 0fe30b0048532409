/* taipan_runtimes.h - the runtime table: every runtime's ABI, and the lists
 * of them for the code that must know them all: the runtimes user space
 * tries (core/runtimes.c, NAME_runtime), the names of every walk-error id
 * (core/walkerr.c), the programs of every tail-call slot (core/bpfrun.c),
 * and each runtime's BPF entry points (bpf/sample.bpf.h). A runtime is one
 * row in each list, after its tag (enum tp_runtime) and its ABI header.
 */
#ifndef TAIPAN_RUNTIMES_H
#define TAIPAN_RUNTIMES_H

#include "taipan_abi.h"
#include "cpython/abi.h"
#include "ruby/abi.h"

/* X(TAG, NAME): user space's operations are NAME_runtime (core/runtime.h),
 * tried in this order; the runtime's BPF unit defines NAME_start,
 * NAME_whole and NAME_exit (bpf/sample.bpf.h). */
#define TP_RUNTIMES(X) X(TP_RT_CPYTHON, cpython) X(TP_RT_RUBY, ruby)

/* Each runtime's walk errors, X(ID, MARKER, KEY, DESCRIPTION) as
 * TP_WALK_ERRORS, in its range of ids. */
#define TP_RUNTIME_ERRORS(X) TP_PY_ERRORS(X) TP_RB_ERRORS(X)

/* Each runtime's tail-call slots, X(SLOT, PROGRAM, ITS BPF_LOOP BUILD or
 * NULL). */
#define TP_RUNTIME_WALKERS(X) TP_PY_WALKERS(X) TP_RB_WALKERS(X)

#endif /* TAIPAN_RUNTIMES_H */
