/* state.h - the state of one walk, whatever the runtime: the sample being
 * built, the window on the target's memory, the native unwinder's registers,
 * and room for the runtime's own part. One source compiled twice, like the
 * walkers that share it: BPF keeps one per CPU in a map (bpf/sample.bpf.h),
 * user space one per walk.
 *
 * Before including this file, the includer defines:
 *   struct tpw_host          its own part of struct tpw_state (may be a dummy)
 *   tpw_read(st, dst, len, addr)   copy len bytes of target memory at addr;
 *                            0, or negative when any byte is unreadable
 *   tpw_count(st, stat)      count one enum tp_stat event
 * BPF backs them with bpf_probe_read_user and its stats map, user space with
 * process_vm_readv (or a captured image) and its own counters. A runtime's
 * walker (cpython/walk.h) asks for more hooks of its own.
 *
 * The code is written for the verifier: every index into a buffer is masked
 * to the buffer's size. Those masks also keep a user-space build inside its
 * buffers whatever the target's memory holds.
 */
#ifndef TAIPAN_WALK_STATE_H
#define TAIPAN_WALK_STATE_H

#include "taipan_abi.h"

#ifdef __BPF__
#define TPW_INLINE static __always_inline
#else
#include <stdbool.h>
#define TPW_INLINE static inline
#endif

/* Room for a runtime's own walk state (struct tpw_state.rt): its caches and
 * its position in the stack. Sized for the largest; each runtime's walker
 * checks that its part fits (cpython/walk.h). */
#define TPW_RT_BYTES (12 << 10)

/* Everything one walk needs. BPF keeps one per CPU in a map, which is why
 * the runtimes' caches live here: a CPU's samples reuse them. */
struct tpw_state {
	/* A copy of user memory holding the frame being decoded: with a
	 * frame's page, the frames below it in the same page need no read of
	 * their own (CPython 3.11+'s data stack). */
	__u8 win[TP_WIN_MASK + 1 + TP_FRAME_BUF + 8]; /* +: loads at masked offsets */
	__u64 win_base;				      /* user address of win[0] */
	__u64 win_len;				      /* bytes of win that hold a copy, 0 if none */
	/* The runtime's own part, which only its walker reads (CPython's:
	 * struct tpw_py_state, through tpw_py()). Here, before the sample:
	 * BPF reaches what lies in the first 32 KiB of the state with a
	 * load's own offset. */
	__u8 rt[TPW_RT_BYTES] __attribute__((aligned(8)));
	struct tp_proc proc; /* the process's procs entry: its runtime and payload */
	/* The native unwinder's registers (walk/native.h): the frame being
	 * unwound. */
	struct {
		__u64 ip, sp, fp;
		__u64 r10, r11, r13; /* known only where exact is set */
		/* The top of the stack of a process's main thread (its stack
		 * pointer at exec: mm->start_stack), 0 in other threads or
		 * where unknown: the C library's start code lies just below. */
		__u64 top;
		/* The mapping of the last frame, and its file's table: the
		 * next frame is most often in the same (end 0: none yet). */
		struct tp_umap m;
		struct tp_ufile info;
		__u32 frames; /* unwound so far, the sampled one included */
		__u32 done;   /* the native walk is over */
		__u32 exact;  /* ip is where the thread was interrupted (the sampled
			       * frame, or the one a signal interrupted), not a return
			       * address */
		__u32 pad;
	} u;
	struct tpw_anchors a;
	struct tp_sample s; /* s.time_ns must be set: the caches age by it */
	struct tpw_host host;
};

/* An index into frames[] the verifier can bound: the compiler may drop a
 * mask it can prove redundant, so hide the value from it first. */
TPW_INLINE __u32 tpw_frame_idx(__u32 n)
{
#ifdef __BPF__
	asm volatile("" : "+r"(n));
#endif
	return n & (TP_MAX_FRAMES - 1);
}

/* Loads from a copy of target memory. BPF loads directly; user space
 * copies, because target memory owes it no alignment. */
TPW_INLINE __u64 tpw_ld64(const __u8 *p)
{
#ifdef __BPF__
	return *(const __u64 *)p;
#else
	__u64 v;
	__builtin_memcpy(&v, p, sizeof(v));
	return v;
#endif
}

