// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* sample.bpf.h - the sample driver: on each cpu-clock sample of a process of
 * a runtime, the per-CPU walk state, the sample's header and kernel stack,
 * the runtime's walk, the native one, and the sample into the ring.
 *
 * A perf sample's walk is a chain of programs through the tail-call table
 * (progs): on_sample starts it, the runtime's walkers and the native
 * unwinder go on in turn, and whichever program ends the chain sends the
 * sample. An off-CPU sample (bpf/offcpu.bpf.h) walks in one program.
 *
 * The driver names no runtime. Each runtime's unit (TP_RUNTIMES in
 * taipan_runtimes.h; CPython's is cpython/cpython.bpf.h), included after
 * this one, gives it:
 *   NAME_start(ctx, st, id, fsbase, loop)  a perf sample's walk of thread
 *       id (pid_tgid) from its thread pointer: tail-calls the runtime's
 *       walker, whose chain ends in finish(); or returns, and the driver
 *       finishes the sample. loop: the bpf_loop build.
 *   NAME_whole(st, id, fsbase)  the same walk, whole, in the calling
 *       program, through bpf_loop (off-CPU samples)
 *   NAME_exit(tid)  thread tid exits: forget what is kept of it
 */
#ifndef TAIPAN_BPF_SAMPLE_BPF_H
#define TAIPAN_BPF_SAMPLE_BPF_H

/* What the walk state (walk/state.h) asks of its includer. BPF's own part
 * is room for what a runtime's unit keeps that only BPF needs (CPython's:
 * the code objects to describe), sized for the largest: each unit checks
 * that its part fits. */
#define TPW_HOST_RT_BYTES 13312
struct tpw_host {
	__u8 rt[TPW_HOST_RT_BYTES] __attribute__((aligned(8)));
};
#define tpw_read(st, dst, len, addr) bpf_probe_read_user((dst), (len), (const void *)(addr))
#define tpw_count(st, stat) stat_inc(stat)

#include "walk/state.h"

/* The walk under construction, one slot per CPU (user space sets
 * max_entries to the number of possible CPUs). Not a per-CPU array because
 * the value is larger than per-CPU maps allow. Perf samples do not nest on
 * one CPU, so a slot is never shared. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tpw_state);
} scratch SEC(".maps");

/* The walker programs (enum tp_walker and each runtime's range of slots),
 * which tail-call themselves and each other until the sample is sent. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, TP_NWALKERS);
	__type(key, __u32);
	__type(value, __u32);
} progs SEC(".maps");

/* This CPU's walk state (the scratch map), and the CPU in *cpu if asked. */
static __always_inline struct tpw_state *cpu_state(__u32 *cpu)
{
	__u32 id = bpf_get_smp_processor_id();
	if (cpu)
		*cpu = id;
	return bpf_map_lookup_elem(&scratch, &id);
}

/* bpf_loop's callbacks, for kernels that have it (5.17+): the verifier
 * checks a callback's body once, where it checks an unrolled loop's body
 * once per copy. ctx points to struct loop_ctx on the caller's stack. */
struct loop_ctx {
	struct tpw_state *st;
	__u64 fsbase; /* the thread pointer, for a runtime's search of its threads */
};

/* Each CPU's sample packed for the ring (taipan_abi.h, struct tp_sample):
 * the header, then only the used entries of each array. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tp_sample);
} wire SEC(".maps");

/* Sends the sample, packed; false if the ring was full. */
static __always_inline bool submit(struct tpw_state *st)
{
	struct tp_sample *s = &st->s;
	__u32 cpu = bpf_get_smp_processor_id();
	__u8 *w = bpf_map_lookup_elem(&wire, &cpu);
	if (!w)
		return false;
	__u64 nk = s->nkstack, nu = s->nustack, nf = s->nframes;
	if (nk > TP_KSTACK_MAX)
		nk = TP_KSTACK_MAX;
	if (nu > TP_USTACK_MAX)
		nu = TP_USTACK_MAX;
	if (nf > TP_MAX_FRAMES)
		nf = TP_MAX_FRAMES;
	__u64 nw = TP_UWORDS(nu), at = TP_SAMPLE_HDR;
	__builtin_memcpy(w, s, TP_SAMPLE_HDR);
	/* Each part's bytes lie within its array, so the packed sample
	 * within the value; the reads cannot fail. */
	bpf_probe_read_kernel(w + at, nk * 8, s->kstack);
	at += nk * 8;
	bpf_probe_read_kernel(w + at, nw * 8, s->anchored);
	at += nw * 8;
	bpf_probe_read_kernel(w + at, nw * 8, s->exact);
	at += nw * 8;
	bpf_probe_read_kernel(w + at, nu * 8, s->ustack);
	at += nu * 8;
	/* What it is already, for the verifier, whose bounds of the words
	 * over nu are looser. */
	if (at > __builtin_offsetof(struct tp_sample, frames))
		at = __builtin_offsetof(struct tp_sample, frames);
	bpf_probe_read_kernel(w + at, nf * sizeof(struct tp_frame), s->frames);
	at += nf * sizeof(struct tp_frame);
	if (bpf_ringbuf_output(&events, w, at, ring_flags())) {
		stat_inc(TP_STAT_RING_FULL);
		return false;
	}
	stat_inc(TP_STAT_SENT);
	if (st->s.err)
		stat_inc(TP_STAT_ERR_BASE + (st->s.err < TP_ERR__COUNT ? st->s.err : 0));
	if (st->s.uerr)
		stat_inc(TP_STAT_UERR_BASE + (st->s.uerr < TP_UERR__COUNT ? st->s.uerr : 0));
	return true;
}

