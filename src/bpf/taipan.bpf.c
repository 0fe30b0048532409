// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* taipan.bpf.c - the kernel side: on each cpu-clock sample, find the running
 * thread's PyThreadState and walk its Python frames; follow forks, execs and
 * exits of the processes being profiled.
 *
 * Everything that depends on the Python version arrives as data in the procs
 * map (struct tp_proc): offsets plus capability flags. Nothing here compares
 * version numbers (DESIGN.md decision 1). Every way a walk can fail has a
 * counter, and the sample is still sent with what was read (decision 9).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "taipan_abi.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile struct tp_config cfg = {};

/* Python processes and known non-Python ones, keyed by tgid: one lookup
 * decides what a sample costs. LRU, so that a host with more processes than
 * entries evicts instead of failing; an evicted process is announced again
 * and user space, which still knows it, puts it back. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct tp_proc);
} procs SEC(".maps");

/* Samples taken of each tgid before user space classified it: they are lost,
 * and user space reports them per process. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u64);
} unknown_samples SEC(".maps");

/* The tgids to profile when not system-wide. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

/* When each unclassified tgid was last announced to user space. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u64);
} announced SEC(".maps");

/* tid -> PyThreadState address, re-checked on every hit. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u64);
} tstates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

/* The sample under construction, one slot per CPU (user space sets
 * max_entries to the number of possible CPUs). Not a per-CPU array because
 * the value is larger than per-CPU maps allow. Perf samples do not nest on
 * one CPU, so a slot is never shared. */
struct ident_ent {
	__u64 code, ident, time_ns;
};

/* Whether the objects of a type are classes (<= 3.10's Class.method). */
struct type_ent {
	__u64 type, is_meta, time_ns;
};

/* A thread (pid_tgid) and its PyThreadState, as last found on this CPU. */
struct tstate_ent {
	__u64 id, ts;
};

struct walk_state {
	/* A copy of user memory holding the frame being decoded: on 3.11+
	 * the page of the frame up to its end, so that the callers below it
	 * in the same data-stack page need no read of their own. */
	__u8 win[TP_WIN_MASK + 1 + TP_FRAME_BUF + 8]; /* +: loads at masked offsets */
	__u64 win_base;				      /* user address of win[0] */
	__u64 win_len;				      /* bytes of win that hold a copy, 0 if none */
	/* code object -> identity, direct-mapped, filled at most TP_ICACHE_NS
	 * ago: a code object whose address was reused is noticed within that
	 * time, and a deep stack reads each repeated code object's name once. */
	struct ident_ent icache[TP_ICACHE];
	struct type_ent tycache[TP_TYCACHE]; /* like icache, for types */
	/* Before the tstates map: most samples on a CPU are of a few threads. */
	struct tstate_ent tcache[TP_TCACHE];
	__u64 frame; /* next frame to read */
	struct tp_proc proc;
	struct tp_sample s;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk_state);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TP_STAT__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/* The frame walkers, which tail-call themselves until the stack is done. */
enum { TP_PROG_WALK_FRAME_OBJECTS = 0, TP_PROG_WALK_INTERP_FRAMES = 1 };

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} progs SEC(".maps");

/* include/linux/sched.h: set at the start of do_exit(). */
#define PF_EXITING 0x00000004

/* Py_TPFLAGS_TYPE_SUBCLASS: the object is itself a class. Unchanged since 2.x. */
#define PY_TPFLAGS_TYPE_SUBCLASS (1UL << 31)
/* Frames with owner >= 3 are C-stack shims, entry frames or sentinels, never
 * Python code (3.12+; the enumerator's name changed but 3 stayed the boundary). */
#define PY_OWNER_NOT_PYTHON 3

/* An index into frames[] the verifier can bound: the compiler may drop a
 * mask it can prove redundant, so hide the value from it first. */
static __always_inline __u32 frame_idx(__u32 n)
{
	asm volatile("" : "+r"(n));
	return n & (TP_MAX_FRAMES - 1);
}

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);
	if (v)
		*v += 1;
}

static __always_inline int read_u64(__u64 *dst, __u64 addr)
{
	return bpf_probe_read_user(dst, sizeof(*dst), (const void *)addr);
}

static __always_inline bool tracked(__u32 tgid)
{
	return cfg.system_wide || bpf_map_lookup_elem(&targets, &tgid);
}

