/* taskstate.h - why a thread is off the CPU, from the kernel's task state:
 * one rule for BPF (on_switch, as a thread leaves the CPU) and user space
 * (core/offcpu.c, the threads already asleep when a wall recording starts),
 * so that both name a stretch alike (enum tp_thread_state).
 */
#ifndef TAIPAN_WALK_TASKSTATE_H
#define TAIPAN_WALK_TASKSTATE_H

#include "taipan_abi.h"

/* include/linux/sched.h: the bits of task->__state (prev_state at
 * sched_switch). Not in vmlinux.h, which has types, not macros. */
#define TP_TASK_INTERRUPTIBLE 0x0001
#define TP_TASK_UNINTERRUPTIBLE 0x0002
#define TP_TASK_STOPPED_OR_TRACED 0x000c
#define TP_TASK_NOLOAD 0x0400

/* Whether a thread in state (not on a CPU) sleeps: interruptibly, not, or
 * stopped. */
static inline __attribute__((always_inline)) int tp_task_asleep(__u32 state)
{
	return (state &
		(TP_TASK_INTERRUPTIBLE | TP_TASK_UNINTERRUPTIBLE | TP_TASK_STOPPED_OR_TRACED)) != 0;
}

/* Why a thread left the CPU: preempted (or yielding) while still runnable,
 * asleep, or in an uninterruptible wait that counts as load (the disk;
 * TASK_IDLE, which does not count, is a kernel thread's idle sleep). */
static inline __attribute__((always_inline)) __u8 tp_off_state(int preempt, __u32 state)
{
	if (preempt || !state)
		return TP_TS_RUNNABLE;
	if ((state & (TP_TASK_UNINTERRUPTIBLE | TP_TASK_NOLOAD)) == TP_TASK_UNINTERRUPTIBLE)
		return TP_TS_BLOCKED;
	return TP_TS_SLEEPING;
}

#endif /* TAIPAN_WALK_TASKSTATE_H */
