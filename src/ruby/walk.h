/* walk.h - Ruby's walker: from a thread's thread pointer to its execution
 * context (ruby_current_ec, src/ruby/ectls.h), then its control frames,
 * innermost first, as rb_profile_frames() takes them (doc/design/ruby.md,
 * "The frames"). One source compiled twice, like CPython's
 * (cpython/walk.h): BPF runs it on every sample (ruby/ruby.bpf.h), user
 * space over a live process (ruby/rbwalk.c), so both cut a stack alike.
 *
 * The includer gives the walk state's hooks (walk/state.h) and includes
 * this after it. Everything that depends on the Ruby version arrives in
 * the procs entry (struct tp_rb_proc).
 *
 * Frames cost few reads: the control frames lie one after another at the
 * top of the VM stack, read a page at a time into the walk's window, and
 * the frames' environments (ep[-2..0]: a C function's method entry, the
 * flags) mostly lie below one another at the bottom, read a page at a
 * time into a window of their own. A walk visits at most TP_WALK_STEPS control frames,
 * the skipped ones (C blocks, frames without a pc) included.
 */
#ifndef TAIPAN_RUBY_WALK_H
#define TAIPAN_RUBY_WALK_H

#include "ruby/abi.h"

/* The most VM stack a thread has: Ruby's own default is 1 MiB of VALUEs
 * (RUBY_THREAD_VM_STACK_SIZE); a bound well above any setting, so that a
 * hostile size is refused before the frames are counted. */
#define TPW_RB_MAX_STACK_WORDS (1ULL << 28)

/* The window on the VM stack's values, where the environments of method
 * and block frames are: a power of two. The outer frames' environments lie
 * below the inner ones', a few dozen words apart, so a window that ends at
 * a frame's environment holds those of the frames below it too. */
#define TPW_RB_ENV_WIN 4096

/* Ruby's part of the walk state (struct tpw_state.rt): the position, and
 * the window on the environments. */
struct tpw_rb_state {
	__u64 cfp;		 /* the next control frame to read, 0 when the walk is over */
	__u64 end;		 /* the first address past the last real frame (the dummy one) */
	__u64 stack;		 /* the VM stack's start */
	__u64 env_base, env_len; /* env[0] is at env_base; env_len bytes hold a copy */
	__u8 env[TPW_RB_ENV_WIN + 32] __attribute__((aligned(8))); /* +: loads at masked offsets */
};
_Static_assert(sizeof(struct tpw_rb_state) <= TPW_RT_BYTES, "Ruby's walk state fits");

TPW_INLINE struct tpw_rb_state *tpw_rb(const struct tpw_state *st)
{
	return (struct tpw_rb_state *)(void *)st->rt;
}

TPW_INLINE const struct tp_rb_proc *tpw_rp(const struct tpw_state *st)
{
	return tp_rb_data(&st->proc);
}

TPW_INLINE void tpw_rb_begin(struct tpw_state *st)
{
	struct tpw_rb_state *r = tpw_rb(st);
	r->cfp = 0;
	r->end = 0;
	r->env_len = 0;
	st->s.frames[TP_MAX_FRAMES - 1].flags = 0;
}

/* The thread control block on x86-64, glibc's and musl's alike: the
 * dynamic thread vector's address is its second word (ectls.h,
 * RB_TCB_DTV). glibc's vector: 16-byte entries, module m's block at entry
 * m, the vector's length in entry -1; musl's: 8-byte entries, module m's
 * block at entry m, their count in entry 0 (abi.h, enum tp_rb_libc). */
#define TPW_RB_TCB_DTV 8
#define TPW_RB_DTV_ENTRY 16
#define TPW_RB_MUSL_DTV_ENTRY 8
/* glibc's mark of a block not allocated yet (TLS_DTV_UNALLOCATED); musl
 * allocates every thread's blocks when a library is loaded. */
#define TPW_RB_DTV_UNALLOCATED (~0ULL)
/* No process has more TLS modules than this. */
#define TPW_RB_MAX_MODULES 65536

/* 1 when v is not 0, else 0, without a branch: the compiler, which would
 * turn the sign bit back into a comparison and a jump, is not shown that
 * it is one. */
TPW_INLINE __u64 tpw_rb_nonzero(__u64 v)
{
	__u64 m = v | -v;
#ifdef __BPF__
	asm volatile("" : "+r"(m));
#endif
	return m >> 63;
}