static __always_inline void send_event(__u32 kind, __u32 tgid, __u32 tid)
{
	struct tp_event ev = {
	    .kind = kind,
	    .pid = tgid,
	    .tid = tid,
	    .time_ns = bpf_ktime_get_ns(),
	};
	if (bpf_ringbuf_output(&events, &ev, sizeof(ev), BPF_RB_FORCE_WAKEUP))
		stat_inc(TP_STAT_RING_FULL);
}

/* Tells user space about a tgid it has not classified yet, at most once a
 * second per tgid (the first answer may come while the process is still
 * mapping its libraries). */
static __always_inline void announce(__u32 tgid, __u32 tid)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 *last = bpf_map_lookup_elem(&announced, &tgid);
	if (last && now - *last < 1000000000ULL)
		return;
	bpf_map_update_elem(&announced, &tgid, &now, BPF_ANY);
	send_event(TP_EV_DISCOVER, tgid, tid);
	stat_inc(TP_STAT_DISCOVER_SENT);
}

static __always_inline void submit(struct walk_state *st)
{
	__u64 size = __builtin_offsetof(struct tp_sample, frames) +
		     (__u64)st->s.nframes * sizeof(struct tp_frame);
	if (size > sizeof(st->s))
		size = sizeof(st->s);
	/* Wake the reader only when a good amount is waiting: it polls on a
	 * timer anyway, and a wakeup per sample costs a context switch. */
	__u64 flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > (512 << 10)
			  ? BPF_RB_FORCE_WAKEUP
			  : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&events, &st->s, size, flags))
		stat_inc(TP_STAT_RING_FULL);
	else
		stat_inc(TP_STAT_SENT);
	if (st->s.err)
		stat_inc(TP_STAT_ERR_BASE + (st->s.err < TP_ERR__COUNT ? st->s.err : 0));
}

/* A field of the frame at offset at of the window, at an offset the
 * verifier can bound. */
static __always_inline __u64 win_u64(const struct walk_state *st, __u32 at, __u16 off)
{
	return *(const __u64 *)&st->win[(at & TP_WIN_MASK) + (off & (TP_FRAME_BUF - 1))];
}

static __always_inline __u32 win_u32(const struct walk_state *st, __u32 at, __u16 off)
{
	return *(const __u32 *)&st->win[(at & TP_WIN_MASK) + (off & (TP_FRAME_BUF - 1))];
}

static __always_inline __u8 win_u8(const struct walk_state *st, __u32 at, __u16 off)
{
	return st->win[(at & TP_WIN_MASK) + (off & (TP_FRAME_BUF - 1))];
}

/* Copies len bytes of user memory at addr into the window; on failure the
 * window holds nothing. */
static __always_inline int win_fill(struct walk_state *st, __u64 addr, __u64 len)
{
	len &= TP_WIN_MASK;
	st->win_len = 0;
	if (bpf_probe_read_user(st->win, len, (const void *)addr))
		return -1;
	st->win_base = addr;
	st->win_len = len;
	return 0;
}

/* Where the n bytes at user address addr start in the window, or -1 if
 * the window does not hold them all. */
static __always_inline int win_find(const struct walk_state *st, __u64 addr, __u64 n)
{
	__u64 at = addr - st->win_base;
	return at < st->win_len && at + n <= st->win_len ? (int)at : -1;
}

/* The 8 bytes at addr: from the window if it holds them, else read. */
static __always_inline int win_read_u64(struct walk_state *st, __u64 *dst, __u64 addr)
{
	int at = win_find(st, addr, 8);
	if (at >= 0) {
		*dst = win_u64(st, at, 0);
		return 0;
	}
	return read_u64(dst, addr);
}

/* Makes the part of frame f that the walkers use readable in the window and
 * returns where it starts there, or -1 if it cannot be read. With page set
 * (3.11+), a frame that is not in the window yet is read with everything
 * below it in its page: frames live one after another in the thread's data
 * stack, callers below callees, so one read serves about a page of stack.
 * The read never goes below the frame's own page, so it touches only pages
 * that reading the frame alone would touch, and fails only where that would. */
static __always_inline int frame_at(struct walk_state *st, __u64 f, bool page)
{
	__u64 span = st->proc.off.frame_span;
	int at = win_find(st, f, span);
	if (at >= 0)
		return at;
	__u64 start = page ? f & ~(__u64)(TP_WIN_PAGE - 1) : f;
	if (win_fill(st, start, f + span - start))
		return -1;
	return (int)(f - start);
}

