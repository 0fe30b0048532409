/* native.h - the native stack unwinder, one source compiled twice, like
 * the runtimes' walkers, whose walk state (walk/state.h) it shares.
 *
 * It follows the rows that user space made of each file's call-frame
 * information (src/proc/unwtab.c, struct tp_urow, packed as struct
 * tp_ufile says, each row naming a shared struct tp_urule): from an instruction
 * pointer, the row that covers it says how to find the canonical frame
 * address (CFA), below which the return address and, where the function
 * saved it, the caller's frame pointer lie. Code without rows (no CFI, or an
 * anonymous mapping) is followed by its frame pointer. Every step is checked:
 * the stack pointer must move up, every read must succeed, and a rule this
 * code does not know ends the walk with an error (enum tp_native_err), never
 * with a guessed frame.
 *
 * Before including this file, the includer defines walk/state.h's hooks
 * (tpw_read for the stack's memory) and:
 *   tpn_mapping(st, ip, m)    fill struct tp_umap *m for the process's
 *                             mapping of ip: 0, or -1 when none is known
 *   tpn_table(st, file)       a handle on file's table (NULL: none)
 *   tpn_file(st, file, info)  fill struct tp_ufile *info: 0 or -1
 *   tpn_elem(st, t, i, v)     fill __u64 *v with element i of table handle t
 *                             (page index first, then rows): 0, or -1
 *   tpn_rule(st, id)          a const struct tp_urule * for rule id, or NULL
 *
 * x86-64 only: the return address is at CFA - 8.
 */
#ifndef TAIPAN_WALK_NATIVE_H
#define TAIPAN_WALK_NATIVE_H

#include "taipan_abi.h"
#include "walk/state.h"

/* Starts a native walk at the registers of the sampled thread's user mode. */
TPW_INLINE void tpn_begin(struct tpw_state *st, __u64 ip, __u64 sp, __u64 fp, __u64 r10, __u64 r11,
			  __u64 r13)
{
	st->s.flags |= TP_SF_NATIVE;
	/* The runtime's walk, over by now, left anchors: the frames that
	 * hold them are its eval-loop calls. Any that did not fit leaves the
	 * merge to names. */
	for (int i = 0; i < TP_USTACK_MAX / 64; i++) {
		st->s.anchored[i] = 0;
		st->s.exact[i] = 0;
	}
	if (st->a.n && !st->a.full)
		st->s.flags |= TP_SF_ANCHORED;
	st->a.next = 0;
	st->s.nustack = 0;
	st->s.uerr = TP_UERR_NONE;
	st->u.ip = ip;
	st->u.sp = sp;
	st->u.fp = fp;
	st->u.r10 = r10;
	st->u.r11 = r11;
	st->u.r13 = r13;
	st->u.top = 0; /* the caller sets it after, if it knows it */
	st->u.m.end = 0;
	st->u.frames = 0;
	st->u.done = 0;
	st->u.exact = 1;
}

TPW_INLINE void tpn_fail(struct tpw_state *st, __u16 err)
{
	st->s.uerr = err;
	st->u.done = 1;
}

/* Row j of table t (described by info), packed. */
TPW_INLINE int tpn_row_word(struct tpw_state *st, void *t, const struct tp_ufile *info, __u32 j,
			    __u32 *w)
{
	__u64 v;
	if (tpn_elem(st, t, info->npages + (j >> 1), &v))
		return -1;
	*w = (__u32)(v >> ((j & 1) * 32));
	return 0;
}

/* The rule of the row of table t (described by info) that covers vaddr:
 * the page's index element bounds the rows that start in vaddr's page, a
 * bounded binary search finds the last of them at or before vaddr, or
 * else the row before them holds. 0 with *row filled, or -1. */
