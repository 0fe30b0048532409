// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* taipan.bpf.c - the kernel side: on each cpu-clock sample, find the running
 * thread's PyThreadState and walk its Python frames; follow forks, execs and
 * exits of the processes being profiled.
 *
 * The walk itself is src/cpython/walk.h, over the walk state of
 * src/walk/state.h, which user space compiles too: this file gives it memory
 * (bpf_probe_read_user), counters and maps, and drives it through tail
 * calls.
 *
 * Everything that depends on the Python version arrives as data in the procs
 * map (struct tp_proc): offsets plus capability flags. Nothing here compares
 * version numbers (doc/DESIGN.md decision 1). Every way a walk can fail has a
 * counter, and the sample is still sent with what was read (decision 9).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "taipan_abi.h"
#include "walk/taskstate.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile struct tp_config cfg = {};

/* Python processes and known non-Python ones, keyed by tgid: one lookup
 * decides what a sample costs. LRU, so that a host with more processes than
 * entries evicts instead of failing; an evicted process is announced again
 * and user space, which still knows it, puts it back. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct tp_proc);
} procs SEC(".maps");

/* Samples taken of each tgid before user space classified it: they are lost,
 * and user space reports them per process. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct tp_unknown);
} unknown_samples SEC(".maps");

/* The tgids to profile when not system-wide. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

/* When each unclassified tgid was last announced to user space. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u64);
} announced SEC(".maps");

/* tgid -> the time of its last exec (CLOCK_MONOTONIC ns). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u64);
} exec_ns SEC(".maps");

/* tid -> PyThreadState address, re-checked on every hit. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_MAX_TSTATES);
	__type(key, __u32);
	__type(value, __u64);
} tstates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, TP_RING_BYTES);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TP_STAT__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);
	if (v)
		*v += 1;
}

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

/* What the shared walker (cpython/walk.h) asks of its includer: here, the
 * code objects this sample met for the first time, to describe once the
 * walk is over, and a per-CPU cache of those described, before the map. */
struct tpw_host {
	struct code_key dcache[TP_DCACHE];
	struct code_key todo[TP_DESCRIBE_MAX];
	__u32 ntodo;
	__u32 pad;
};

/* Code object code (identity ident) of process tgid met its first time in
 * this sample: noted for describe_codes unless this CPU described or saw it
 * described before. Kept small: the walkers inline it once per frame. */
static __always_inline void code_first(struct tpw_host *h, __u32 tgid, __u64 code, __u64 ident)
{
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
#define tpw_code_first(st, code, ident) code_first(&(st)->host, (st)->s.pid, (code), (ident))
#define tpw_read(st, dst, len, addr) bpf_probe_read_user((dst), (len), (const void *)(addr))
#define tpw_count(st, stat) stat_inc(stat)

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

/* Native unwinding (walk/native.h): each file's unwind table is an inner
 * array sized by user space; ufile_info says how it is laid out; umaps leads
 * from a process's address range to its file. */
struct urows {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct tp_urow));
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, TP_MAX_UFILES);
	__type(key, __u32);
	__array(values, struct urows);
} ufiles SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TP_MAX_UFILES);
	__type(key, __u32);
	__type(value, struct tp_ufile);
} ufile_info SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, TP_MAX_URANGES);
	__type(key, struct tp_umap_key);
	__type(value, struct tp_umap);
} umaps SEC(".maps");

/* When each tracked tgid last reported code in an unknown mapping. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, __u64);
} unmapped_sent SEC(".maps");

static __always_inline int tpn_mapping(struct tpw_state *st, __u64 ip, struct tp_umap *out)
{
	struct tp_umap_key k = {
	    .prefixlen = 96,
	    .tgid = st->s.pid,
	    .addr_be = __builtin_bswap64(ip),
	};
	struct tp_umap *m = bpf_map_lookup_elem(&umaps, &k);
	if (!m)
		return -1;
	*out = *m;
	return 0;
}

static __always_inline void *tpn_table(struct tpw_state *st, __u32 file)
{
	return bpf_map_lookup_elem(&ufiles, &file);
}

static __always_inline int tpn_file(struct tpw_state *st, __u32 file, struct tp_ufile *out)
{
	struct tp_ufile *f = bpf_map_lookup_elem(&ufile_info, &file);
	if (!f)
		return -1;
	*out = *f;
	return 0;
}

#define tpn_entry(st, t, i)                                                                        \
	({                                                                                         \
		__u32 idx_ = (i);                                                                  \
		(const struct tp_urow *)bpf_map_lookup_elem((t), &idx_);                           \
	})

#include "walk/native.h"

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

/* The frame walkers (enum tp_walker), which tail-call themselves until the
 * stack is done. */
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

/* include/linux/sched.h: set at the start of do_exit(). */
#define PF_EXITING 0x00000004

