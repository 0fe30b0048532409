/* nwalk.h - the native stacks of a live process's threads, read from user
 * space for `taipan dump`: each thread is stopped with ptrace only while its
 * registers and stacks are read, then unwound by the BPF unwinder's own code
 * (src/walk/native.h) over unwind tables built for the files its stack
 * touches; and for --mode wall, the stacks of the threads asleep when the
 * recording starts, from the registers the kernel saved.
 */
#ifndef TAIPAN_NWALK_H
#define TAIPAN_NWALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/runtime.h"
#include "taipan_abi.h"

struct nwalk;

/* What one dump measured. */
struct nwalk_stats {
	uint64_t stopped_ns;  /* the threads spent stopped, all together */
	uint64_t max_stop_ns; /* the longest stop of one thread */
	uint64_t build_ns;    /* building unwind tables */
	uint32_t tables;      /* tables built */
	uint32_t threads;     /* threads unwound */
	uint32_t stuck;	      /* threads that did not stop in time */
};

/* How long nwalk_thread() waits for a thread to stop. */
#define NWALK_STOP_TIMEOUT_MS 1000

/* A walker of pid's threads, whose runtime is rt and its data rp (their
 * interpreted frames, and what the merge needs of native ones); reads pid's
 * maps now. Returns 0 and *out, or a negative errno (-ESRCH: gone;
 * -ENOMEM). Free with nwalk_free(). */
int nwalk_new(pid_t pid, const struct runtime_ops *rt, const struct rt_proc *rp,
	      struct nwalk **out);
/* Accepts NULL. */
void nwalk_free(struct nwalk *nw);

/* Stops thread tid (host tid) with PTRACE_SEIZE and PTRACE_INTERRUPT, reads
 * its registers, walks the Python frames of its thread state tstate (0: none)
 * and its native stack into *out (TP_SF_NATIVE, ustack, uerr), and lets it go
 * (PTRACE_DETACH, a signal that arrived meanwhile re-delivered). Returns 0,
 * or a negative errno with why in err (ptrace refused: another tracer, Yama's
 * ptrace_scope; the thread exited); -ENOMEM. A thread that does not stop
 * within NWALK_STOP_TIMEOUT_MS (uninterruptible sleep: a vfork parent, a
 * D-state system call) gives -ETIMEDOUT, and err says so. It stays seized,
 * its interrupt pending, since ptrace detaches only a stopped thread: if it
 * stops before nwalk_free(), that lets it go; else the kernel does when
 * taipan exits, cancelling the interrupt. */
int nwalk_thread(struct nwalk *nw, pid_t tid, uint64_t tstate, struct tp_sample *out, char *err,
		 size_t errlen);

/* The native stack of a thread of the process that is asleep in the kernel,
 * from the user registers it entered it with (struct tp_thread_snap), into
 * *out (TP_SF_NATIVE, ustack, uerr; TP_SF_ANCHORED and anchored, with the
 * anchors of the runtime's walk of the thread, or NULL): nothing is stopped. The thread must not
 * run meanwhile; the caller checks that its CPU time stayed the same. */
/* Room for the anchors of a runtime's walk of a thread, for nwalk_regs(). */
struct tpw_anchors *nwalk_anchors(struct nwalk *nw);

void nwalk_regs(struct nwalk *nw, uint64_t ip, uint64_t sp, uint64_t bp,
		const struct tpw_anchors *anchors, struct tp_sample *out);

/* A named native frame. */
struct nwalk_sym {
	char name[320];
	const char *module; /* the file as the process names it; lives as nw does */
	char build_id[128]; /* lowercase hex, "" when unknown */
	uint8_t kind;	    /* enum merge_nkind */
	bool anon;	    /* in anonymous memory: JIT code, if anything */
};

/* Names addr of the process; sampled: the interrupted instruction, not a
 * return address. */
void nwalk_name(struct nwalk *nw, uint64_t addr, bool sampled, struct nwalk_sym *out);

/* The executable mapping of the process that holds addr, as the process's
 * maps were when nw was made: its path, "" for anonymous memory, or NULL
 * when none holds it. */
const char *nwalk_mapping_at(const struct nwalk *nw, uint64_t addr);

void nwalk_get_stats(const struct nwalk *nw, struct nwalk_stats *out);

#endif /* TAIPAN_NWALK_H */
