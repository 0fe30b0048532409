// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* taipan.bpf.c - the kernel side, one BPF object of units by job: on each
 * cpu-clock sample of a process of a runtime, walk the running thread's
 * interpreted stack, then its native one; take a thread's stack as it
 * leaves the CPU; follow forks, execs and exits of the processes being
 * profiled; name kernel addresses; list a process's threads.
 *
 * The units are headers (*.bpf.h) included here in the order of what they
 * use: the shared maps, the sample driver, native unwinding, each runtime's
 * unit (one line each, with its row in taipan_runtimes.h), then the
 * programs that use them all.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "taipan_abi.h"
#include "taipan_runtimes.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#include "bpf/maps.bpf.h"   /* the settings, the maps every unit shares, events */
#include "bpf/sample.bpf.h" /* the sample driver: state, tail-call table, finish */
#include "bpf/native.bpf.h" /* native unwinding */

/* The runtimes' units. */
#include "cpython/cpython.bpf.h"
#include "ruby/ruby.bpf.h"

#include "bpf/offcpu.bpf.h" /* off-CPU samples (sched_switch) */
#include "bpf/proc.bpf.h"   /* fork, exec, exit, mmap */
#include "bpf/ksym.bpf.h"   /* kernel-symbol naming (a syscall program) */
#include "bpf/snap.bpf.h"   /* the task iterator */
