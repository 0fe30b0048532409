/* walk.h - the Python stack walker, one source compiled twice.
 *
 * CPython's BPF unit (src/cpython/cpython.bpf.h) includes it to walk the
 * sampled thread's stack in the kernel. User space (src/cpython/pywalk.c) includes it for
 * `taipan dump` and for the tests that walk memory captured from real
 * interpreters (tests/unit/test_captures.c). Both therefore find thread
 * states, skip shims, mark entry frames, identify code objects and cut deep
 * stacks by the same code, and a fix to one is a fix to both.
 *
 * Everything here is a pure function of the bytes read through one hook.
 * The walk's state is the generic one (walk/state.h), whose hooks the
 * includer defines first (tpw_read, tpw_count, struct tpw_host), with
 * CPython's own part in its runtime area (struct tpw_py_state). Besides
 * those, the includer defines:
 *   tpw_tstate_lookup(st, tid)     a PyThreadState remembered for tid, or 0
 *   tpw_tstate_store(st, tid, ts)  remember one
 *   tpw_code_first(st, code, ident)  a code object seen for the first time in
 *                            this sample (BPF describes it: struct tp_code_ev)
 *   tpw_frame_addr(st, n, f) frame n of the sample (innermost 0) is at f:
 *                            where dump --locals reads its variables
 * BPF backs them with bpf_probe_read_user and maps, user space with
 * process_vm_readv (or a captured image) and nothing.
 *
 * The code is written for the verifier: every index into a buffer is masked
 * to the buffer's size, loops have constant bounds, and where versions differ
 * the difference is a mask computed once, not a branch per frame. Those
 * masks also keep a user-space build inside its buffers whatever the target's
 * memory holds. Nothing here compares a version number
 * (doc/design/python-stacks.md, decision 1): what varies arrives in the
 * process's procs entry (struct tp_py_proc).
 */
#ifndef TAIPAN_CPYTHON_WALK_H
#define TAIPAN_CPYTHON_WALK_H

#include "cpython/abi.h"
#include "cpython/constants.h"
#include "walk/state.h"

/* code object -> identity (struct tp_frame.ident) as last read on this CPU. */
struct tpw_ident_ent {
	__u64 code, ident, time_ns;
	__u64 selfish; /* <= 3.10: the first local is called self or cls */
};

/* A str's address -> whether it is "self" or "cls", for one sample. */
struct tpw_str_ent {
	__u64 str, time_ns, selfish;
};

/* Whether the objects of a type are classes (<= 3.10's Class.method). */
struct tpw_type_ent {
	__u64 type, is_meta, time_ns;
};

/* A thread (pid_tgid) and its PyThreadState, as last found on this CPU. */
struct tpw_tstate_ent {
	__u64 id, ts;
};

/* CPython's part of the walk state (struct tpw_state.rt). BPF keeps one
 * per CPU, which is why the caches live here: a CPU's samples reuse them. */
struct tpw_py_state {
	/* code object -> identity, direct-mapped, for the sample being
	 * walked: a deep stack reads each repeated code object's name once. */
	struct tpw_ident_ent icache[TP_ICACHE];
	struct tpw_type_ent tycache[TP_TYCACHE]; /* like icache, for types */
	struct tpw_str_ent scache[TP_SCACHE];	 /* like icache, for argument names */
	/* The last first local whose class was looked up, in this sample:
	 * the methods of one object calling each other share it. */
	struct {
		__u64 obj, cls, time_ns;
	} l0;
	__u8 cbuf[TP_CODE_SPAN + 8]; /* a code object's fields (+: loads at masked offsets) */
	/* Before the tstates map: most samples on a CPU are of a few threads. */
	struct tpw_tstate_ent tcache[TP_TCACHE];
	/* The search for a thread state (tpw_search_step). */
	struct {
		__u64 interp;	/* the interpreter being searched, 0 at the end */
		__u64 ts;	/* the next thread state of its list */
		__u64 found;	/* the answer */
		__u32 nthreads; /* visited in this interpreter's list */
		__u16 ninterps; /* interpreters whose lists were started */
		__u8 listing;	/* 1 while in a list, 0 between two */
		__u8 pad;
		__u16 limit; /* TP_ERR_*_LIMIT met, the answer if none is found */
		__u16 pad2;
		__u32 max_threads; /* thread states visited per list at most */
	} find;
	__u64 frame; /* next frame to read, 0 when the walk is over */
	__u64 prev;  /* the frame read before frame, 0 if none */
};
_Static_assert(sizeof(struct tpw_py_state) <= TPW_RT_BYTES, "CPython's walk state fits");

