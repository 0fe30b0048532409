/* abi.h - what Ruby's BPF walker and user space share: the generic ABI
 * (taipan_abi.h) carries it in its runtime payloads, ranges and slots.
 *
 * The same rules as the generic header: fixed-width types only, target
 * addresses as __u64, compiles on its own in either world, sizes guarded.
 * Only the Ruby wing, its BPF unit and the lists of every runtime
 * (taipan_runtimes.h) include it. doc/design/ruby.md says where each value
 * comes from.
 */
#ifndef TAIPAN_RUBY_ABI_H
#define TAIPAN_RUBY_ABI_H

#include "taipan_abi.h"

/* Ruby's payload of a procs entry (struct tp_proc.data, runtime
 * TP_RT_RUBY), written by user space after discovery: where each thread's
 * execution context is (src/ruby/ectls.h) and the layout of the frames
 * (src/ruby/rboffsets.h). Read in place (tp_rb_data()). */
struct __attribute__((may_alias)) tp_rb_proc {
	/* The process's copy of the GOT entry of ruby_current_ec: its first
	 * word is the Ruby library's TLS module id; the EC is at dtpoff in
	 * that module's block of each thread. got 0: a static ruby (the
	 * local-exec model), whose EC is at fs base - dtpoff in each thread.
	 * Whose vector of blocks (DTV) that block is found in: tls_libc. */
	__u64 got;
	__u32 dtpoff;
	/* A frame's environment flags (ep[0]): magic mask and a C function's
	 * magic, a C frame's flag, the flag of the first frame of a call of
	 * the VM from C (VM_FRAME_FLAG_FINISH). */
	__u32 magic_mask, magic_cfunc, flag_cframe, flag_finish;
	/* rb_execution_context_t */
	__u16 ec_vm_stack, ec_vm_stack_size, ec_cfp;
	/* rb_control_frame_t: its size and fields */
	__u16 cfp_size, cfp_pc, cfp_iseq, cfp_ep;
	/* The GVL: ec->thread_ptr, thread->ractor, the ractor's GVL holder,
	 * thread->blocking_region_buffer, the byte of thread->status and the
	 * status's shift in it; ec_thread 0: not read */
	__u16 ec_thread, thread_ractor, ractor_gvl_owner, thread_blocking;
	__u16 thread_status, status_shift;
	/* The GC: thread->vm, vm->objspace, and the byte of the objspace
	 * whose bit gc_bit is its during_gc flag; gc_flags 0: not read */
	__u16 thread_vm, vm_objspace, gc_flags, gc_bit;
	/* The C library whose DTV the general-dynamic access goes through
	 * (enum tp_rb_libc): the two bytes that padded the struct to 64, so
	 * that it does not grow. */
	__u16 tls_libc;
};

/* Whose DTV a thread has, at its thread pointer + 8 in both (glibc's
 * tcbhead_t.dtv, musl's struct pthread.dtv). */
enum tp_rb_libc {
	/* glibc: 16-byte entries (the block's address, then whether it is
	 * static), module m's at entry m; how many in entry -1. */
	TP_RB_LIBC_GLIBC = 0,
	/* musl (Alpine): 8-byte entries, the block's address alone, module
	 * m's at entry m; how many in entry 0 (src/env/__init_tls.c,
	 * __copy_tls; ldso/dynlink.c, install_new_tls). */
	TP_RB_LIBC_MUSL = 1,
};

/* The payload of a Ruby process's procs entry. */
static inline __attribute__((always_inline)) const struct tp_rb_proc *
tp_rb_data(const struct tp_proc *p)
{
	return (const struct tp_rb_proc *)(const void *)p->data;
}

/* A procs entry for a Ruby process whose payload is rb. */
static inline void tp_rb_proc_set(struct tp_proc *p, const struct tp_rb_proc *rb)
{
	*p = (struct tp_proc){.runtime = TP_RT_RUBY};
	__builtin_memcpy(p->data, rb, sizeof(*rb));
}

