// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* snap.bpf.h - the task iterator: the threads of process snap_tgid as the
 * kernel holds them while they are off the CPU: state, CPU time, the user
 * registers saved as each entered the kernel, its kernel stack. A thread
 * asleep since before a wall recording started never leaves the CPU while
 * BPF watches, perhaps not until the recording ends; user space reads its
 * interpreted and native stacks from these (core/offcpu.c, "asleep at the
 * start"). Run by user space through an iterator, never attached; loaded
 * with on_switch.
 */
#ifndef TAIPAN_BPF_SNAP_BPF_H
#define TAIPAN_BPF_SNAP_BPF_H

__u32 snap_tgid;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tp_thread_snap);
} snap_buf SEC(".maps");

SEC("iter/task")
int snap_threads(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	__u32 zero = 0;
	if (!task || task->tgid != snap_tgid || !snap_tgid)
		return 0;
	struct tp_thread_snap *r = bpf_map_lookup_elem(&snap_buf, &zero);
	if (!r)
		return 0;
	r->tid = task->pid;
	r->state = BPF_CORE_READ(task, __state);
	r->on_cpu = BPF_CORE_READ(task, on_cpu);
	r->ran_ns = task->se.sum_exec_runtime;
	r->fsbase = BPF_CORE_READ(task, thread.fsbase);
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), task->comm);
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	r->ip = BPF_CORE_READ(regs, ip);
	r->sp = BPF_CORE_READ(regs, sp);
	r->bp = BPF_CORE_READ(regs, bp);
	long n = bpf_get_task_stack(task, r->kstack, sizeof(r->kstack), 0);
	r->nkstack = n > 0 ? (__u32)n / sizeof(__u64) : 0;
	bpf_seq_write(ctx->meta->seq, r, sizeof(*r));
	return 0;
}

#endif /* TAIPAN_BPF_SNAP_BPF_H */