/* CPython's part of st. */
TPW_INLINE struct tpw_py_state *tpw_py(const struct tpw_state *st)
{
	return (struct tpw_py_state *)(void *)st->rt;
}

/* The process's payload: offsets, flags, where its state is. */
TPW_INLINE const struct tp_py_proc *tpw_pp(const struct tpw_state *st)
{
	return tp_py_data(&st->proc);
}

/* Makes the part of frame f that the walkers use readable in the window and
 * returns where it starts there, or -1 if it cannot be read. With page set
 * (3.11+), a frame that is not in the window yet is read with everything
 * below it in its page: frames live one after another in the thread's data
 * stack, callers below callees, so one read serves about a page of stack.
 * The read never goes below the frame's own page, so it touches only pages
 * that reading the frame alone would touch, and fails only where that would. */
TPW_INLINE int tpw_frame_at(struct tpw_state *st, __u64 f, bool page)
{
	__u64 span = tpw_pp(st)->off.frame_span;
	int at = tpw_win_find(st, f, span);
	if (at >= 0)
		return at;
	__u64 start = page ? f & ~(__u64)(TP_WIN_PAGE - 1) : f;
	if (tpw_win_fill(st, start, f + span - start))
		return -1;
	return (int)(f - start);
}

/* Starts CPython's part of a walk that tpw_begin() started: no frame yet. */
TPW_INLINE void tpw_py_begin(struct tpw_state *st)
{
	struct tpw_py_state *py = tpw_py(st);
	/* The slot a shim on top of the stack marks (see the walker). */
	st->s.frames[TP_MAX_FRAMES - 1].flags = 0;
	py->frame = 0;
	py->prev = 0;
}

/* The PyThreadState remembered for the thread id (pid_tgid) whose fs base is
 * fsbase, if its thread id still says so: from this CPU's cache, else from
 * the host's (tpw_tstate_lookup). 0 if none, or none that matches.
 * thread_id is pthread_self(), which is the fs base on x86-64 glibc, so this
 * finds threads that do not hold the GIL, and works inside pid namespaces. */
TPW_INLINE __u64 tpw_tstate_cached(struct tpw_state *st, __u64 id, __u64 fsbase)
{
	struct tpw_py_state *py = tpw_py(st);
	const struct tp_py_offsets *o = &tpw_pp(st)->off;
	__u32 tid = (__u32)id;
	struct tpw_tstate_ent *te = &py->tcache[tid & (TP_TCACHE - 1)];
	__u64 ts = te->id == id ? te->ts : tpw_tstate_lookup(st, tid), thread_id = 0;

	if (!ts)
		return 0;
	/* The thread id and the frame pointer read next are a few dozen
	 * bytes apart: one read for both. */
	__u64 a = o->ts_thread_id, b = o->ts_frame;
	__u64 lo = a < b ? a : b, hi = (a < b ? b : a) + 8;
	if (hi - lo <= TP_TSTATE_SPAN)
		tpw_win_fill(st, ts + lo, hi - lo);
	if (tpw_win_read_u64(st, &thread_id, ts + a) || thread_id != fsbase)
		return 0;
	te->id = id;
	te->ts = ts;
	tpw_count(st, TP_STAT_TSTATE_CACHED);
	return ts;
}

