// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* offcpu.bpf.h - off-CPU time (--mode wall and off-cpu;
 * doc/design/off-cpu.md). When a thread of a target leaves the CPU, its stack
 * is taken right there, while its memory is still the current one, and sent
 * as a sample with TP_SF_OFFCPU and the reason it left; its task's storage
 * remembers when. When it runs again, a TP_EV_SWITCH_IN event carries both
 * times, and user space weighs the sample by the difference.
 *
 * The program runs at every context switch of the host, so what it keeps
 * per thread is task-local storage, not a hash map: a thread without any
 * costs a pointer test, one with some a cached load.
 */
#ifndef TAIPAN_BPF_OFFCPU_BPF_H
#define TAIPAN_BPF_OFFCPU_BPF_H

#include "walk/taskstate.h"

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tp_switch_task);
} switch_tasks SEC(".maps");

/* Adds thread t's time away before its process was recognised to the
 * process's tp_unknown, where user space finds it (at the recognition, a
 * window's end, the stop). */
static __always_inline void early_flush(struct tp_switch_task *t, __u32 tgid)
{
	__u32 i;
	if (!(t->early_n[TP_TS_RUNNABLE] | t->early_n[TP_TS_SLEEPING] | t->early_n[TP_TS_BLOCKED]))
		return;
	struct tp_unknown *u = bpf_map_lookup_elem(&unknown_samples, &tgid);
	if (!u) {
		struct tp_unknown zero = {};
		bpf_map_update_elem(&unknown_samples, &tgid, &zero, BPF_NOEXIST);
		u = bpf_map_lookup_elem(&unknown_samples, &tgid);
	}
	for (i = TP_TS_RUNNABLE; i < TP_TS__COUNT; i++) {
		if (u && t->early_n[i]) {
			__sync_fetch_and_add(&u->off_ns[i], t->early_ns[i]);
			__sync_fetch_and_add(&u->stretches[i], t->early_n[i]);
		}
		t->early_ns[i] = 0;
		t->early_n[i] = 0;
	}
}

/* Thread t, whose stack left at t's away_ns, ran again at in_ns: user space
 * weighs that stack by the difference; or, left before its process was
 * recognised (no stack), the time is kept in t and goes to the process's
 * tp_unknown. A stretch that began in this jiffy waits there for the next
 * look (a young process switches thousands of times a second, and a map
 * update at each cost a switch 270 ns: bench/switch.py); a longer one, and
 * what waited with it, go now, so that what a thread holds when the
 * recording stops is less than a jiffy of time away. */
static __always_inline void switched_in(struct tp_switch_task *t, struct task_struct *task,
					__u64 in_ns, __u32 flags, __u64 jiffies)
{
	if (t->early) {
		__u32 st = (t->early - 1) & (TP_TS__COUNT - 1);
		if (in_ns > t->away_ns) {
			t->early_ns[st] += in_ns - t->away_ns;
			t->early_n[st]++;
		}
		t->away_ns = 0;
		t->early = 0;
		if (t->checked != jiffies)
			early_flush(t, task->tgid);
		return;
	}
	struct tp_switch_ev ev = {
	    .kind = TP_EV_SWITCH_IN,
	    .pid = task->tgid,
	    .tid = task->pid,
	    .flags = flags,
	    .out_ns = t->away_ns,
	    .in_ns = in_ns,
	};
	t->away_ns = 0;
	if (bpf_ringbuf_output(&events, &ev, sizeof(ev), ring_flags())) {
		stat_inc(TP_STAT_RING_FULL);
	} else {
		stat_inc(TP_STAT_SWITCH_IN);
		if (flags & TP_SWF_RECOVERED)
			stat_inc(TP_STAT_SWITCH_IN_MISSED);
	}
}

/* The runtime's walk of the current thread, whole, in this program: a
 * tracing program cannot tail call the perf_event walkers. */