/* The execution context of the thread whose thread pointer is fsbase
 * (through the DTV to libruby's block, or below the thread pointer in a
 * static ruby), 0 with the sample's error set when there is none to walk. */
TPW_INLINE __u64 tpw_rb_ec(struct tpw_state *st, __u64 fsbase)
{
	const struct tp_rb_proc *p = tpw_rp(st);
	__u64 mod = 0, dtv = 0, len = 0, block = 0, ec = 0;
	/* Local exec (a static ruby): the variable is dtpoff below the thread
	 * pointer, in the executable's block. */
	if (!p->got) {
		if (!p->dtpoff || fsbase < p->dtpoff || tpw_read_u64(st, &ec, fsbase - p->dtpoff)) {
			st->s.err = TP_ERR_RB_TLS;
			return 0;
		}
		if (!ec)
			st->s.err = TP_ERR_RB_NO_EC;
		return ec;
	}
	/* Where the vector's length is, and its entries' size. */
	bool musl = p->tls_libc == TP_RB_LIBC_MUSL;
	__u64 esize = musl ? TPW_RB_MUSL_DTV_ENTRY : TPW_RB_DTV_ENTRY;
	if (tpw_read_u64(st, &mod, p->got) || tpw_read_u64(st, &dtv, fsbase + TPW_RB_TCB_DTV) ||
	    dtv < TPW_RB_DTV_ENTRY || tpw_read_u64(st, &len, musl ? dtv : dtv - TPW_RB_DTV_ENTRY)) {
		st->s.err = TP_ERR_RB_TLS;
		return 0;
	}
	if (!mod || mod > len || mod > TPW_RB_MAX_MODULES ||
	    tpw_read_u64(st, &block, dtv + mod * esize) || !block ||
	    block == TPW_RB_DTV_UNALLOCATED || tpw_read_u64(st, &ec, block + p->dtpoff)) {
		st->s.err = TP_ERR_RB_TLS;
		return 0;
	}
	if (!ec)
		st->s.err = TP_ERR_RB_NO_EC;
	return ec;
}

/* What the thread of EC ec has of its ractor's GVL (enum tp_gil_state):
 * held when it is the ractor's running thread; else waiting when it is
 * runnable (its status THREAD_RUNNABLE) outside a blocking region: it
 * waits for its turn; else released (asleep, in IO, in C code without the
 * GVL). Unknown when a read fails or the layout has no GVL. */
TPW_INLINE __u8 tpw_rb_gvl(struct tpw_state *st, __u64 ec, __u64 *thp)
{
	const struct tp_rb_proc *p = tpw_rp(st);
	__u64 th = 0, ractor = 0, owner = 0, blocking = 0;
	__u8 status = 0;
	*thp = 0;
	if (!p->ec_thread || tpw_read_u64(st, &th, ec + p->ec_thread) || !th ||
	    tpw_read_u64(st, &ractor, th + p->thread_ractor) || !ractor ||
	    tpw_read_u64(st, &owner, ractor + p->ractor_gvl_owner) ||
	    tpw_read_u64(st, &blocking, th + p->thread_blocking) ||
	    tpw_read(st, &status, 1, th + p->thread_status))
		return TP_GIL_UNKNOWN;
	*thp = th;
	if (owner == th)
		return TP_GIL_HELD;
	bool runnable = !((status >> (p->status_shift & 7)) & 3);
	return runnable && !blocking ? TP_GIL_WAITING : TP_GIL_RELEASED;
}

/* Whether the GC runs, for thread th (an rb_thread_t): its VM's objspace's
 * during_gc flag. False when it cannot be read. */
TPW_INLINE bool tpw_rb_in_gc(struct tpw_state *st, __u64 th)
{
	const struct tp_rb_proc *p = tpw_rp(st);
	__u64 vm = 0, objspace = 0;
	__u8 flags = 0;
	if (!p->gc_flags || !th || tpw_read_u64(st, &vm, th + p->thread_vm) || !vm ||
	    tpw_read_u64(st, &objspace, vm + p->vm_objspace) || !objspace ||
	    tpw_read(st, &flags, 1, objspace + p->gc_flags))
		return false;
	return (flags >> (p->gc_bit & 7)) & 1;
}

/* Starts the walk of EC ec: its current frame and the end of its control
 * frames, checked against its stack's bounds. False, with the sample's
 * error set, when there is nothing to walk. */