/* The search of every interpreter's thread list for a thread state, in
 * steps (py->find): one step starts an interpreter's list, visits one
 * thread state, or ends a list. A search takes at most TP_FIND_STEPS
 * steps, each verified once where BPF has bpf_loop. Returns -1 with
 * st->s.err set if the list of interpreters cannot be read. */
TPW_INLINE int tpw_search_begin(struct tpw_state *st, __u32 max_threads)
{
	struct tpw_py_state *py = tpw_py(st);
	py->find.max_threads = max_threads;
	py->find.ts = 0;
	py->find.found = 0;
	py->find.nthreads = 0;
	py->find.ninterps = 0;
	py->find.listing = 0;
	py->find.limit = 0;
	if (tpw_read_u64(st, &py->find.interp, tpw_pp(st)->interp_head_addr)) {
		st->s.err = TP_ERR_INTERP_HEAD;
		return -1;
	}
	return 0;
}

/* One step of the search for the thread state whose thread id is fsbase.
 * Says whether the search is over: found (py->find.found), or failed with
 * st->s.err set. */
TPW_INLINE bool tpw_search_step(struct tpw_state *st, __u64 fsbase)
{
	struct tpw_py_state *py = tpw_py(st);
	const struct tp_py_offsets *o = &tpw_pp(st)->off;
	__u64 thread_id = 0;

	if (!py->find.listing) {
		/* Between two lists: start the next interpreter's. */
		if (!py->find.interp || py->find.ninterps >= TP_MAX_INTERPS) {
			if (py->find.interp)
				py->find.limit = TP_ERR_INTERP_LIMIT;
			st->s.err = py->find.limit ? py->find.limit : TP_ERR_NO_TSTATE;
			return true;
		}
		if (tpw_read_u64(st, &py->find.ts, py->find.interp + o->interp_tstate_head)) {
			st->s.err = TP_ERR_INTERP_THREADS;
			return true;
		}
		py->find.ninterps++;
		py->find.nthreads = 0;
		py->find.listing = 1;
		return false;
	}
	if (!py->find.ts || py->find.nthreads >= py->find.max_threads) {
		/* This list is over: a list longer than the walk visits is
		 * said so if nothing else is found. */
		if (py->find.ts)
			py->find.limit = TP_ERR_THREAD_LIMIT;
		if (tpw_read_u64(st, &py->find.interp, py->find.interp + o->interp_next))
			py->find.interp = 0;
		py->find.listing = 0;
		return false;
	}
	if (tpw_read_u64(st, &thread_id, py->find.ts + o->ts_thread_id)) {
		st->s.err = TP_ERR_TSTATE_ID;
		return true;
	}
	if (thread_id == fsbase) {
		py->find.found = py->find.ts;
		return true;
	}
	py->find.nthreads++;
	if (tpw_read_u64(st, &py->find.ts, py->find.ts + o->ts_next)) {
		st->s.err = TP_ERR_TSTATE_NEXT;
		return true;
	}
	return false;
}

/* The search's answer for thread id (pid_tgid), remembered in both caches;
 * 0 with st->s.err set if none. */
TPW_INLINE __u64 tpw_search_end(struct tpw_state *st, __u64 id)
{
	struct tpw_py_state *py = tpw_py(st);
	__u64 ts = py->find.found;
	if (!ts) {
		if (!st->s.err)
			st->s.err = TP_ERR_NO_TSTATE; /* out of steps: cannot happen */
		return 0;
	}
	__u32 tid = (__u32)id;
	struct tpw_tstate_ent *te = &py->tcache[tid & (TP_TCACHE - 1)];
	tpw_tstate_store(st, tid, ts);
	te->id = id;
	te->ts = ts;
	tpw_count(st, TP_STAT_TSTATE_WALKED);
	return ts;
}

/* The threads tpw_find_tstate visits per interpreter: in BPF, its loop is
 * the unrolled programs', which the verifier checks step by step. */
