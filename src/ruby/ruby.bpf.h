// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* ruby.bpf.h - Ruby's BPF unit: from a sampled thread's thread pointer, its
 * execution context and the walk of its control frames, by the walker user
 * space compiles too (ruby/walk.h).
 *
 * This unit runs the walker in the programs of Ruby's tail-call slots and
 * gives the sample driver (bpf/sample.bpf.h) ruby_start, ruby_whole and
 * ruby_exit. Everything that depends on the Ruby version arrives as data in
 * the procs entry (struct tp_rb_proc). Frames are named in user space from
 * the instruction sequence and pc each one records (doc/design/ruby.md).
 */
#ifndef TAIPAN_RUBY_RUBY_BPF_H
#define TAIPAN_RUBY_RUBY_BPF_H

#include "ruby/walk.h"

#define TP_RB_FRAMES_PER_CB 2
_Static_assert(TP_FRAMES_PER_PROG % TP_RB_FRAMES_PER_CB == 0, "a walker step is whole callbacks");

static long rb_frame_cb(__u64 i, void *ctx)
{
	struct tpw_state *st = ((struct loop_ctx *)ctx)->st;
	for (int k = 0; k < TP_RB_FRAMES_PER_CB; k++)
		if (!tpw_rb_frame(st))
			return 1;
	return 0;
}

/* One walker program: a step of the walk, then the next program or the
 * sample (see cpython.bpf.h's walker_prog). */
static __always_inline int rb_walker_prog(struct bpf_perf_event_data *ctx, bool loop)
{
	struct tpw_state *st = cpu_state(NULL);
	if (!st)
		return 0;
	bool more;
	if (loop) {
		struct loop_ctx l = {.st = st};
		bpf_loop(TP_FRAMES_PER_PROG / TP_RB_FRAMES_PER_CB, rb_frame_cb, &l, 0);
		more = tpw_rb_more(st);
	} else {
		more = tpw_rb_step(st);
	}
	if (more) {
		st->s.walk_calls++;
		bpf_tail_call(ctx, &progs, TP_WALK_RB_FRAMES);
	}
	tpw_rb_end(st);
	finish(ctx, st, false);
	return 0;
}

SEC("perf_event")
int walk_rb_frames(struct bpf_perf_event_data *ctx)
{
	return rb_walker_prog(ctx, false);
}

SEC("perf_event")
int walk_rb_frames_loop(struct bpf_perf_event_data *ctx)
{
	return rb_walker_prog(ctx, true);
}

/* A perf sample of a Ruby thread (the driver's NAME_start): its EC and
 * current frame; then the walker program takes over. Returns when there is
 * nothing to walk: the driver sends the sample. */
static __always_inline void ruby_start(void *ctx, struct tpw_state *st, __u64 id, __u64 fsbase,
				       bool loop)
{
	tpw_rb_begin(st);
	__u64 ec = tpw_rb_ec(st, fsbase);
	if (!ec || !tpw_rb_start(st, ec))
		return;
	bpf_tail_call(ctx, &progs, TP_WALK_RB_FRAMES);
	st->s.err = TP_ERR_NO_WALKER;
	st->s.flags |= TP_SF_TRUNCATED;
}

/* The whole walk in one program (the driver's NAME_whole, off-CPU samples),
 * through bpf_loop, with the budget of the tail-call chain. */
static __always_inline void ruby_whole(struct tpw_state *st, __u64 id, __u64 fsbase)
{
	tpw_rb_begin(st);
	__u64 ec = tpw_rb_ec(st, fsbase);
	if (!ec || !tpw_rb_start(st, ec))
		return;
	struct loop_ctx l = {.st = st, .fsbase = fsbase};
	bpf_loop(TP_WALK_STEPS / TP_RB_FRAMES_PER_CB, rb_frame_cb, &l, 0);
	tpw_rb_end(st);
}

/* Thread tid exits (the driver's NAME_exit): Ruby keeps nothing per thread. */
static __always_inline void ruby_exit(__u32 tid)
{
}

#endif /* TAIPAN_RUBY_RUBY_BPF_H */