TPW_INLINE int tpn_find_row(struct tpw_state *st, void *t, const struct tp_ufile *info, __u32 vaddr,
			    struct tp_urule *row)
{
	const struct tp_urule *rule;
	__u32 page, lo, hi, w, found = 0;
	__u64 v;
	if (vaddr < info->base || !info->nrows || !info->npages)
		return -1;
	page = (vaddr - info->base) >> TP_UPAGE_SHIFT;
	if (page >= info->npages) {
		/* Past the last page: the last row (the one after every FDE). */
		if (tpn_row_word(st, t, info, info->nrows - 1, &found))
			return -1;
	} else {
		__u32 off = (vaddr - info->base) & ((1u << TP_UPAGE_SHIFT) - 1);
		bool have = false;
		if (tpn_elem(st, t, page, &v))
			return -1;
		lo = (__u32)v;
		hi = (__u32)(v >> 32);
		if (lo > hi || hi > info->nrows)
			return -1;
		/* lo becomes the first of the page's rows past off, and found
		 * the row before it once a step saw it; at most
		 * 1 << TP_UPAGE_SHIFT rows start in a page, so TP_USEARCH
		 * steps end the search. */
		for (int i = 0; i < TP_USEARCH && lo < hi; i++) {
			__u32 mid = lo + (hi - lo) / 2;
			if (tpn_row_word(st, t, info, mid, &w))
				return -1;
			if (w >> TP_URULE_BITS <= off) {
				lo = mid + 1;
				found = w;
				have = true;
			} else {
				hi = mid;
			}
		}
		if (lo != hi || !lo)
			return -1; /* below the first row, or a search cut short */
		/* No row of the page at or before off: the one before them. */
		if (!have && tpn_row_word(st, t, info, lo - 1, &found))
			return -1;
	}
	rule = tpn_rule(st, found & TP_URULE_MASK);
	if (!rule)
		return -1;
	*row = *rule;
	return 0;
}

/* How far below a main thread's stack top its start code's frames lie at
 * most (musl: _start, _start_c, __libc_start_main, its stage2: a few
 * hundred bytes). */
#define TPN_START_SLACK 1024

/* Stack bytes a window fill reads at most: the rest of the page, up to
 * this. */
#define TPN_STACK_WIN 1024

/* The 8 bytes of the stack at addr. Through the window, which the walk's
 * runtime part no longer needs: a miss fills it with the stack from addr
 * to the end of its page (at most TPN_STACK_WIN), which holds the next
 * frames' saved registers too, so that a deep stack costs a read per
 * dozen frames, not two per frame. A fill cannot cross into a page that
 * may be unmapped; failing, the 8 bytes are read alone. */
TPW_INLINE int tpn_stack_u64(struct tpw_state *st, __u64 *dst, __u64 addr)
{
	int at = tpw_win_find(st, addr, 8);
	if (at < 0) {
		__u64 n = 4096 - (addr & 4095);
		if (n > TPN_STACK_WIN)
			n = TPN_STACK_WIN;
		if (n < 8 || tpw_win_fill(st, addr, n))
			return tpw_read(st, dst, 8, addr);
		at = 0;
	}
	*dst = tpw_ld64(&st->win[(__u32)at & TP_WIN_MASK]);
	return 0;
}

/* Marks the frame just recorded, whose stack is [sp, cfa), if it holds the
 * next anchor: an anchor below it, which no frame held, is passed over. */
TPW_INLINE void tpn_anchor(struct tpw_state *st, __u64 sp, __u64 cfa)
{
	__u32 i = st->a.next, k = st->s.nustack - 1;
	if (i >= st->a.n)
		return;
	__u64 a = st->a.addr[i & (TP_ANCHORS_MAX - 1)];
	if (a < sp) {
		st->a.next = ++i;
		if (i >= st->a.n)
			return;
		a = st->a.addr[i & (TP_ANCHORS_MAX - 1)];
	}
	if (a < sp || a >= cfa)
		return;
	st->a.next = i + 1;
	st->s.anchored[(k >> 6) & (TP_USTACK_MAX / 64 - 1)] |= 1ULL << (k & 63);
}