#ifdef __BPF__
#define TPW_FIND_THREADS TP_MAX_THREADS
#else
#define TPW_FIND_THREADS TP_MAX_THREADS_LOOP
#endif

/* The PyThreadState of the thread id (pid_tgid) whose fs base is fsbase:
 * the cached one if it still matches, else found by walking every
 * interpreter's thread list. Returns 0 with st->s.err set when none is
 * found. BPF's programs for kernels with bpf_loop run the same steps
 * through it. */
TPW_INLINE __u64 tpw_find_tstate(struct tpw_state *st, __u64 id, __u64 fsbase)
{
	__u64 ts = tpw_tstate_cached(st, id, fsbase);
	if (ts)
		return ts;
	if (tpw_search_begin(st, TPW_FIND_THREADS))
		return 0;
	for (int i = 0; i < TP_FIND_STEPS_FOR(TPW_FIND_THREADS); i++)
		if (tpw_search_step(st, fsbase))
			break;
	return tpw_search_end(st, id);
}

/* Whether thread state ts holds its interpreter's GIL: locked, and last
 * taken by ts (struct tp_gil). A thread that waits for it is told apart in
 * user space, by take_gil in its native stack. */
TPW_INLINE __u8 tpw_gil_state(struct tpw_state *st, __u64 ts)
{
	const struct tp_gil *g = &tpw_pp(st)->gil;
	__u64 gil = g->addr, interp = 0, holder = 0;
	int locked = 0;
	if (!g->holder)
		return TP_GIL_UNKNOWN;
	if (!gil && (tpw_read(st, &interp, sizeof(interp), ts + g->ts_interp) ||
		     tpw_read(st, &gil, sizeof(gil), interp + g->interp) || !gil))
		return TP_GIL_UNKNOWN;
	if (tpw_read(st, &holder, sizeof(holder), gil + g->holder) ||
	    tpw_read(st, &locked, sizeof(locked), gil + g->locked))
		return TP_GIL_UNKNOWN;
	return locked == 1 && holder == ts ? TP_GIL_HELD : TP_GIL_RELEASED;
}

/* Sets py->frame to the current frame of thread state ts: 0 when the
 * thread runs no Python code (a _PyCFrame or frame pointer that is NULL
 * means the same on every version: no frame yet, or none any more).
 * Returns 0, or -1 with st->s.err set. */
TPW_INLINE int tpw_top_frame(struct tpw_state *st, __u64 ts)
{
	struct tpw_py_state *py = tpw_py(st);
	const struct tp_py_offsets *o = &tpw_pp(st)->off;
	__u64 frame = 0;

	py->frame = 0;
	if (tpw_win_read_u64(st, &frame, ts + o->ts_frame)) {
		st->s.err = TP_ERR_TSTATE_FRAME;
		return -1;
	}
	if ((o->flags & TP_LF_CFRAME) && frame) {
		__u64 cframe = frame;
		frame = 0;
		if (tpw_read_u64(st, &frame, cframe + o->cframe_current_frame)) {
			st->s.err = TP_ERR_CFRAME;
			return -1;
		}
	}
	py->frame = frame;
	return 0;
}

/* The walker program for the process's frames, an enum tp_py_walker value. */
TPW_INLINE __u32 tpw_walker(const struct tpw_state *st)
{
	return (tpw_pp(st)->off.flags & TP_LF_INTERP_FRAME) ? TP_WALK_INTERP_FRAMES
							    : TP_WALK_FRAME_OBJECTS;
}

/* Whether the str at str is "self" or "cls" (its first 8 bytes of
 * characters, terminator included), cached for the sample: a stack's code
 * objects share a few interned argument names. */