/* The PyThreadState of the thread whose fs base is fsbase: the cached one if
 * it still matches, else found by walking every interpreter's thread list.
 * thread_id is pthread_self(), which is the fs base on x86-64 glibc, so this
 * works for threads that do not hold the GIL and inside pid namespaces. */
static __always_inline __u64 find_tstate(struct walk_state *st, __u64 id, __u64 fsbase)
{
	const struct tp_py_offsets *o = &st->proc.off;
	__u32 tid = (__u32)id;
	struct tstate_ent *te = &st->tcache[tid & (TP_TCACHE - 1)];
	__u64 ts = 0, thread_id = 0, interp = 0;

	if (te->id == id) {
		ts = te->ts;
	} else {
		__u64 *cached = bpf_map_lookup_elem(&tstates, &tid);
		if (cached)
			ts = *cached;
	}
	if (ts) {
		/* The thread id and the frame pointer read next are a few
		 * dozen bytes apart: one read for both. */
		__u64 a = o->ts_thread_id, b = o->ts_frame;
		__u64 lo = a < b ? a : b, hi = (a < b ? b : a) + 8;
		if (hi - lo <= TP_TSTATE_SPAN)
			win_fill(st, ts + lo, hi - lo);
		if (!win_read_u64(st, &thread_id, ts + a) && thread_id == fsbase) {
			te->id = id;
			te->ts = ts;
			stat_inc(TP_STAT_TSTATE_CACHED);
			return ts;
		}
	}
	if (read_u64(&interp, st->proc.interp_head_addr)) {
		st->s.err = TP_ERR_READ_INTERP;
		return 0;
	}
	for (int i = 0; i < TP_MAX_INTERPS && interp; i++) {
		if (read_u64(&ts, interp + o->interp_tstate_head)) {
			st->s.err = TP_ERR_READ_INTERP;
			return 0;
		}
		for (int j = 0; j < TP_MAX_THREADS && ts; j++) {
			if (read_u64(&thread_id, ts + o->ts_thread_id)) {
				st->s.err = TP_ERR_READ_TSTATE;
				return 0;
			}
			if (thread_id == fsbase) {
				bpf_map_update_elem(&tstates, &tid, &ts, BPF_ANY);
				te->id = id;
				te->ts = ts;
				stat_inc(TP_STAT_TSTATE_WALKED);
				return ts;
			}
			if (read_u64(&ts, ts + o->ts_next)) {
				st->s.err = TP_ERR_READ_TSTATE;
				return 0;
			}
		}
		if (read_u64(&interp, interp + o->interp_next))
			break;
	}
	st->s.err = TP_ERR_NO_TSTATE;
	return 0;
}

/* <= 3.10 only: the class behind the first local, so that user space can
 * name `self.method` as Class.method. If the first local is itself a class
 * (a classmethod's cls) that class, else the local's type. User space uses it
 * only when the code object's first argument is called self or cls. */
static __always_inline __u64 first_local_class(struct walk_state *st, int at)
{
	const struct tp_py_offsets *o = &st->proc.off;
	__u64 local0 = win_u64(st, at, o->frame_localsplus), type = 0, tflags = 0;
	if (!local0 || read_u64(&type, local0 + o->obj_type) || !type)
		return 0;
	/* Types are few and their flags fixed: read each type's once. */
	struct type_ent *e = &st->tycache[(type >> 4) & (TP_TYCACHE - 1)];
	__u64 now = st->s.time_ns;
	if (e->type != type || now - e->time_ns >= TP_ICACHE_NS) {
		if (read_u64(&tflags, type + o->type_flags))
			return 0;
		e->type = type;
		e->is_meta = (tflags & PY_TPFLAGS_TYPE_SUBCLASS) != 0;
		e->time_ns = now;
	}
	return e->is_meta ? local0 : type;
}

/* Ends a walk step: store progress, continue in another program, or send. */
static __always_inline void walk_step_done(struct bpf_perf_event_data *ctx, struct walk_state *st,
					   __u64 f, __u32 n, __u32 slot)
{
	st->s.nframes = n;
	st->frame = f;
	if (f && n < TP_MAX_FRAMES) {
		st->s.walk_calls++;
		bpf_tail_call(ctx, &progs, slot);
		/* Out of tail calls: the stack is deeper than we can walk. */
	}
	if (f) {
		st->s.flags |= TP_SF_TRUNCATED;
		st->s.err = TP_ERR_TRUNCATED;
	}
	submit(st);
}