static __always_inline bool tracked(__u32 tgid)
{
	return cfg.system_wide || bpf_map_lookup_elem(&targets, &tgid);
}

static __always_inline void send_event_at(__u32 kind, __u32 tgid, __u32 tid, __u64 time_ns)
{
	struct tp_event ev = {
	    .kind = kind,
	    .pid = tgid,
	    .tid = tid,
	    .time_ns = time_ns,
	};
	if (bpf_ringbuf_output(&events, &ev, sizeof(ev), BPF_RB_FORCE_WAKEUP))
		stat_inc(TP_STAT_RING_FULL);
}

static __always_inline void send_event(__u32 kind, __u32 tgid, __u32 tid)
{
	send_event_at(kind, tgid, tid, bpf_ktime_get_ns());
}

/* Tells user space about a tgid it has not classified yet, at most once
 * per TP_ANNOUNCE_NS per tgid (the first answer may come while the process
 * is still mapping its libraries). */
static __always_inline void announce(__u32 tgid, __u32 tid)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 *last = bpf_map_lookup_elem(&announced, &tgid);
	if (last && now - *last < TP_ANNOUNCE_NS)
		return;
	bpf_map_update_elem(&announced, &tgid, &now, BPF_ANY);
	send_event(TP_EV_DISCOVER, tgid, tid);
	stat_inc(TP_STAT_DISCOVER_SENT);
}

/* How samples, code objects and returns go into the ring: they wake the
 * reader only when a good amount is waiting. It polls on a timer anyway, and
 * a wakeup per record costs a context switch. In --mode wall it did worse:
 * the ring's default wakes a reader that has caught up, so a return woke
 * taipan, which preempted the target on its CPU, whose switch-out and
 * return woke it again, every 40 us while they shared a CPU. */
static __always_inline __u64 ring_flags(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > TP_RING_WAKEUP ? BPF_RB_FORCE_WAKEUP
									      : BPF_RB_NO_WAKEUP;
}