TPW_INLINE __u64 tpw_str_selfish(struct tpw_state *st, __u64 str)
{
	struct tpw_py_state *py = tpw_py(st);
	struct tpw_str_ent *e = &py->scache[(str >> 4) & (TP_SCACHE - 1)];
	__u64 now = st->s.time_ns, chars = 0;
	if (e->str == str && e->time_ns == now)
		return e->selfish;
	tpw_read_u64(st, &chars, str + tpw_pp(st)->off.name_data);
	e->str = str;
	e->time_ns = now;
	/* Little-endian "self\0" and "cls\0". */
	e->selfish =
	    (chars & 0xffffffffffULL) == 0x666c6573ULL || (chars & 0xffffffffULL) == 0x736c63ULL;
	return e->selfish;
}

/* The 8 bytes at offset off of the code object bytes in py->cbuf. */
TPW_INLINE __u64 tpw_cbuf_u64(const struct tpw_state *st, __u32 off)
{
	const struct tpw_py_state *py = tpw_py(st);
	return tpw_ld64(&py->cbuf[off & (TP_CODE_SPAN - 1)]);
}

/* What the walk knows of the code object at code now: its identity
 * (tp_code_ident()) and, <= 3.10, whether its first local is called self
 * or cls (only then is that local's class worth a read). The cache serves
 * repeats within one sample only: the code objects of a stack being walked
 * are held by its frames, while between two samples an address can pass to
 * another code object, and a name read then would be the wrong one. */
TPW_INLINE struct tpw_ident_ent *tpw_code_entry(struct tpw_state *st, __u64 code)
{
	struct tpw_py_state *py = tpw_py(st);
	struct tpw_ident_ent *e = &py->icache[(code >> 4) & (TP_ICACHE - 1)];
	__u64 now = st->s.time_ns;
	if (e->code == code && e->time_ns == now)
		return e;
	const struct tp_py_offsets *o = &tpw_pp(st)->off;
	__u32 fo = o->code_filename, no = o->code_name, vo = o->code_varnames;
	bool names = (o->flags & TP_LF_SELF_CLASS) && vo && o->tuple_item;
	__u32 lo = fo < no ? fo : no, hi = (fo < no ? no : fo) + 8;
	if (names) {
		lo = vo < lo ? vo : lo;
		hi = vo + 8 > hi ? vo + 8 : hi;
	}
	__u64 name = 0, file = 0, chars = 0, varnames = 0;
	/* Every version so far: the fields lie within a few words, and one
	 * read takes them all. */
	__u64 len = hi - lo;
	if (!names && fo + 8 == no) {
		/* 3.11+ and every version so far: file and name side by side. */
		__u64 ptrs[2] = {0, 0};
		if (!tpw_read(st, ptrs, sizeof(ptrs), code + fo)) {
			file = ptrs[0];
			name = ptrs[1];
		}
	} else if (len < TP_CODE_SPAN) {
#ifdef __BPF__
		asm volatile("" : "+r"(len)); /* keep the mask below: the verifier needs it */
#endif
		if (!tpw_read(st, py->cbuf, len & (TP_CODE_SPAN - 1), code + lo)) {
			file = tpw_cbuf_u64(st, fo - lo);
			name = tpw_cbuf_u64(st, no - lo);
			varnames = names ? tpw_cbuf_u64(st, vo - lo) : 0;
		}
	} else {
		tpw_read_u64(st, &name, code + no);
		tpw_read_u64(st, &file, code + fo);
		if (names)
			tpw_read_u64(st, &varnames, code + vo);
	}
	if (name)
		tpw_read_u64(st, &chars, name + o->name_data);
	__u64 ident = tp_code_ident(name, chars, file);
	if (ident)
		tpw_code_first(st, code, ident);
	/* Without the offsets, every first local's class is read, as user
	 * space decides alone which to use. */
	__u64 selfish = !names, first = 0;
	if (names && varnames && !tpw_read_u64(st, &first, varnames + o->tuple_item) && first)
		selfish = tpw_str_selfish(st, first);
	e->code = code;
	e->ident = ident;
	e->selfish = selfish;
	e->time_ns = now;
	return e;
}