/* What identifies the code object at code now (struct tp_frame.ident): its
 * name's address and first characters. Pointers alone do not do: a new code
 * object and its new name string can both land where freed ones were. */
static __always_inline __u64 code_ident(struct walk_state *st, __u64 code)
{
	struct ident_ent *e = &st->icache[(code >> 4) & (TP_ICACHE - 1)];
	__u64 now = st->s.time_ns;
	if (e->code == code && now - e->time_ns < TP_ICACHE_NS)
		return e->ident;
	__u64 name = 0, chars = 0, ident = 0;
	if (!read_u64(&name, code + st->proc.off.code_name) && name) {
		read_u64(&chars, name + st->proc.off.name_data);
		ident = name ^ chars;
	}
	e->code = code;
	e->ident = ident;
	e->time_ns = now;
	return ident;
}

/* <= 3.10: a chain of PyFrameObject through f_back; f_lasti is an int. */
SEC("perf_event")
int walk_frame_objects(struct bpf_perf_event_data *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct walk_state *st = bpf_map_lookup_elem(&scratch, &cpu);
	if (!st)
		return 0;
	const struct tp_py_offsets *o = &st->proc.off;
	__u64 f = st->frame;
	__u32 n = st->s.nframes;

	for (int i = 0; i < TP_FRAMES_PER_PROG && f && n < TP_MAX_FRAMES; i++) {
		int at = frame_at(st, f, false);
		if (at < 0) {
			st->s.err = TP_ERR_READ_FRAME;
			f = 0;
			break;
		}
		__u64 code = win_u64(st, at, o->frame_code);
		struct tp_frame *fr = &st->s.frames[frame_idx(n)];
		fr->code = code;
		fr->ident = code_ident(st, code);
		fr->pos = win_u32(st, at, o->frame_lasti);
		fr->flags = 0;
		fr->aux = first_local_class(st, at); /* every <= 3.10 version */
		n++;
		f = win_u64(st, at, o->frame_back);
	}
	walk_step_done(ctx, st, f, n, TP_PROG_WALK_FRAME_OBJECTS);
	return 0;
}

/* 3.11+: a chain of _PyInterpreterFrame through previous; the position is
 * a pointer into the code object; frames owned by the C stack are skipped. */
SEC("perf_event")
int walk_interp_frames(struct bpf_perf_event_data *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct walk_state *st = bpf_map_lookup_elem(&scratch, &cpu);
	if (!st)
		return 0;
	const struct tp_py_offsets *o = &st->proc.off;
	/* Branch-free where the versions differ: masks chosen once. */
	__u64 code_mask = (o->flags & TP_LF_STACKREF) ? ~3ULL : ~0ULL;
	__u32 owner_limit = (o->flags & TP_LF_OWNER) ? PY_OWNER_NOT_PYTHON : 256;
	__u8 entry_mask = (o->flags & TP_LF_IS_ENTRY) ? 0xff : 0;
	__u64 f = st->frame;
	__u32 n = st->s.nframes;

	for (int i = 0; i < TP_FRAMES_PER_PROG && f && n < TP_MAX_FRAMES; i++) {
		int at = frame_at(st, f, true);
		if (at < 0) {
			st->s.err = TP_ERR_READ_FRAME;
			f = 0;
			break;
		}
		__u32 owner = win_u8(st, at, o->frame_owner);
		__u64 code = win_u64(st, at, o->frame_code) & code_mask;
		/* keep is 1 for a Python frame and 0 for a shim or entry frame
		 * (owner >= limit), computed without a branch: a branch here
		 * doubles the verifier's states on every iteration. A skipped
		 * frame is written and then overwritten by the next one, and
		 * marks the Python frame below it as where an eval loop was
		 * entered. When n is 0 that mark lands in an unused slot. */
		__u32 keep = (owner - owner_limit) >> 31;
		struct tp_frame *fr = &st->s.frames[frame_idx(n)];
		fr->code = code;
		fr->ident = code_ident(st, code);
		fr->pos = (__u32)(win_u64(st, at, o->frame_lasti) - code);
		fr->flags = win_u8(st, at, o->frame_is_entry) & entry_mask & TP_FF_ENTRY;
		fr->aux = 0;
		st->s.frames[frame_idx(n - 1)].flags |= (1 - keep) & TP_FF_ENTRY;
		n += keep;
		f = win_u64(st, at, o->frame_back);
	}
	walk_step_done(ctx, st, f, n, TP_PROG_WALK_INTERP_FRAMES);
	return 0;
}

SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
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
		__u64 *lost = bpf_map_lookup_elem(&unknown_samples, &tgid);
		if (lost) {
			__sync_fetch_and_add(lost, 1);
		} else {
			__u64 one = 1;
			bpf_map_update_elem(&unknown_samples, &tgid, &one, BPF_NOEXIST);
		}
		announce(tgid, tid);
		return 0;
	}
	if (proc->kind != TP_PROC_PYTHON) {
		stat_inc(TP_STAT_NOT_PYTHON);
		return 0;
	}

	__u32 cpu = bpf_get_smp_processor_id();
	struct walk_state *st = bpf_map_lookup_elem(&scratch, &cpu);
	if (!st)
		return 0;
	struct tp_sample *s = &st->s;
	s->kind = TP_EV_SAMPLE;
	s->pid = tgid;
	s->tid = tid;
	s->cpu = cpu;
	s->time_ns = bpf_ktime_get_ns();
	s->tstate = 0;
	s->nframes = 0;
	s->nkstack = 0;
	s->err = TP_ERR_NONE;
	s->flags = TP_SF_PYTHON;
	s->walk_calls = 0;
	bpf_get_current_comm(s->comm, sizeof(s->comm));
	if (cfg.kernel_stacks) {
		long got = bpf_get_stack(ctx, s->kstack, sizeof(s->kstack), 0);
		if (got > 0)
			s->nkstack = got / sizeof(__u64);
	}
	st->proc = *proc;
	st->frame = 0;
	st->win_len = 0; /* another process's memory, or changed since */

	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 fsbase = BPF_CORE_READ(task, thread.fsbase);
	if (!fsbase) {
		s->err = TP_ERR_FSBASE;
		goto out;
	}
	__u64 ts = find_tstate(st, id, fsbase);
	if (!ts)
		goto out;
	s->tstate = ts;

	const struct tp_py_offsets *o = &st->proc.off;
	__u64 frame = 0;
	if (o->flags & TP_LF_CFRAME) {
		__u64 cframe = 0;
		if (win_read_u64(st, &cframe, ts + o->ts_frame) || !cframe ||
		    read_u64(&frame, cframe + o->cframe_current_frame)) {
			s->err = TP_ERR_READ_TSTATE;
			goto out;
		}
	} else if (win_read_u64(st, &frame, ts + o->ts_frame)) {
		s->err = TP_ERR_READ_TSTATE;
		goto out;
	}
	st->frame = frame;
	if (frame) {
		bpf_tail_call(ctx, &progs,
			      (o->flags & TP_LF_INTERP_FRAME) ? TP_PROG_WALK_INTERP_FRAMES
							      : TP_PROG_WALK_FRAME_OBJECTS);
		/* The tail call can only fail if user space did not fill the
		 * program array; send the sample without Python frames. */
		s->err = TP_ERR_TRUNCATED;
		s->flags |= TP_SF_TRUNCATED;
	}
out:
	submit(st);
	return 0;
}

/* A child of a target becomes a target: `record -- cmd` follows everything
 * the command starts. Threads share the tgid and need nothing. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	if (!cfg.follow_children)
		return 0;
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);
	if (ptgid == ctgid || !bpf_map_lookup_elem(&targets, &ptgid))
		return 0;
	__u8 one = 1;
	bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY);
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
	send_event(TP_EV_EXEC, tgid, BPF_CORE_READ(p, pid));
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	__u32 tgid = BPF_CORE_READ(p, tgid);
	bpf_map_delete_elem(&tstates, &tid);
	if (tid != tgid || !tracked(tgid))
		return 0;
	bpf_map_delete_elem(&procs, &tgid);
	bpf_map_delete_elem(&announced, &tgid);
	send_event(TP_EV_EXIT, tgid, tid);
	bpf_map_delete_elem(&targets, &tgid);
	return 0;
}