/* The native unwinder's (bpf/native.bpf.h): native_start() reads the
 * sampled thread's user registers and starts the native walk, false when
 * there are none; native_whole() walks the whole native stack in the
 * calling program. */
static __always_inline bool native_start(struct tpw_state *st);
static __always_inline void native_whole(struct tpw_state *st);

#define TP_X_DECLARE(rt, name)                                                                     \
	static __always_inline void name##_start(void *ctx, struct tpw_state *st, __u64 id,        \
						 __u64 fsbase, bool loop);                         \
	static __always_inline void name##_whole(struct tpw_state *st, __u64 id, __u64 fsbase);    \
	static __always_inline void name##_exit(__u32 tid);
TP_RUNTIMES(TP_X_DECLARE)
#undef TP_X_DECLARE

/* This CPU's walk state, set up for a sample of thread tid of process tgid
 * (described by proc) at time now: its header and kernel stack. NULL if the
 * state cannot be had. */
static __always_inline struct tpw_state *begin_sample(void *ctx, const struct tp_proc *proc,
						      __u32 tgid, __u32 tid, __u64 now)
{
	__u32 cpu;
	struct tpw_state *st = cpu_state(&cpu);
	if (!st)
		return NULL;
	struct tp_sample *s = &st->s;
	s->pid = tgid;
	s->tid = tid;
	s->cpu = cpu;
	s->time_ns = now;
	st->proc = *proc;
	tpw_begin(st);
	bpf_get_current_comm(s->comm, sizeof(s->comm));
	if (cfg.kernel_stacks) {
		long got = bpf_get_stack(ctx, s->kstack, sizeof(s->kstack), 0);
		if (got > 0)
			s->nkstack = got / sizeof(__u64);
	}
	return st;
}

/* The fs base of the current thread, which finds its thread state; 0 with
 * the sample's error set when there is none to use. */
static __always_inline __u64 thread_fsbase(struct tpw_state *st)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	/* In exit, past its thread state's deletion and soon its memory's
	 * (exit_mm): nothing of the runtime to read, and reads would fail as
	 * if the interpreter were broken. */
	if (BPF_CORE_READ(task, flags) & PF_EXITING) {
		st->s.err = TP_ERR_EXITING;
		return 0;
	}
	__u64 fsbase = BPF_CORE_READ(task, thread.fsbase);
	if (!fsbase)
		st->s.err = TP_ERR_FSBASE;
	return fsbase;
}

/* The interpreted walk is over: unwind the native stack, if asked to, then
 * send the sample; false if the ring was full. whole: in the calling
 * program, through bpf_loop (off-CPU samples); else by tail calls of the
 * native unwinder, whose last program sends the sample. */
static __always_inline bool finish(void *ctx, struct tpw_state *st, bool whole)
{
	if (cfg.native && native_start(st)) {
		if (whole) {
			native_whole(st);
		} else {
			bpf_tail_call(ctx, &progs, TP_WALK_NATIVE);
			st->s.uerr = TP_UERR_STEPS;
		}
	}
	return submit(st);
}

/* Every sample starts here: is it of a runtime's process, which thread;
 * then the runtime's walker takes over. With loop set, the bpf_loop build
 * of each program. */
static __always_inline int sample_prog(struct bpf_perf_event_data *ctx, bool loop)
{
	if (cfg.empty_sample)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;

	if (tgid == 0 || tgid == cfg.self_tgid)
		return 0;
	/* procs holds only processes that were tracked when user space
	 * classified them, and they stay tracked until they exit: a hit
	 * needs no look in targets. */
	struct tp_proc *proc = bpf_map_lookup_elem(&procs, &tgid);
	if (!proc && !tracked(tgid))
		return 0;
	stat_inc(TP_STAT_SAMPLES);
	if (!proc) {
		/* A task still runs for a while after its exit tracepoint
		 * removed it: not a new process to announce. */
		struct task_struct *cur = (struct task_struct *)bpf_get_current_task();
		if (BPF_CORE_READ(cur, flags) & PF_EXITING)
			return 0;
		stat_inc(TP_STAT_UNKNOWN_PROC);
		struct tp_unknown *lost = bpf_map_lookup_elem(&unknown_samples, &tgid);
		if (lost) {
			__sync_fetch_and_add(&lost->samples, 1);
		} else {
			struct tp_unknown one = {.samples = 1};
			bpf_map_update_elem(&unknown_samples, &tgid, &one, BPF_NOEXIST);
		}
		announce(tgid, tid);
		return 0;
	}
	__u8 rt = proc->runtime;
	if (rt == TP_RT_NONE) {
		stat_inc(TP_STAT_NO_RUNTIME);
		return 0;
	}

	struct tpw_state *st = begin_sample(ctx, proc, tgid, tid, bpf_ktime_get_ns());
	if (!st)
		return 0;
	__u64 fsbase = thread_fsbase(st);
	if (fsbase) {
		switch (rt) {
#define TP_X_START(rt, name)                                                                       \
	case rt:                                                                                   \
		name##_start(ctx, st, id, fsbase, loop);                                           \
		break;
			TP_RUNTIMES(TP_X_START)
#undef TP_X_START
		}
	}
	finish(ctx, st, false);
	return 0;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	return sample_prog(ctx, false);
}

SEC("perf_event")
int on_sample_loop(struct bpf_perf_event_data *ctx)
{
	return sample_prog(ctx, true);
}

#endif /* TAIPAN_BPF_SAMPLE_BPF_H */