TPW_INLINE __u64 tpw_code_ident(struct tpw_state *st, __u64 code)
{
	return tpw_code_entry(st, code)->ident;
}

/* Whether code, as read from a frame, cannot be a code object's address:
 * below 64 KiB, where Linux maps nothing by default (vm.mmap_min_addr) and
 * where no binary, heap or arena lies, or not 8-byte aligned as every
 * PyObject is. Every frame of a sound chain passes, shims and entry frames
 * included. A caller link that leads to an ordinary object instead of a
 * frame (a stale `previous`, see tpw_walk_interp_frames) reads that object's
 * reference count here: a small number, or 3.12's odd immortal count. */
TPW_INLINE bool tpw_not_code(__u64 code)
{
	return code < 0x10000 || (code & 7);
}

/* Whether the walk must stop at the caller link back of frame f, which was
 * reached from frame prev (0 for the first frame): back leads to f itself
 * or to prev. Such a chain would repeat the same frames up to the depth
 * limit; longer loops still end there, as truncated. */
TPW_INLINE bool tpw_loops(__u64 back, __u64 f, __u64 prev)
{
	return back == f || (back && back == prev);
}

/* <= 3.10 only: the class behind the first local, so that user space can
 * name `self.method` as Class.method. If the first local is itself a class
 * (a classmethod's cls) that class, else the local's type. User space uses it
 * only when the code object's first argument is called self or cls. */
TPW_INLINE __u64 tpw_first_local_class(struct tpw_state *st, int at)
{
	struct tpw_py_state *py = tpw_py(st);
	const struct tp_py_offsets *o = &tpw_pp(st)->off;
	__u64 local0 = tpw_win_u64(st, at, o->frame_localsplus), type = 0, tflags = 0;
	__u64 now = st->s.time_ns;
	if (!local0)
		return 0;
	if (py->l0.obj == local0 && py->l0.time_ns == now)
		return py->l0.cls;
	py->l0.obj = local0;
	py->l0.time_ns = now;
	py->l0.cls = 0;
	if (tpw_read_u64(st, &type, local0 + o->obj_type) || !type)
		return 0;
	/* Types are few and their flags fixed: read each type's once. */
	struct tpw_type_ent *e = &py->tycache[(type >> 4) & (TP_TYCACHE - 1)];
	if (e->type != type || now - e->time_ns >= TP_ICACHE_NS) {
		if (tpw_read_u64(st, &tflags, type + o->type_flags))
			return 0;
		e->type = type;
		e->is_meta = (tflags & PY_TPFLAGS_TYPE_SUBCLASS) != 0;
		e->time_ns = now;
	}
	py->l0.cls = e->is_meta ? local0 : type;
	return py->l0.cls;
}

/* Ends the walk at the current frame with err. */
TPW_INLINE bool tpw_stop(struct tpw_state *st, __u16 err)
{
	struct tpw_py_state *py = tpw_py(st);
	st->s.err = err;
	py->frame = 0;
	return false;
}

/* Moves the walk from frame f, just read, to its caller back; says whether
 * the walk goes on. */
TPW_INLINE bool tpw_advance(struct tpw_state *st, __u64 f, __u64 back)
{
	struct tpw_py_state *py = tpw_py(st);
	if (tpw_loops(back, f, py->prev)) {
		st->s.err = TP_ERR_FRAME_LOOP;
		back = 0;
	}
	py->prev = f;
	py->frame = back;
	return back != 0;
}

/* One frame of the walk, <= 3.10: a chain of PyFrameObject through
 * f_back; f_lasti is an int. Says whether the walk goes on. The walk's
 * position lives in st (its CPython part's frame and prev, s.nframes), so
 * that a loop of the kernel's (bpf_loop) can call this as well as an
 * unrolled one. */