TPW_INLINE __u32 tpw_ld32(const __u8 *p)
{
#ifdef __BPF__
	return *(const __u32 *)p;
#else
	__u32 v;
	__builtin_memcpy(&v, p, sizeof(v));
	return v;
#endif
}

/* Loads at a masked offset of the window. */
TPW_INLINE __u64 tpw_win_u64(const struct tpw_state *st, __u32 at, __u16 off)
{
	return tpw_ld64(&st->win[(at & TP_WIN_MASK) + (off & (TP_FRAME_BUF - 1))]);
}

TPW_INLINE __u32 tpw_win_u32(const struct tpw_state *st, __u32 at, __u16 off)
{
	return tpw_ld32(&st->win[(at & TP_WIN_MASK) + (off & (TP_FRAME_BUF - 1))]);
}

TPW_INLINE __u8 tpw_win_u8(const struct tpw_state *st, __u32 at, __u16 off)
{
	return st->win[(at & TP_WIN_MASK) + (off & (TP_FRAME_BUF - 1))];
}

TPW_INLINE int tpw_read_u64(struct tpw_state *st, __u64 *dst, __u64 addr)
{
	return tpw_read(st, dst, sizeof(*dst), addr);
}

/* Copies len bytes of user memory at addr into the window; on failure the
 * window holds nothing. */
TPW_INLINE int tpw_win_fill(struct tpw_state *st, __u64 addr, __u64 len)
{
	len &= TP_WIN_MASK;
	st->win_len = 0;
	if (tpw_read(st, st->win, len, addr))
		return -1;
	st->win_base = addr;
	st->win_len = len;
	return 0;
}

/* Where the n bytes at user address addr start in the window, or -1 if
 * the window does not hold them all. */
TPW_INLINE int tpw_win_find(const struct tpw_state *st, __u64 addr, __u64 n)
{
	__u64 at = addr - st->win_base;
	return at < st->win_len && at + n <= st->win_len ? (int)at : -1;
}

/* The 8 bytes at addr: from the window if it holds them, else read. */
TPW_INLINE int tpw_win_read_u64(struct tpw_state *st, __u64 *dst, __u64 addr)
{
	int at = tpw_win_find(st, addr, 8);
	if (at >= 0) {
		*dst = tpw_win_u64(st, at, 0);
		return 0;
	}
	return tpw_read_u64(st, dst, addr);
}

/* Adds anchor addr when add is 1, nothing when it is 0: without a branch,
 * for the runtimes' unrolled walks. */
TPW_INLINE void tpw_anchor(struct tpw_state *st, __u64 addr, __u32 add)
{
	__u32 n = st->a.n;
	__u32 room = (n - TP_ANCHORS_MAX) >> 31; /* n < TP_ANCHORS_MAX */
	st->a.addr[n & (2 * TP_ANCHORS_MAX - 1)] = addr;
	st->a.n = n + (add & room);
	st->a.full |= add & (1 - room);
}

/* Starts a walk of the sample in st->s, whose pid, tid and time_ns are set,
 * for the runtime of st->proc: no frames, no error, no native walk. Forgets
 * the window, which held another process's memory, or memory changed since.
 * The runtime's walker then starts its own part. */
TPW_INLINE void tpw_begin(struct tpw_state *st)
{
	st->s.kind = TP_EV_SAMPLE;
	st->s.tstate = 0;
	st->s.nframes = 0;
	st->s.nkstack = 0;
	st->s.err = TP_ERR_NONE;
	st->s.flags = TP_SF_WALKED;
	st->s.state = TP_TS_RUNNING;
	st->s.gil = TP_GIL_UNKNOWN;
	st->s.runtime = st->proc.runtime;
	st->s.walk_calls = 0;
	st->s.task_idx = 0;
	st->s.task_frame = 0;
	st->s.nustack = 0;
	st->s.uerr = TP_UERR_NONE;
	st->u.done = 1;
	st->a.n = 0;
	st->a.next = 0;
	st->a.full = 0;
	st->win_len = 0;
}

#endif /* TAIPAN_WALK_STATE_H */