TPW_INLINE bool tpw_rb_start(struct tpw_state *st, __u64 ec)
{
	const struct tp_rb_proc *p = tpw_rp(st);
	struct tpw_rb_state *r = tpw_rb(st);
	__u64 stack = 0, size = 0, cfp = 0, th;
	st->s.tstate = ec;
	st->s.gil = tpw_rb_gvl(st, ec, &th);
	if (tpw_read_u64(st, &stack, ec + p->ec_vm_stack) ||
	    tpw_read_u64(st, &size, ec + p->ec_vm_stack_size) ||
	    tpw_read_u64(st, &cfp, ec + p->ec_cfp)) {
		st->s.err = TP_ERR_RB_EC;
		return false;
	}
	/* The GC runs on the thread that holds the GVL: its marker first,
	 * innermost, in the group of the innermost call of the VM. */
	if (st->s.gil == TP_GIL_HELD && tpw_rb_in_gc(st, th)) {
		struct tp_frame *fr = &st->s.frames[0];
		fr->code = 0;
		fr->aux = 0;
		fr->ident = 0;
		fr->pos = 0;
		fr->flags = TP_FF_RB_GC;
		st->s.nframes = 1;
	}
	if (!cfp)
		return false; /* a thread whose first frame is not pushed yet */
	__u64 csize = p->cfp_size;
	if (!stack || size > TPW_RB_MAX_STACK_WORDS || !csize || csize > TP_RB_CFP_MAX ||
	    size * 8 < csize) {
		st->s.err = TP_ERR_RB_EC;
		return false;
	}
	/* Control frames grow down from the stack's end; the last one there
	 * is a dummy (RUBY_VM_END_CONTROL_FRAME, then one back). */
	__u64 end = stack + size * 8 - csize;
	if (cfp < stack || cfp > end || (end - cfp) % csize) {
		st->s.err = TP_ERR_RB_EC;
		return false;
	}
	r->cfp = cfp < end ? cfp : 0;
	r->end = end;
	r->stack = stack;
	r->env_len = 0;
	return r->cfp != 0;
}

/* A frame's environment, ep[-2..0], into env: from the window when it
 * holds them; else, for an environment in the VM stack, the window is
 * filled with the stack up to it (the frames below this one have theirs
 * there too), and any other (a block's environment that moved to the
 * heap) is read alone. 0, or negative when it cannot be read. */
TPW_INLINE int tpw_rb_env(struct tpw_state *st, __u64 ep, __u64 *env)
{
	struct tpw_rb_state *r = tpw_rb(st);
	__u64 lo = ep - 16, hi = ep + 8;
	__u64 at = lo - r->env_base;
	if (lo >= r->stack && hi <= r->end && !(at < r->env_len && at + 24 <= r->env_len)) {
		__u64 base = hi - TPW_RB_ENV_WIN;
		if (hi < TPW_RB_ENV_WIN || base < r->stack)
			base = r->stack;
		__u64 len = (hi - base) & (TPW_RB_ENV_WIN * 2 - 1);
		if (len > TPW_RB_ENV_WIN)
			len = TPW_RB_ENV_WIN;
		r->env_len = 0;
		if (tpw_read(st, r->env, len, base))
			return -1;
		r->env_base = base;
		r->env_len = len;
		at = lo - base;
	}
	if (at < r->env_len && at + 24 <= r->env_len) {
		__u32 i = (__u32)at & (TPW_RB_ENV_WIN - 1);
		env[0] = tpw_ld64(&r->env[i]);
		env[1] = tpw_ld64(&r->env[i + 8]);
		env[2] = tpw_ld64(&r->env[i + 16]);
		return 0;
	}
	return tpw_read(st, env, 24, lo);
}

/* One control frame: a Ruby frame with a pc or a C function's frame is
 * recorded, any other passed over. Says whether the walk goes on. The
 * position lives in st, so that a loop of the kernel's (bpf_loop) can call
 * this as well as an unrolled one. */