TPW_INLINE bool tpw_frame_object(struct tpw_state *st)
{
	struct tpw_py_state *py = tpw_py(st);
	const struct tp_py_offsets *o = &tpw_pp(st)->off;
	__u64 f = py->frame;
	__u32 n = st->s.nframes;

	if (!f || n >= TP_MAX_FRAMES)
		return false;
	int at = tpw_frame_at(st, f, true);
	if (at < 0)
		return tpw_stop(st, TP_ERR_FRAME);
	__u64 code = tpw_win_u64(st, at, o->frame_code);
	if (tpw_not_code(code))
		return tpw_stop(st, TP_ERR_FRAME_LOOP);
	struct tp_frame *fr = &st->s.frames[tpw_frame_idx(n)];
	struct tpw_ident_ent *ce = tpw_code_entry(st, code);
	fr->code = code;
	fr->ident = ce->ident;
	fr->pos = tpw_win_u32(st, at, o->frame_lasti);
	fr->flags = 0;
	/* Every <= 3.10 version: user space names self.method Class.method. */
	fr->aux = ce->selfish ? tpw_first_local_class(st, at) : 0;
	/* The outermost frame a generator runs, so far (record --async), as
	 * the 3.11+ walk keeps it, but its generator: f_gen, the task's
	 * coroutine where asyncio runs one. Without a branch, as there. */
	__u64 gen_ok = o->frame_owner ? ~0ULL : 0;
	__u64 g = tpw_win_u64(st, at, o->frame_owner) & gen_ok;
	__u64 gen = -((g | -g) >> 63);
	st->s.task_frame = (g & gen) | (st->s.task_frame & ~gen);
	st->s.task_idx = (__u16)(((__u64)n & gen) | (st->s.task_idx & ~gen));
	tpw_frame_addr(st, n, f);
	st->s.nframes = n + 1;
	return tpw_advance(st, f, tpw_win_u64(st, at, o->frame_back));
}

/* One frame of the walk, 3.11+: a chain of _PyInterpreterFrame through
 * previous; the position is a pointer into the code object; frames owned by
 * the C stack are skipped, and mark the Python frame below them as where an
 * eval loop was entered. Says whether the walk goes on.
 *
 * A frame's `previous` can be stale. 3.12's generic CALL of a Python
 * function (Python/bytecodes.c, inst(CALL), the _PyEvalFramePushAndInit
 * path ending in DISPATCH_INLINED) links the new frame in with
 * `new_frame->previous = frame; frame = cframe.current_frame = new_frame;`,
 * and GCC emits the store to cframe.current_frame first: a sample in
 * between sees the new frame, not yet started, over whatever its memory
 * held before. That is often a pointer to an object, whose ob_type sits
 * where `previous` does, and whose type's type is `type`, which is its own
 * type: read as frames, a loop. tpw_not_code() stops at the object,
 * tpw_loops() at any frame that leads back to itself or its callee. */