static __always_inline void walk_whole(struct tpw_state *st, __u64 id)
{
	__u64 fsbase = thread_fsbase(st);
	if (!fsbase)
		return;
	switch (st->s.runtime) {
#define TP_X_WHOLE(rt, name)                                                                       \
	case rt:                                                                                   \
		name##_whole(st, id, fsbase);                                                      \
		break;
		TP_RUNTIMES(TP_X_WHOLE)
#undef TP_X_WHOLE
	}
}

/* prev leaves the CPU (it is still the current task), next takes it. A
 * thread of no target costs two task-storage loads and, once a jiffy, a
 * look in procs (a process classified since is a target from the next
 * jiffy on); one of a process not recognised yet, two clock reads more.
 * Loaded only with cfg.offcpu, and only where bpf_loop is. */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	/* bench/switch.py's floor: what the tracepoint costs with a program
	 * that does nothing (TAIPAN_BENCH_EMPTY_SWITCH=1). */
	if (cfg.offcpu == TP_OFFCPU_EMPTY)
		return 0;
	__u64 j = bpf_jiffies64();
	struct tp_switch_task *n = bpf_task_storage_get(&switch_tasks, next, NULL, 0);
	if (n && n->away_ns && !(cfg.drop_in && bpf_get_prandom_u32() % cfg.drop_in == 0))
		switched_in(n, next, bpf_ktime_get_ns(), 0, j);

	__u32 tgid = prev->tgid;
	if (tgid == 0 || tgid == cfg.self_tgid || (prev->flags & PF_EXITING))
		return 0;
	struct tp_switch_task *p =
	    bpf_task_storage_get(&switch_tasks, prev, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!p)
		return 0;
	struct tp_proc *proc = NULL;
	if (p->checked == j) {
		/* Looked at in this jiffy: as it was then, but for a target's
		 * process forgotten since (an exec) or found to be of no
		 * runtime. */
		if (p->target == TP_SWT_NONE)
			return 0;
		if (p->target == TP_SWT_RUNTIME) {
			proc = bpf_map_lookup_elem(&procs, &tgid);
			if (!proc) {
				p->target = TP_SWT_EARLY;
			} else if (proc->runtime == TP_RT_NONE) {
				p->target = TP_SWT_NONE;
				return 0;
			}
		}
	} else {
		p->checked = j;
		early_flush(p, tgid);
		p->target = TP_SWT_NONE;
		proc = bpf_map_lookup_elem(&procs, &tgid);
		if (proc && proc->runtime == TP_RT_NONE)
			return 0;
		if (!proc && !tracked(tgid))
			return 0;
		p->target = proc ? TP_SWT_RUNTIME : TP_SWT_EARLY;
		if (!proc)
			announce(tgid, prev->pid);
	}
	__u64 now = bpf_ktime_get_ns();
	/* The scheduler has just brought its CPU time up to date. */
	__u64 ran = prev->se.sum_exec_runtime;
	if (p->away_ns) {
		/* It is leaving again, and no sched_switch told of its return:
		 * it came back as long before now as it has run since. */
		__u64 since = ran > p->ran_ns ? ran - p->ran_ns : 0;
		__u64 back = now - p->away_ns > since ? now - since : p->away_ns;
		switched_in(p, prev, back, TP_SWF_RECOVERED, j);
	}
	if (!proc) {
		/* Tracked, not recognised yet: no stack to take, but its time
		 * away counts for the process (struct tp_unknown). */
		p->away_ns = now;
		p->ran_ns = ran;
		p->early = tp_off_state(preempt, prev_state) + 1;
		return 0;
	}
	__u64 id = bpf_get_current_pid_tgid();
	struct tpw_state *st = begin_sample(ctx, proc, tgid, (__u32)id, now);
	if (!st)
		return 0;
	st->s.flags |= TP_SF_OFFCPU;
	st->s.state = tp_off_state(preempt, prev_state);
	walk_whole(st, id);
	if (finish(ctx, st, true)) {
		stat_inc(TP_STAT_SWITCH_OUT);
		p->away_ns = now;
		p->ran_ns = ran;
	}
	return 0;
}

#endif /* TAIPAN_BPF_OFFCPU_BPF_H */
