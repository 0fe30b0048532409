// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* cpython.bpf.h - CPython's BPF unit: from a sampled thread's thread
 * pointer, its PyThreadState and the walk of its Python frames, by the
 * walker user space compiles too (cpython/walk.h); and BPF's first look at
 * each code object a stack shows (struct tp_code_ev).
 *
 * This unit gives the walker memory (bpf_probe_read_user), counters and
 * maps, runs it in the programs of CPython's tail-call slots, and gives the
 * sample driver (bpf/sample.bpf.h) cpython_start, cpython_whole and
 * cpython_exit. Everything that depends on the Python version arrives as
 * data in the procs entry (struct tp_py_proc): offsets plus capability
 * flags. Nothing here compares version numbers (doc/design/python-stacks.md,
 * decision 1). Every way a walk can fail has a counter, and the sample is
 * still sent with what was read (doc/design/failures.md, decision 9).
 */
#ifndef TAIPAN_CPYTHON_CPYTHON_BPF_H
#define TAIPAN_CPYTHON_CPYTHON_BPF_H

/* tid -> PyThreadState address, re-checked on every hit. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_MAX_TSTATES);
	__type(key, __u32);
	__type(value, __u64);
} tstates SEC(".maps");

/* Code objects described to user space (struct tp_code_ev), by process,
 * address and identity. */
struct code_key {
	__u32 tgid;
	__u32 pad;
	__u64 code, ident;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_MAX_DESCRIBED);
	__type(key, struct code_key);
	__type(value, __u8);
} described SEC(".maps");

/* What the shared walker (cpython/walk.h) asks of its includer besides
 * the walk state's hooks: here, the code objects this sample met for the
 * first time, to describe once the walk is over, and a per-CPU cache of
 * those described, before the map. */
static __always_inline void code_first(struct tpw_state *st, __u64 code, __u64 ident);
#define tpw_code_first(st, code, ident) code_first((st), (code), (ident))
#define tpw_frame_addr(st, n, f) ((void)(st), (void)(n), (void)(f))

static __always_inline __u64 tpw_tstate_lookup(void *st, __u32 tid)
{
	__u64 *ts = bpf_map_lookup_elem(&tstates, &tid);
	return ts ? *ts : 0;
}

static __always_inline void tpw_tstate_store(void *st, __u32 tid, __u64 ts)
{
	bpf_map_update_elem(&tstates, &tid, &ts, BPF_ANY);
}

#include "cpython/walk.h"

/* What only BPF keeps of CPython's walk, in the driver's part of the walk
 * state (struct tpw_host.rt): the code objects to describe. */
struct py_host {
	struct code_key dcache[TP_DCACHE];
	struct code_key todo[TP_DESCRIBE_MAX];
	__u32 ntodo;
	__u32 pad;
};
_Static_assert(sizeof(struct py_host) <= TPW_HOST_RT_BYTES, "CPython's BPF part fits");

static __always_inline struct py_host *py_host(struct tpw_state *st)
{
	return (struct py_host *)(void *)st->host.rt;
}

/* Code object code (identity ident) of the sampled process met its first
 * time in this sample: noted for describe_codes unless this CPU described
 * or saw it described before. Kept small: the walkers inline it once per
 * frame. */
static __always_inline void code_first(struct tpw_state *st, __u64 code, __u64 ident)
{
	struct py_host *h = py_host(st);
	__u32 tgid = st->s.pid;
	struct code_key *c = &h->dcache[(code >> 4) & (TP_DCACHE - 1)];
	if (c->code == code && c->ident == ident && c->tgid == tgid)
		return;
	__u32 n = h->ntodo;
	if (n >= TP_DESCRIBE_MAX) {
		stat_inc(TP_STAT_CODES_UNDESCRIBED);
		return;
	}
	struct code_key *t = &h->todo[n & (TP_DESCRIBE_MAX - 1)];
	t->tgid = tgid;
	t->pad = 0;
	t->code = code;
	t->ident = ident;
	h->ntodo = n + 1;
}

/* Starts CPython's part of a sample's walk: no frame, nothing to describe. */
static __always_inline void py_begin(struct tpw_state *st)
{
	tpw_py_begin(st);
	py_host(st)->ntodo = 0;
}

/* Copies up to size bytes of the object at addr into out. When that many
 * cannot be read (the object is the last before an unmapped page: the end of
 * an allocator's arena), copies up to the end of its page, which holds the
 * object unless the object runs on into the next page, mapped then. */
static __always_inline void copy_obj(struct tp_code_part *part, __u8 *out, __u64 addr, __u32 size)
{
	part->addr = addr;
	part->len = 0;
	if (!addr)
		return;
	if (!bpf_probe_read_user(out, size, (const void *)addr)) {
		part->len = size;
		return;
	}
	__u32 len = 4096 - (addr & 4095);
	if (len > size)
		len = size;
	if (!bpf_probe_read_user(out, len, (const void *)addr))
		part->len = len;
}