TPW_INLINE bool tpw_interp_frame(struct tpw_state *st)
{
	struct tpw_py_state *py = tpw_py(st);
	const struct tp_py_offsets *o = &tpw_pp(st)->off;
	/* Branch-free where the versions differ: masks. */
	__u64 code_mask = (o->flags & TP_LF_STACKREF) ? ~3ULL : ~0ULL;
	__u32 owner_limit = (o->flags & TP_LF_OWNER) ? PY_OWNER_NOT_PYTHON : 256;
	__u8 entry_mask = (o->flags & TP_LF_IS_ENTRY) ? 0xff : 0;
	__u64 ip_mask = (o->flags & TP_LF_TLBC) ? ~0ULL : 0;
	__u32 gen_ok = o->frame_owner ? 1 : 0;
	__u64 f = py->frame;
	__u32 n = st->s.nframes;

	if (!f || n >= TP_MAX_FRAMES)
		return false;
	int at = tpw_frame_at(st, f, true);
	if (at < 0)
		return tpw_stop(st, TP_ERR_FRAME);
	__u32 owner = tpw_win_u8(st, at, o->frame_owner);
	__u64 code = tpw_win_u64(st, at, o->frame_code) & code_mask;
	if (tpw_not_code(code))
		return tpw_stop(st, TP_ERR_FRAME_LOOP);
	/* keep is 1 for a Python frame and 0 for a shim or entry frame
	 * (owner >= limit), computed without a branch: a branch here doubles
	 * the verifier's states on every frame of an unrolled walk. A skipped
	 * frame is written and then overwritten by the next one, and marks
	 * the Python frame below it as where an eval loop was entered. When n
	 * is 0 that mark lands in an unused slot. */
	__u32 keep = (owner - owner_limit) >> 31;
	struct tp_frame *fr = &st->s.frames[tpw_frame_idx(n)];
	fr->code = code;
	fr->ident = tpw_code_ident(st, code);
	__u64 ip = tpw_win_u64(st, at, o->frame_lasti);
	fr->pos = (__u32)(ip - code);
	fr->flags = tpw_win_u8(st, at, o->frame_is_entry) & entry_mask & TP_FF_ENTRY;
	/* 3.14t+: the pointer may lie in a thread's copy of the bytecode,
	 * anywhere in the heap. Which copy is user space's to find: it reads
	 * the code object anyway, and BPF pays nothing for it. */
	fr->aux = ip & ip_mask;
	st->s.frames[tpw_frame_idx(n - 1)].flags |= (1 - keep) & TP_FF_ENTRY;
	/* The entry frame is a local of its eval-loop call (3.12+): an anchor
	 * for the native walk. 3.15's base frame, in the thread state, is one
	 * no native frame holds. */
	tpw_anchor(st, f, 1 - keep);
	/* The outermost kept frame a generator owns, so far: the walk goes
	 * outward, so the last one wins (record --async). */
	__u64 gen = -(__u64)((((owner ^ PY_OWNER_GENERATOR) - 1) >> 31) & keep & gen_ok);
	st->s.task_frame = (f & gen) | (st->s.task_frame & ~gen);
	st->s.task_idx = (__u16)(((__u64)n & gen) | (st->s.task_idx & ~gen));
	/* Overwritten with the next frame's, as fr is, when skipped. */
	tpw_frame_addr(st, n, f);
	st->s.nframes = n + keep;
	return tpw_advance(st, f, tpw_win_u64(st, at, o->frame_back));
}

/* Whether another walker step should follow this one: the stack goes on
 * and there is room for its frames. */
TPW_INLINE bool tpw_more(const struct tpw_state *st)
{
	const struct tpw_py_state *py = tpw_py(st);
	return py->frame && st->s.nframes < TP_MAX_FRAMES;
}

/* Runs one walker step, up to TP_FRAMES_PER_PROG frames from py->frame,
 * and says whether another should follow. */
TPW_INLINE bool tpw_step(struct tpw_state *st, __u32 walker)
{
	for (int i = 0; i < TP_FRAMES_PER_PROG; i++)
		if (!(walker == TP_WALK_INTERP_FRAMES ? tpw_interp_frame(st)
						      : tpw_frame_object(st)))
			break;
	return tpw_more(st);
}

/* Ends a walk that stopped with frames left: at the depth limit, or out of
 * steps (tail calls). */
TPW_INLINE void tpw_cut(struct tpw_state *st)
{
	struct tpw_py_state *py = tpw_py(st);
	/* A shim skipped at the top marked the slot below frames[0]: the
	 * last one, unused unless the stack fills it. */
	if (st->s.nframes < TP_MAX_FRAMES && (st->s.frames[TP_MAX_FRAMES - 1].flags & TP_FF_ENTRY))
		st->s.flags |= TP_SF_TOP_SHIM;
	if (!py->frame)
		return;
	st->s.flags |= TP_SF_TRUNCATED;
	st->s.err = st->s.nframes >= TP_MAX_FRAMES ? TP_ERR_DEPTH : TP_ERR_STEPS;
}

#endif /* TAIPAN_CPYTHON_WALK_H */