/* A control frame is read whole: at most this many bytes (64 in 3.1, 56 in
 * 3.3). A power of two. */
#define TP_RB_CFP_MAX 128
/* Control frames a walk visits, C frames it skips included: the tail
 * calls' budget (TP_WALK_STEPS), as CPython's. */

/* A Ruby frame (struct tp_frame): code is its instruction sequence, aux
 * its pc and ident its ep[-2] (a method's frame: its method entry, which
 * names its class); a C function's frame has code and ident its method
 * entry, aux 0 and this flag. TP_FF_ENTRY marks the first frame of a call of the
 * VM from C (the VM_FRAME_FLAG_FINISH frame): the frames of one native
 * eval-loop call end there, as 3.11+ Python's end at an entry frame. */
#define TP_FF_RB_CFUNC (1u << 8)
/* The frame that stands, innermost, for the garbage collector, in a
 * sample of the thread that holds the GVL while the GC runs: no code, and
 * named "[GC]". */
#define TP_FF_RB_GC (1u << 9)

/* Ruby's programs, by their slot in the BPF tail-call table. */
enum tp_rb_walker {
	TP_WALK_RB_FRAMES = TP_WALK_SLOT(TP_RT_RUBY, 0), /* the control frames */
};

/* The programs the loader puts in those slots, by name:
 *   X(SLOT, PROGRAM, ITS BPF_LOOP BUILD or NULL) */
#define TP_RB_WALKERS(X) X(TP_WALK_RB_FRAMES, "walk_rb_frames", "walk_rb_frames_loop")

/* Every place a Ruby walk can stop short that only Ruby has, in Ruby's
 * range of ids: X(ID, MARKER, KEY, DESCRIPTION). */
#define TP_RB_ERRORS(X)                                                                            \
	X(RB_TLS, "[thread pointer unreadable]", "rb_tls",                                         \
	  "the Ruby library's TLS module id, the thread's vector of TLS blocks or its block "      \
	  "could not be read, or cannot be right")                                                 \
	X(RB_NO_EC, "[no Ruby thread]", "rb_no_ec",                                                \
	  "the thread has no execution context: not a Ruby thread (the VM's timer), or not yet")   \
	X(RB_EC, "[execution context unreadable]", "rb_ec",                                        \
	  "the execution context's stack bounds or current frame could not be read, or cannot "    \
	  "be right")                                                                              \
	X(RB_THREAD_LIST, "[thread list unreadable]", "rb_thread_list",                            \
	  "the VM's list of ractors or of a ractor's threads could not be read, looped, or "       \
	  "passed its bound")

enum tp_rb_walk_err {
	TP_ERR__RB_FIRST = TP_ERR_BASE(TP_RT_RUBY) - 1,
#define TP_X_ENUM(id, marker, key, desc) TP_ERR_##id,
	TP_RB_ERRORS(TP_X_ENUM)
#undef TP_X_ENUM
	    TP_ERR__RB_END
};

#ifndef __BPF__
_Static_assert(sizeof(struct tp_rb_proc) == 64, "tp_rb_proc layout");
_Static_assert(__builtin_offsetof(struct tp_rb_proc, thread_blocking) == 48, "tp_rb_proc layout");
_Static_assert(__builtin_offsetof(struct tp_rb_proc, tls_libc) == 62, "tp_rb_proc layout");
_Static_assert(sizeof(struct tp_rb_proc) <= sizeof(((struct tp_proc *)0)->data),
	       "Ruby's payload fits in a procs entry");
_Static_assert(TP_WALK_RB_FRAMES < TP_WALK_SLOT(TP_RT_RUBY + 1, 0), "Ruby's slots");
_Static_assert(TP_ERR__RB_END <= TP_ERR_BASE(TP_RT_RUBY + 1), "Ruby's error ids");
#endif

#endif /* TAIPAN_RUBY_ABI_H */