/* The pointer at offset off of the copied code object head, 0 if not
 * copied. */
static __always_inline __u64 head_ptr(const struct tp_code_ev *ev, __u16 off)
{
	__u64 v = 0;
	if (off && off <= TP_CODE_HEAD - 8 && off + 8 <= ev->part[TP_CP_HEAD].len)
		bpf_probe_read_kernel(&v, sizeof(v), &ev->head[off & (TP_CODE_HEAD - 1)]);
	return v;
}

/* Sends the bytes that name code object k (struct tp_code_ev), and
 * remembers that it was described. */
static __always_inline void describe(struct tpw_state *st, const struct code_key *k)
{
	struct code_key *c = &py_host(st)->dcache[(k->code >> 4) & (TP_DCACHE - 1)];
	if (bpf_map_lookup_elem(&described, k)) {
		*c = *k; /* another CPU described it */
		return;
	}
	struct tp_code_ev *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		stat_inc(TP_STAT_RING_FULL);
		return;
	}
	const struct tp_py_offsets *o = &tpw_pp(st)->off;
	ev->kind = TP_EV_CODE;
	ev->pid = k->tgid;
	ev->code = k->code;
	ev->ident = k->ident;
	copy_obj(&ev->part[TP_CP_HEAD], ev->head, k->code, TP_CODE_HEAD);
	if (!ev->part[TP_CP_HEAD].len) {
		bpf_ringbuf_discard(ev, BPF_RB_NO_WAKEUP);
		return;
	}
	copy_obj(&ev->part[TP_CP_NAME], ev->name, head_ptr(ev, o->code_name), TP_CODE_STR);
	copy_obj(&ev->part[TP_CP_QUALNAME], ev->qualname, head_ptr(ev, o->code_qualname),
		 TP_CODE_STR);
	copy_obj(&ev->part[TP_CP_FILE], ev->file, head_ptr(ev, o->code_filename), TP_CODE_STR);
	copy_obj(&ev->part[TP_CP_LINETABLE], ev->linetable, head_ptr(ev, o->code_linetable),
		 TP_CODE_LT);
	bpf_ringbuf_submit(ev, ring_flags());
	__u8 one = 1;
	bpf_map_update_elem(&described, k, &one, BPF_ANY);
	*c = *k;
	stat_inc(TP_STAT_CODES_DESCRIBED);
}

/* A walker's callback takes TP_FRAMES_PER_CB frames, unrolled: a call per
 * frame cost about 10 ns more a frame than the unrolled build. */
#define TP_FRAMES_PER_CB 2
_Static_assert(TP_FRAMES_PER_PROG % TP_FRAMES_PER_CB == 0, "a walker step is whole callbacks");

static long interp_frame_cb(__u64 i, void *ctx)
{
	struct tpw_state *st = ((struct loop_ctx *)ctx)->st;
	for (int k = 0; k < TP_FRAMES_PER_CB; k++)
		if (!tpw_interp_frame(st))
			return 1;
	return 0;
}

static long frame_object_cb(__u64 i, void *ctx)
{
	struct tpw_state *st = ((struct loop_ctx *)ctx)->st;
	for (int k = 0; k < TP_FRAMES_PER_CB; k++)
		if (!tpw_frame_object(st))
			return 1;
	return 0;
}

static long search_cb(__u64 i, void *ctx)
{
	struct loop_ctx *l = ctx;
	return tpw_search_step(l->st, l->fsbase);
}

static long describe_cb(__u64 i, void *ctx)
{
	struct tpw_state *st = ((struct loop_ctx *)ctx)->st;
	struct py_host *h = py_host(st);
	__u32 n = h->ntodo;
	if (!n)
		return 1;
	h->ntodo = --n;
	describe(st, &h->todo[n & (TP_DESCRIBE_MAX - 1)]);
	return 0;
}

/* Describes the code objects the walk met for the first time (struct
 * tp_code_ev), ahead of the sample, TP_DESCRIBE_PER_PROG a call (a tail call
 * of itself goes on: the verifier checks that many copies, not
 * TP_DESCRIBE_MAX), then finishes the sample. */
SEC("perf_event")
int describe_codes(struct bpf_perf_event_data *ctx)
{
	struct tpw_state *st = cpu_state(NULL);
	if (!st)
		return 0;
	struct py_host *h = py_host(st);
	for (int i = 0; i < TP_DESCRIBE_PER_PROG; i++) {
		__u32 n = h->ntodo;
		if (!n)
			break;
		h->ntodo = --n;
		describe(st, &h->todo[n & (TP_DESCRIBE_MAX - 1)]);
	}
	if (h->ntodo) {
		bpf_tail_call(ctx, &progs, TP_WALK_DESCRIBE);
		/* Out of tail calls: the rest are described in a later sample. */
		h->ntodo = 0;
	}
	finish(ctx, st, false);
	return 0;
}

