// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* proc.bpf.h - the lifecycle of the processes being profiled: forks, new
 * executable mappings, execs and exits keep the maps current and tell user
 * space.
 */
#ifndef TAIPAN_BPF_PROC_BPF_H
#define TAIPAN_BPF_PROC_BPF_H

/* A child of a target becomes a target: `record -- cmd` and --subprocesses
 * follow everything the command starts. Threads share the tgid and need
 * nothing. A fork shares its parent's memory layout, so a child of a known
 * process is known from its first sample: it gets the parent's procs entry
 * (the exec tracepoint removes it again if the child becomes another
 * program), and user space hears of a child of a runtime through a fork
 * event. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	if (ptgid == ctgid)
		return 0;
	if (!cfg.system_wide) {
		if (!cfg.follow_children || !bpf_map_lookup_elem(&targets, &ptgid))
			return 0;
		__u8 one = 1;
		bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY);
	}
	struct tp_proc *proc = bpf_map_lookup_elem(&procs, &ptgid);
	if (!proc)
		return 0;
	/* A copy: the LRU map may evict the parent's entry under us. */
	struct tp_proc copy = *proc;
	if (bpf_map_update_elem(&procs, &ctgid, &copy, BPF_ANY))
		return 0;
	if (copy.runtime == TP_RT_NONE)
		return 0; /* user space needs no word of it */
	struct tp_event ev = {
	    .kind = TP_EV_FORK,
	    .pid = ctgid,
	    .tid = ctgid,
	    .ppid = ptgid,
	    .time_ns = bpf_ktime_get_ns(),
	};
	if (bpf_ringbuf_output(&events, &ev, sizeof(ev), BPF_RB_FORCE_WAKEUP)) {
		/* User space would never hear of it: let the child be announced. */
		bpf_map_delete_elem(&procs, &ctgid);
		stat_inc(TP_STAT_RING_FULL);
	}
	return 0;
}

/* include/uapi/asm-generic/mman-common.h */
#define PROT_EXEC 0x4

/* A process of a runtime maps code (dlopen, import of an extension module):
 * user space reads its mappings again, before the first sample that needs
 * them, if it can. Samples that come first end their native part with
 * TP_UERR_UNMAPPED, which asks too. */
SEC("tracepoint/syscalls/sys_enter_mmap")
int on_mmap(struct trace_event_raw_sys_enter *ctx)
{
	if (!cfg.native || !(ctx->args[2] & PROT_EXEC))
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct tp_proc *proc = bpf_map_lookup_elem(&procs, &tgid);
	if (!proc || proc->runtime == TP_RT_NONE)
		return 0;
	send_event(TP_EV_UNMAPPED, tgid, (__u32)id);
	return 0;
}

/* After exec the process is another program: forget what we knew. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (!tracked(tgid))
		return 0;
	bpf_map_delete_elem(&procs, &tgid);
	bpf_map_delete_elem(&announced, &tgid);
	/* The time of the exec, before its event: a classification that
	 * started earlier and read the process after it is looked at again. */
	__u64 now = bpf_ktime_get_ns();
	bpf_map_update_elem(&exec_ns, &tgid, &now, BPF_ANY);
	send_event_at(TP_EV_EXEC, tgid, BPF_CORE_READ(p, pid), now);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	__u32 tgid = BPF_CORE_READ(p, tgid);
	/* What each runtime keeps of the thread. */
#define TP_X_EXIT(rt, name) name##_exit(tid);
	TP_RUNTIMES(TP_X_EXIT)
#undef TP_X_EXIT
	if (cfg.offcpu) {
		/* Its time away that still waits for a look (switched_in). */
		struct tp_switch_task *t = bpf_task_storage_get(&switch_tasks, p, NULL, 0);
		if (t)
			early_flush(t, tgid);
	}
	if (tid != tgid || !tracked(tgid))
		return 0;
	bpf_map_delete_elem(&procs, &tgid);
	bpf_map_delete_elem(&announced, &tgid);
	send_event(TP_EV_EXIT, tgid, tid);
	bpf_map_delete_elem(&targets, &tgid);
	return 0;
}

#endif /* TAIPAN_BPF_PROC_BPF_H */