/* One unwinding step: records the current frame, then moves the registers to
 * its caller's. */
TPW_INLINE void tpn_frame(struct tpw_state *st)
{
	struct tp_umap m;
	struct tp_urule row;
	__u64 ip = st->u.ip, sp = st->u.sp, cfa, ra, fp = st->u.fp;
	/* A return address points after its call, which may be the last
	 * instruction of a function: look up the call itself. The sampled
	 * instruction, or one a signal interrupted, is where it is. */
	__u64 at = st->u.exact ? ip : ip - 1;
	__u16 bad_step = TP_UERR_BAD_STEP, bad_read = TP_UERR_READ;

	if (st->s.nustack >= TP_USTACK_MAX) {
		tpn_fail(st, TP_UERR_DEPTH);
		return;
	}
	__u32 k = st->s.nustack;
	st->s.ustack[k & (TP_USTACK_MAX - 1)] = ip;
	st->s.exact[(k >> 6) & (TP_USTACK_MAX / 64 - 1)] |= (__u64)(st->u.exact & 1) << (k & 63);
	st->s.nustack++;
	st->u.frames++;

	/* The last frame's mapping and table, or a lookup of both. */
	bool same = at >= st->u.m.start && at < st->u.m.end;
	if (same) {
		m = st->u.m;
	} else if (tpn_mapping(st, at, &m)) {
		tpn_fail(st, TP_UERR_UNMAPPED);
		return;
	}
	if (m.flags & TP_UM_FP) {
		row = (struct tp_urule){.cfa = TP_CFA_NOCFI, .fp = TP_FP_SAME};
	} else {
		void *t = tpn_table(st, m.file);
		if (!t || (!same && tpn_file(st, m.file, &st->u.info)) ||
		    tpn_find_row(st, t, &st->u.info, (__u32)(at - m.bias), &row)) {
			st->u.m.end = 0;
			tpn_fail(st, TP_UERR_TABLE);
			return;
		}
	}
	if (!same)
		st->u.m = m;

	switch (row.cfa) {
	case TP_CFA_SP:
		cfa = sp + (__s64)row.cfa_off;
		break;
	case TP_CFA_FP:
		cfa = fp + (__s64)row.cfa_off;
		break;
	case TP_CFA_FP_DEREF:
		if (tpn_stack_u64(st, &cfa, fp + (__s64)row.cfa_off)) {
			tpn_fail(st, TP_UERR_READ);
			return;
		}
		break;
	case TP_CFA_R10:
	case TP_CFA_R11:
	case TP_CFA_R13:
		/* A realigning prologue's or epilogue's, a probe loop's: only
		 * the sampled frame, or one a signal interrupted, is in one. */
		if (!st->u.exact) {
			tpn_fail(st, TP_UERR_CFI);
			return;
		}
		cfa = row.cfa == TP_CFA_R10   ? st->u.r10
		      : row.cfa == TP_CFA_R11 ? st->u.r11
					      : st->u.r13;
		cfa += (__s64)row.cfa_off;
		break;
	case TP_CFA_PLT:
		cfa = sp + (__s64)row.cfa_off + ((ip & 15) >= (__u64)row.fp_off ? 8 : 0);
		row.fp = TP_FP_SAME;
		break;
	case TP_CFA_END:
		st->u.done = 1; /* the thread's root */
		return;
	case TP_CFA_SIGNAL: {
		/* The kernel's signal frame: the interrupted registers, saved
		 * on the stack; the caller is the interrupted instruction.
		 * Its stack need not lie above (sigaltstack), and the walk is
		 * bounded anyway. */
		__u64 regs[(TP_UC_RIP - TP_UC_R10) / 8 + 1];
		if (tpw_read(st, regs, sizeof(regs), sp + TP_UC_R10)) {
			tpn_fail(st, TP_UERR_READ);
			return;
		}
		/* Named as is: the kernel's return address is the
		 * trampoline's first instruction, not after a call. */
		st->s.exact[(k >> 6) & (TP_USTACK_MAX / 64 - 1)] |= 1ULL << (k & 63);
		st->u.r10 = regs[0];
		st->u.r11 = regs[(TP_UC_R11 - TP_UC_R10) / 8];
		st->u.r13 = regs[(TP_UC_R13 - TP_UC_R10) / 8];
		st->u.fp = regs[(TP_UC_RBP - TP_UC_R10) / 8];
		st->u.sp = regs[(TP_UC_RSP - TP_UC_R10) / 8];
		st->u.ip = regs[(TP_UC_RIP - TP_UC_R10) / 8];
		st->u.exact = 1;
		if (!st->u.ip)
			st->u.done = 1;
		return;
	}
	case TP_CFA_NOCFI: {
		/* Code without CFI that returns at once says itself where its
		 * return address is: the instructions at ip are what runs
		 * next. `ret`, or `add $N, %rsp; ret`: CPython's -X perf
		 * trampolines (3.12, 3.13) keep no frame pointer, and every
		 * call through one returns to `add $8, %rsp; ret`. */
		__u8 code[5];
		if (!tpw_read(st, code, sizeof(code), ip)) {
			__u32 pop = code[0] == 0xc3 ? 0
				    : code[0] == 0x48 && code[1] == 0x83 && code[2] == 0xc4 &&
					    code[3] < 0x80 && code[4] == 0xc3
					? code[3]
					: 256;
			if (pop < 256) {
				cfa = sp + pop + 8;
				row.fp = TP_FP_SAME;
				break;
			}
		}
		if (!fp) {
			/* The x86-64 ABI's mark of the outermost frame: _start
			 * clears rbp (ld.so's has no CFI to say so). */
			st->u.done = 1;
			return;
		}
		/* The main thread's start code, within TPN_START_SLACK of its
		 * stack's top: musl's, which has no CFI, keeps argc in rbp
		 * when it calls main (libc_start_main_stage2). Nothing but
		 * the start code lies between main's frame and the top. */
		if (st->u.top && sp <= st->u.top && st->u.top - sp < TPN_START_SLACK) {
			st->u.done = 1;
			return;
		}
		/* By its frame pointer, which code without CFI may not keep:
		 * a step that fails here fails for that. */
		bad_step = bad_read = TP_UERR_NOFP;
		cfa = fp + 16;
		row.fp = TP_FP_AT;
		row.fp_off = -16;
		break;
	}
	default:
		tpn_fail(st, TP_UERR_CFI);
		return;
	}
	if (cfa <= sp) {
		tpn_fail(st, bad_step);
		return;
	}
	tpn_anchor(st, sp, cfa);
	if (row.fp == TP_FP_AT && row.fp_off == -16) {
		if (tpn_stack_u64(st, &fp, cfa - 16) || tpn_stack_u64(st, &ra, cfa - 8)) {
			tpn_fail(st, bad_read);
			return;
		}
	} else {
		if (tpn_stack_u64(st, &ra, cfa - 8)) {
			tpn_fail(st, TP_UERR_READ);
			return;
		}
		if (row.fp != TP_FP_SAME &&
		    tpn_stack_u64(st, &fp, (row.fp == TP_FP_AT ? cfa : fp) + (__s64)row.fp_off)) {
			tpn_fail(st, TP_UERR_READ);
			return;
		}
	}
	st->u.ip = ra;
	st->u.sp = cfa;
	st->u.fp = fp;
	st->u.exact = 0;
	if (!ra)
		st->u.done = 1; /* a zero return address ends a frame-pointer chain */
}

/* Unwinds up to TP_UFRAMES_PER_PROG frames; says whether more remain. */
TPW_INLINE bool tpn_step(struct tpw_state *st)
{
	for (int i = 0; i < TP_UFRAMES_PER_PROG; i++) {
		if (st->u.done)
			break;
		tpn_frame(st);
	}
	return !st->u.done;
}

#endif /* TAIPAN_WALK_NATIVE_H */