/* One walker program: a step of the walk, then the next program or the
 * sample. The tail call fails only when the chain has used every tail call
 * the kernel allows: the stack is deeper than BPF can walk. With loop set,
 * the step's frames go through bpf_loop: the same frames, the same cut. */
static __always_inline int walker_prog(struct bpf_perf_event_data *ctx, __u32 walker, bool loop)
{
	struct tpw_state *st = cpu_state(NULL);
	if (!st)
		return 0;
	bool more;
	if (loop) {
		struct loop_ctx l = {.st = st};
		bpf_loop(TP_FRAMES_PER_PROG / TP_FRAMES_PER_CB,
			 walker == TP_WALK_INTERP_FRAMES ? interp_frame_cb : frame_object_cb, &l,
			 0);
		more = tpw_more(st);
	} else {
		more = tpw_step(st, walker);
	}
	if (more) {
		st->s.walk_calls++;
		bpf_tail_call(ctx, &progs, walker);
	}
	tpw_cut(st);
	if (py_host(st)->ntodo)
		bpf_tail_call(ctx, &progs, TP_WALK_DESCRIBE);
	finish(ctx, st, false);
	return 0;
}

SEC("perf_event")
int walk_frame_objects(struct bpf_perf_event_data *ctx)
{
	return walker_prog(ctx, TP_WALK_FRAME_OBJECTS, false);
}

SEC("perf_event")
int walk_frame_objects_loop(struct bpf_perf_event_data *ctx)
{
	return walker_prog(ctx, TP_WALK_FRAME_OBJECTS, true);
}

SEC("perf_event")
int walk_interp_frames(struct bpf_perf_event_data *ctx)
{
	return walker_prog(ctx, TP_WALK_INTERP_FRAMES, false);
}

SEC("perf_event")
int walk_interp_frames_loop(struct bpf_perf_event_data *ctx)
{
	return walker_prog(ctx, TP_WALK_INTERP_FRAMES, true);
}

/* A perf sample of a Python thread (the driver's NAME_start): which thread
 * state runs, which frame is on top; then the walker program takes over.
 * With loop set, the search for an uncached thread state goes through
 * bpf_loop. Returns when there is nothing to walk: the driver sends the
 * sample. */
static __always_inline void cpython_start(void *ctx, struct tpw_state *st, __u64 id, __u64 fsbase,
					  bool loop)
{
	struct tp_sample *s = &st->s;
	__u64 ts;
	py_begin(st);
	if (loop) {
		ts = tpw_tstate_cached(st, id, fsbase);
		if (!ts && !tpw_search_begin(st, TP_MAX_THREADS_LOOP)) {
			struct loop_ctx l = {.st = st, .fsbase = fsbase};
			bpf_loop(TP_FIND_STEPS_LOOP, search_cb, &l, 0);
			ts = tpw_search_end(st, id);
		}
	} else {
		ts = tpw_find_tstate(st, id, fsbase);
	}
	if (!ts)
		return;
	s->tstate = ts;
	s->gil = tpw_gil_state(st, ts);
	if (tpw_top_frame(st, ts) || !tpw_py(st)->frame)
		return;
	bpf_tail_call(ctx, &progs, tpw_walker(st));
	/* The tail call can only fail if user space did not fill the program
	 * array: send the sample without Python frames. */
	s->err = TP_ERR_NO_WALKER;
	s->flags |= TP_SF_TRUNCATED;
}

/* The whole walk of a sample in one program (the driver's NAME_whole): a
 * tracing program cannot tail call the perf_event walkers, so each part goes
 * through bpf_loop, with the budgets the tail-call chain has (TP_WALK_STEPS
 * Python frames). */
static __always_inline void cpython_whole(struct tpw_state *st, __u64 id, __u64 fsbase)
{
	struct tp_sample *s = &st->s;
	struct loop_ctx l = {.st = st, .fsbase = fsbase};
	py_begin(st);
	__u64 ts = tpw_tstate_cached(st, id, fsbase);
	if (!ts && !tpw_search_begin(st, TP_MAX_THREADS_LOOP)) {
		bpf_loop(TP_FIND_STEPS_LOOP, search_cb, &l, 0);
		ts = tpw_search_end(st, id);
	}
	if (ts) {
		s->tstate = ts;
		s->gil = tpw_gil_state(st, ts);
		if (!tpw_top_frame(st, ts) && tpw_py(st)->frame) {
			bpf_loop(TP_WALK_STEPS / TP_FRAMES_PER_CB,
				 tpw_walker(st) == TP_WALK_INTERP_FRAMES ? interp_frame_cb
									 : frame_object_cb,
				 &l, 0);
			tpw_cut(st);
		}
	}
	if (py_host(st)->ntodo)
		bpf_loop(TP_DESCRIBE_MAX, describe_cb, &l, 0);
}

/* Thread tid exits (the driver's NAME_exit): its thread state with it. */
static __always_inline void cpython_exit(__u32 tid)
{
	bpf_map_delete_elem(&tstates, &tid);
}

#endif /* TAIPAN_CPYTHON_CPYTHON_BPF_H */