TPW_INLINE bool tpw_rb_frame(struct tpw_state *st)
{
	const struct tp_rb_proc *p = tpw_rp(st);
	struct tpw_rb_state *r = tpw_rb(st);
	__u64 cfp = r->cfp;
	__u32 n = st->s.nframes;
	if (!cfp || n >= TP_MAX_FRAMES)
		return false;
	__u32 csize = p->cfp_size & (TP_RB_CFP_MAX - 1);
	int at = tpw_win_find(st, cfp, csize);
	if (at < 0) {
		__u64 len = r->end - cfp;
		if (len > TP_WIN_PAGE)
			len = TP_WIN_PAGE;
		if (len < csize || tpw_win_fill(st, cfp, len)) {
			st->s.err = TP_ERR_FRAME;
			r->cfp = 0;
			return false;
		}
		at = 0;
	}
	__u64 pc = tpw_win_u64(st, at, p->cfp_pc);
	__u64 iseq = tpw_win_u64(st, at, p->cfp_iseq);
	__u64 ep = tpw_win_u64(st, at, p->cfp_ep);
	__u64 env[3]; /* ep[-2] (a C function's method entry), ep[-1], ep[0] (the flags) */
	if (ep < 16 || tpw_rb_env(st, ep, env)) { /* ep[-2] must not wrap */
		st->s.err = TP_ERR_FRAME;
		r->cfp = 0;
		return false;
	}
	/* Without a branch from here (masks, and 0 or 1 from a sign bit),
	 * as CPython's walker: each branch doubles the states the verifier
	 * keeps through an unrolled walk. Addresses are user addresses,
	 * below 2^63. */
	cfp += csize;
	r->cfp = cfp & -((cfp - r->end) >> 63); /* 0 past the last frame */
	__u64 flags = env[2];
	__u64 cframe = tpw_rb_nonzero(flags & p->flag_cframe);
	__u64 cfunc = cframe & (1 - tpw_rb_nonzero((flags & p->magic_mask) ^ p->magic_cfunc));
	/* keep: a Ruby frame with a pc, or a C function's frame; else the
	 * slot is written and left for the next frame. */
	__u64 keep = ((1 - cframe) & tpw_rb_nonzero(pc)) | cfunc;
	__u64 cmask = -cfunc;
	struct tp_frame *fr = &st->s.frames[tpw_frame_idx(n)];
	fr->code = (env[0] & cmask) | (iseq & ~cmask);
	fr->aux = pc & ~cmask;
	/* A method's frame: its method entry (ep[-2]), whose owner names
	 * its class; a block's or a script's: a cref or nothing. */
	fr->ident = env[0];
	fr->pos = 0;
	/* The first frame of a call of the VM from C ends its group of
	 * frames. A skipped one ends the group at the frame recorded before
	 * it; with none recorded yet, that write lands in the last slot,
	 * unused unless the stack fills it, and tpw_rb_end() reads it: the
	 * innermost call runs no frame that is shown. */
	__u64 finish = tpw_rb_nonzero(flags & p->flag_finish);
	fr->flags = (__u32)((finish & keep) * TP_FF_ENTRY + cfunc * TP_FF_RB_CFUNC);
	st->s.frames[tpw_frame_idx(n - 1)].flags |= (__u32)((finish & (1 - keep)) * TP_FF_ENTRY);
	n += (__u32)keep;
	st->s.nframes = n;
	return r->cfp != 0;
}

/* Whether another walker step should follow this one. */
TPW_INLINE bool tpw_rb_more(const struct tpw_state *st)
{
	return tpw_rb(st)->cfp && st->s.nframes < TP_MAX_FRAMES;
}

/* Runs one walker step, up to TP_FRAMES_PER_PROG control frames, and says
 * whether another should follow. */
TPW_INLINE bool tpw_rb_step(struct tpw_state *st)
{
	for (int i = 0; i < TP_FRAMES_PER_PROG; i++)
		if (!tpw_rb_frame(st))
			break;
	return tpw_rb_more(st);
}

/* Ends a walk: a call of the VM with no frame shown at the top, and a walk
 * that stopped with frames left, at the depth limit or out of steps (tail
 * calls). */
TPW_INLINE void tpw_rb_end(struct tpw_state *st)
{
	if (st->s.nframes < TP_MAX_FRAMES && (st->s.frames[TP_MAX_FRAMES - 1].flags & TP_FF_ENTRY))
		st->s.flags |= TP_SF_TOP_SHIM;
	if (!tpw_rb(st)->cfp)
		return;
	st->s.flags |= TP_SF_TRUNCATED;
	st->s.err = st->s.nframes >= TP_MAX_FRAMES ? TP_ERR_DEPTH : TP_ERR_STEPS;
}

#endif /* TAIPAN_RUBY_WALK_H */