/* Sends the sample; false if the ring was full. */
static __always_inline bool submit(struct tpw_state *st)
{
	__u64 size = __builtin_offsetof(struct tp_sample, frames) +
		     (__u64)st->s.nframes * sizeof(struct tp_frame);
	if (size > sizeof(st->s))
		size = sizeof(st->s);
	if (bpf_ringbuf_output(&events, &st->s, size, ring_flags())) {
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

/* Tells user space that tgid ran code in a mapping it has not given BPF (a
 * library loaded since it read the process), at most once per
 * TP_ANNOUNCE_NS / 10. */
static __always_inline void report_unmapped(__u32 tgid, __u32 tid)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 *last = bpf_map_lookup_elem(&unmapped_sent, &tgid);
	if (last && now - *last < TP_ANNOUNCE_NS / 10)
		return;
	bpf_map_update_elem(&unmapped_sent, &tgid, &now, BPF_ANY);
	send_event(TP_EV_UNMAPPED, tgid, tid);
	stat_inc(TP_STAT_NATIVE_UNMAPPED_SENT);
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
	struct code_key *c = &st->host.dcache[(k->code >> 4) & (TP_DCACHE - 1)];
	if (bpf_map_lookup_elem(&described, k)) {
		*c = *k; /* another CPU described it */
		return;
	}
	struct tp_code_ev *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		stat_inc(TP_STAT_RING_FULL);
		return;
	}
	const struct tp_py_offsets *o = &st->proc.off;
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

/* The Python walk is over: unwind the native stack, if asked to, then send
 * the sample. */
static __always_inline void finish(struct bpf_perf_event_data *ctx, struct tpw_state *st)
{
	if (cfg.native) {
		struct pt_regs regs;
		struct task_struct *task = bpf_get_current_task_btf();
		if (bpf_probe_read_kernel(&regs, sizeof(regs), (void *)bpf_task_pt_regs(task))) {
			st->s.flags |= TP_SF_NATIVE;
			st->s.uerr = TP_UERR_REGS;
		} else {
			tpn_begin(st, regs.ip, regs.sp, regs.bp);
			bpf_tail_call(ctx, &progs, TP_WALK_NATIVE);
			st->s.uerr = TP_UERR_STEPS;
		}
	}
	submit(st);
}

/* bpf_loop's callbacks, for kernels that have it (5.17+): the verifier
 * checks a callback's body once, where it checks an unrolled loop's body
 * once per copy. ctx points to struct loop_ctx on the caller's stack. */
struct loop_ctx {
	struct tpw_state *st;
	__u64 fsbase; /* search_cb's */
};

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

static long native_frame_cb(__u64 i, void *ctx)
{
	struct tpw_state *st = ((struct loop_ctx *)ctx)->st;
	if (st->u.done)
		return 1;
	tpn_frame(st);
	return st->u.done != 0;
}

static long search_cb(__u64 i, void *ctx)
{
	struct loop_ctx *l = ctx;
	return tpw_search_step(l->st, l->fsbase);
}

/* The native unwinder: a step, then the next program or the sample. With
 * loop set, the step's frames go through bpf_loop. */
static __always_inline int native_prog(struct bpf_perf_event_data *ctx, bool loop)
{
	struct tpw_state *st = cpu_state(NULL);
	if (!st)
		return 0;
	bool more;
	if (loop) {
		struct loop_ctx l = {.st = st};
		bpf_loop(TP_UFRAMES_PER_PROG, native_frame_cb, &l, 0);
		more = !st->u.done;
	} else {
		more = tpn_step(st);
	}
	if (more) {
		st->s.walk_calls++;
		bpf_tail_call(ctx, &progs, TP_WALK_NATIVE);
		st->s.uerr = TP_UERR_STEPS;
	}
	if (st->s.uerr == TP_UERR_UNMAPPED)
		report_unmapped(st->s.pid, st->s.tid);
	submit(st);
	return 0;
}

SEC("perf_event")
int walk_native(struct bpf_perf_event_data *ctx)
{
	return native_prog(ctx, false);
}

SEC("perf_event")
int walk_native_loop(struct bpf_perf_event_data *ctx)
{
	return native_prog(ctx, true);
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
	for (int i = 0; i < TP_DESCRIBE_PER_PROG; i++) {
		__u32 n = st->host.ntodo;
		if (!n)
			break;
		st->host.ntodo = --n;
		describe(st, &st->host.todo[n & (TP_DESCRIBE_MAX - 1)]);
	}
	if (st->host.ntodo) {
		bpf_tail_call(ctx, &progs, TP_WALK_DESCRIBE);
		/* Out of tail calls: the rest are described in a later sample. */
		st->host.ntodo = 0;
	}
	finish(ctx, st);
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
	if (st->host.ntodo)
		bpf_tail_call(ctx, &progs, TP_WALK_DESCRIBE);
	finish(ctx, st);
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
	st->host.ntodo = 0;
	tpw_begin(st);
	tpw_py_begin(st);
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
	 * (exit_mm): nothing of Python to read, and reads would fail as if
	 * the interpreter were broken. */
	if (BPF_CORE_READ(task, flags) & PF_EXITING) {
		st->s.err = TP_ERR_EXITING;
		return 0;
	}
	__u64 fsbase = BPF_CORE_READ(task, thread.fsbase);
	if (!fsbase)
		st->s.err = TP_ERR_FSBASE;
	return fsbase;
}

/* Every sample starts here: is it of a Python process, which thread state
 * runs, which frame is on top; then the walker takes over. With loop set,
 * the search for an uncached thread state goes through bpf_loop. */
static __always_inline int sample_prog(struct bpf_perf_event_data *ctx, bool loop)
{
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
	if (proc->kind != TP_PROC_PYTHON) {
		stat_inc(TP_STAT_NOT_PYTHON);
		return 0;
	}

	struct tpw_state *st = begin_sample(ctx, proc, tgid, tid, bpf_ktime_get_ns());
	if (!st)
		return 0;
	struct tp_sample *s = &st->s;
	__u64 fsbase = thread_fsbase(st);
	if (!fsbase)
		goto out;
	__u64 ts;
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
		goto out;
	s->tstate = ts;
	s->gil = tpw_gil_state(st, ts);
	if (tpw_top_frame(st, ts) || !tpw_py(st)->frame)
		goto out;
	bpf_tail_call(ctx, &progs, tpw_walker(st));
	/* The tail call can only fail if user space did not fill the program
	 * array: send the sample without Python frames. */
	s->err = TP_ERR_NO_WALKER;
	s->flags |= TP_SF_TRUNCATED;
out:
	finish(ctx, st);
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

/* Off-CPU time (--mode wall and off-cpu; doc/DESIGN.md, "Off-CPU time").
 * When a thread of a Python target leaves the CPU, its stack is taken right
 * there, while its memory is still the current one, and sent as a sample
 * with TP_SF_OFFCPU and the reason it left; its task's storage remembers
 * when. When it runs again, a TP_EV_SWITCH_IN event carries both times, and
 * user space weighs the sample by the difference.
 *
 * The program runs at every context switch of the host, so what it keeps
 * per thread is task-local storage, not a hash map: a thread without any
 * costs a pointer test, one with some a cached load. */
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

static long describe_cb(__u64 i, void *ctx)
{
	struct tpw_state *st = ((struct loop_ctx *)ctx)->st;
	__u32 n = st->host.ntodo;
	if (!n)
		return 1;
	st->host.ntodo = --n;
	describe(st, &st->host.todo[n & (TP_DESCRIBE_MAX - 1)]);
	return 0;
}

/* The whole walk of a sample in one program: a tracing program cannot tail
 * call the perf_event walkers, so each part goes through bpf_loop, with the
 * budgets the tail-call chain has (TP_WALK_STEPS Python frames). */
static __always_inline void walk_whole(struct tpw_state *st, __u64 id)
{
	struct tp_sample *s = &st->s;
	__u64 fsbase = thread_fsbase(st);
	if (fsbase) {
		struct loop_ctx l = {.st = st, .fsbase = fsbase};
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
		if (st->host.ntodo)
			bpf_loop(TP_DESCRIBE_MAX, describe_cb, &l, 0);
	}
	if (cfg.native) {
		struct pt_regs regs;
		struct task_struct *task = bpf_get_current_task_btf();
		if (bpf_probe_read_kernel(&regs, sizeof(regs), (void *)bpf_task_pt_regs(task))) {
			s->flags |= TP_SF_NATIVE;
			s->uerr = TP_UERR_REGS;
		} else {
			struct loop_ctx l = {.st = st};
			tpn_begin(st, regs.ip, regs.sp, regs.bp);
			bpf_loop(TP_USTACK_MAX, native_frame_cb, &l, 0);
			if (!st->u.done)
				s->uerr = TP_UERR_STEPS;
			if (s->uerr == TP_UERR_UNMAPPED)
				report_unmapped(s->pid, s->tid);
		}
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
		 * process forgotten since (an exec) or found to be no Python. */
		if (p->target == TP_SWT_NONE)
			return 0;
		if (p->target == TP_SWT_PYTHON) {
			proc = bpf_map_lookup_elem(&procs, &tgid);
			if (!proc) {
				p->target = TP_SWT_EARLY;
			} else if (proc->kind != TP_PROC_PYTHON) {
				p->target = TP_SWT_NONE;
				return 0;
			}
		}
	} else {
		p->checked = j;
		early_flush(p, tgid);
		p->target = TP_SWT_NONE;
		proc = bpf_map_lookup_elem(&procs, &tgid);
		if (proc && proc->kind != TP_PROC_PYTHON)
			return 0;
		if (!proc && !tracked(tgid))
			return 0;
		p->target = proc ? TP_SWT_PYTHON : TP_SWT_EARLY;
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
	if (submit(st)) {
		stat_inc(TP_STAT_SWITCH_OUT);
		p->away_ns = now;
		p->ran_ns = ran;
	}
	return 0;
}

/* A child of a target becomes a target: `record -- cmd` and --subprocesses
 * follow everything the command starts. Threads share the tgid and need
 * nothing. A fork shares its parent's memory layout, so a child of a known
 * process is known from its first sample: it gets the parent's procs entry
 * (the exec tracepoint removes it again if the child becomes another
 * program), and user space hears of a Python child through a fork event. */
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
	if (copy.kind != TP_PROC_PYTHON)
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

/* A Python process maps code (dlopen, import of an extension module): user
 * space reads its mappings again, before the first sample that needs them,
 * if it can. Samples that come first end their native part with
 * TP_UERR_UNMAPPED, which asks too. */
SEC("tracepoint/syscalls/sys_enter_mmap")
int on_mmap(struct trace_event_raw_sys_enter *ctx)
{
	if (!cfg.native || !(ctx->args[2] & PROT_EXEC))
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct tp_proc *proc = bpf_map_lookup_elem(&procs, &tgid);
	if (!proc || proc->kind != TP_PROC_PYTHON)
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
	bpf_map_delete_elem(&tstates, &tid);
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

/* Names kernel addresses for user space (struct tp_ksym_req): run on demand
 * through BPF_PROG_TEST_RUN, never attached. The kernel's symbol lookup costs
 * about a microsecond an address, where reading /proc/kallsyms whole costs
 * tens of milliseconds of CPU at start-up (doc/BENCHMARKS.md). Loaded only
 * where the kernel has syscall programs and bpf_snprintf (5.14). */
struct tp_ksym_req ksym_req;

SEC("syscall")
int ksym_names(void *ctx)
{
	for (__u32 i = 0; i < TP_KSYM_BATCH; i++) {
		if (i >= ksym_req.n)
			break;
		__u64 addr = ksym_req.addr[i];
		if (bpf_snprintf(ksym_req.name[i], TP_KSYM_LEN, "%ps", &addr, sizeof(addr)) < 0)
			ksym_req.name[i][0] = '\0';
	}
	return 0;
}

/* The threads of process snap_tgid as the kernel holds them while they are
 * off the CPU: state, CPU time, the user registers saved as each entered
 * the kernel, its kernel stack. A thread asleep since before a wall
 * recording started never leaves the CPU while BPF watches, perhaps not
 * until the recording ends; user space reads its Python and native stacks
 * from these (session.c, "asleep at the start"). Run by user space through
 * an iterator, never attached; loaded with on_switch. */
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
