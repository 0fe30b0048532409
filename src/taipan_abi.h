/* taipan_abi.h - the types that the BPF programs and user space share.
 *
 * The generic contract: no runtime is named here. Each runtime's own part
 * (CPython's: src/cpython/abi.h) has a tag (enum tp_runtime), a payload in
 * the procs entry, a range of tail-call slots and a range of walk-error ids;
 * taipan_runtimes.h lists them all for the code that needs every one.
 *
 * Both sides include these headers, and only these. They use fixed-width
 * types only, hold target addresses as __u64 (never as pointers), and compile
 * on their own in either world. Struct sizes are guarded so that a change on
 * one side that the other does not see fails the build instead of corrupting
 * samples.
 */
#ifndef TAIPAN_ABI_H
#define TAIPAN_ABI_H

#ifdef __BPF__
/* vmlinux.h already defines __u8 … __u64. */
#else
#include <linux/types.h>
#endif

#define TP_COMM_LEN 16
/* Kernel frames per sample: the kernel's own default cap (PERF_MAX_STACK_DEPTH). */
#define TP_KSTACK_MAX 127
/* Native user frames per sample; a power of two (masked in BPF). Deep C++
 * (autograd, a template-heavy library) needs hundreds. */
#define TP_USTACK_MAX 512
/* Anchors (walk/state.h) a sample's walk keeps; a power of two. */
#define TP_ANCHORS_MAX 64
/* Interpreted frames per sample. A power of two so the BPF side can mask indices. */
#define TP_MAX_FRAMES 2048
/* Frames walked by one BPF program before it tail-calls the next. */
#define TP_FRAMES_PER_PROG 64
/* Tail calls one BPF program chain may take: the kernel's MAX_TAIL_CALL_CNT
 * (33 on every kernel taipan runs on). The walkers run at most this many
 * times, so a walk visits at most TP_WALK_STEPS frames, shims included. The
 * user-space walker keeps the same budget, so both cut a stack alike. */
#define TP_MAX_TAIL_CALLS 33
#define TP_WALK_STEPS (TP_FRAMES_PER_PROG * TP_MAX_TAIL_CALLS)
/* Map sizes. */
#define TP_MAX_PROCS 32768  /* procs: processes of a runtime and known others (LRU) */
#define TP_MAX_TARGETS 8192 /* targets, unknown_samples and announced */
/* The ring buffer's smallest size; user space sizes it by CPUs and rate
 * (bpfrun_ring_bytes()), up to TP_RING_MAX_BYTES. */
#define TP_RING_BYTES (8 << 20)
#define TP_RING_MAX_BYTES (256u << 20)
/* Samples are written without waking the reader, which polls on a timer,
 * until this many bytes wait in the ring. */
#define TP_RING_WAKEUP (512 << 10)
/* How often an unclassified process is announced to user space, at most. */
#define TP_ANNOUNCE_NS 1000000000ULL

/* The runtimes whose stacks BPF walks: a process's procs entry and each of
 * its samples say which. TP_RT_NONE: a process of none (its kernel stack
 * only), and the generic ranges of slots and error ids below. */
enum tp_runtime {
	TP_RT_NONE = 0,
	TP_RT_CPYTHON = 1, /* src/cpython/abi.h */
	TP_RT_RUBY = 2,	   /* src/ruby/abi.h */
	TP_RT__COUNT
};

/* A frame is read whole, up to this many bytes (every runtime's frame span
 * must fit). A power of two: offsets into it are masked. */
#define TP_FRAME_BUF 512
/* The walkers' window on user memory (walk/state.h): up to a page below a
 * frame plus the frame, read at once; lengths masked to TP_WIN_MASK. */
#define TP_WIN_PAGE 4096
#define TP_WIN_MASK 8191

/* The programs of the BPF tail-call table (map progs), by slot: each
 * runtime has a range of TP_WALK_SLOTS slots, the generic ones first
 * (range TP_RT_NONE). A runtime's ABI names its own. */
#define TP_WALK_SLOTS 8
#define TP_WALK_SLOT(rt, i) ((rt)*TP_WALK_SLOTS + (i))
#define TP_NWALKERS (TP_RT__COUNT * TP_WALK_SLOTS)
enum tp_walker {
	TP_WALK_NATIVE = TP_WALK_SLOT(TP_RT_NONE, 0), /* the native unwinder (walk/native.h) */
};

/* procs map value, keyed by tgid: a process of a runtime, or (TP_RT_NONE) a
 * known process of none, whose samples cost one lookup. Written by user
 * space after discovery. */
#define TP_PROC_DATA 72
struct tp_proc {
	__u8 runtime; /* enum tp_runtime */
	__u8 pad[7];
	/* The runtime's own: where its state is, its offsets and flags
	 * (CPython's: src/cpython/abi.h). Sized for the largest. */
	__u64 data[TP_PROC_DATA / 8];
};

/* Per-frame flags. */
enum tp_frame_flags {
	TP_FF_ENTRY = 1 << 0, /* first frame of a C-level eval loop call (3.11 is_entry, or under a
				 skipped shim) */
};

/* One interpreted frame as BPF saw it. Symbols and lines are resolved in user space
 * (doc/design/naming.md, decision 6): this is cheap, fixed-size, and version-neutral. */
struct tp_frame {
	__u64 code;  /* the code object's address */
	__u64 aux;   /* the runtime's (CPython: TP_LF_SELF_CLASS: the class of the first
		      * local; TP_LF_TLBC: the instruction pointer, which may lie in a copy
		      * of the bytecode, see current_line() in cpython/symbolize.c); else 0 */
	__u64 ident; /* the identity of the code object as this sample saw it (CPython:
		      * tp_code_ident()), 0 if unread. A freed code object's address is
		      * soon reused by another, often with its name string reused in
		      * step; this tells user space that its cached names belong to the
		      * old one, or that the object it reads now is not the one that ran. */
	__u32 pos;   /* where in the code (CPython: f_lasti as stored, or the instruction
		      * pointer - code for TP_LF_LASTI_PTR) */
	__u32 flags; /* enum tp_frame_flags */
};

/* Every place a walk can stop short, one row each: the id, the marker
 * frame the profile shows at the root of such a stack, a short key (for
 * --stats, `dump --json` and the agent's /stats), and what it means. The
 * enum, the per-CPU counters and every table of names are generated from
 * these lists, so a new site cannot be left out of any of them. This one
 * holds the generic sites, in range TP_RT_NONE; each runtime's ABI holds
 * its own, in its range (TP_ERR_BASE).
 *   X(ID, MARKER, KEY, DESCRIPTION) */
#define TP_WALK_ERRORS(X)                                                                          \
	X(NONE, "", "ok", "the walk reached the bottom of the stack")                              \
	X(FSBASE, "[no thread pointer]", "no_fsbase",                                              \
	  "the task has no fs base, so its thread state cannot be matched")                        \
	X(EXITING, "[thread exiting]", "exiting",                                                  \
	  "the thread was sampled on its way out (exit): its Python state is gone")                \
	X(FRAME, "[frame unreadable]", "frame", "a frame could not be read: the stack is partial") \
	X(FRAME_LOOP, "[broken frame chain]", "frame_loop",                                        \
	  "the frame chain loops, or a caller link leads to something that is not a frame: a "     \
	  "stale link (3.12, sampled mid-call) or corruption")                                     \
	X(DEPTH, "[truncated]", "depth", "more Python frames than a stack holds (TP_MAX_FRAMES)")  \
	X(STEPS, "[truncated]", "steps",                                                           \
	  "the walk used all its steps (BPF tail calls) before the stack ended")                   \
	X(NO_WALKER, "[walker missing]", "no_walker",                                              \
	  "the frame walker program was not in the tail-call table: a bug in taipan")

/* Walk-error ids: TP_ERR_RANGE of them a runtime, the generic ones first
 * (range TP_RT_NONE), then each runtime's from TP_ERR_BASE(its tag). Ids
 * between two ranges' rows name nothing. */
#define TP_ERR_RANGE 32
#define TP_ERR_BASE(rt) ((rt)*TP_ERR_RANGE)
enum tp_walk_err {
#define TP_X_ENUM(id, marker, key, desc) TP_ERR_##id,
	TP_WALK_ERRORS(TP_X_ENUM)
#undef TP_X_ENUM
	    TP_ERR__GENERIC_END,
	TP_ERR__COUNT = TP_ERR_BASE(TP_RT__COUNT)
};

enum tp_event_kind {
	TP_EV_SAMPLE = 1,
	TP_EV_DISCOVER = 2,  /* a sampled tgid that user space has not classified */
	TP_EV_EXEC = 3,	     /* a tracked process called exec: forget what we knew */
	TP_EV_EXIT = 4,	     /* a tracked process exited */
	TP_EV_FORK = 5,	     /* a tracked process forked one that BPF gave its layout */
	TP_EV_UNMAPPED = 6,  /* a tracked process ran code in a mapping BPF does not know:
				read its maps again (tid: the thread, ppid: 0) */
	TP_EV_CODE = 7,	     /* BPF's first look at a code object, in its runtime's form
				(CPython: struct tp_code_ev) */
	TP_EV_SWITCH_IN = 8, /* struct tp_switch_ev: a thread whose stack left at switch-out runs
				again (--mode wall, off-cpu) */
};

/* Sample flags. */
enum tp_sample_flags {
	TP_SF_WALKED = 1 << 0,	  /* a runtime's walk was attempted */
	TP_SF_TRUNCATED = 1 << 1, /* frames were dropped at TP_MAX_FRAMES */
	TP_SF_NATIVE = 1 << 2,	  /* native unwinding was attempted: ustack and uerr hold it */
	TP_SF_TOP_SHIM = 1 << 3,  /* the innermost frame was a shim (3.12+): the innermost eval
				     loop runs no frame yet, or none any more */
	TP_SF_OFFCPU = 1 << 4,	  /* taken as the thread left the CPU (sched_switch): it weighs the
				     time until its TP_EV_SWITCH_IN, and state says why it left */
	TP_SF_ANCHORED = 1 << 5,  /* anchored[] says which native frames are the runtime's
				     eval-loop calls (walk/state.h, struct tpw_anchors) */
};

/* Why a thread was not running (struct tp_sample.state). */
enum tp_thread_state {
	TP_TS_RUNNING = 0,  /* on the CPU: a cpu-clock sample */
	TP_TS_RUNNABLE = 1, /* preempted: waiting for a CPU */
	TP_TS_SLEEPING = 2, /* an interruptible sleep: a socket, a pipe, a lock, sleep() */
	TP_TS_BLOCKED = 3,  /* an uninterruptible sleep: the disk, mostly */
	TP_TS__COUNT
};

/* What BPF saw of a tracked process before user space recognised it (map
 * unknown_samples): lost for its stacks, but not for its time, which the
 * profile holds under a marker. */
struct tp_unknown {
	__u64 samples;		       /* cpu-clock samples */
	__u64 off_ns[TP_TS__COUNT];    /* --mode wall, off-cpu: its threads' time off the CPU, */
	__u64 stretches[TP_TS__COUNT]; /* ... in so many stretches, by why they left */
};

/* What a sampled thread had of its interpreter's lock, CPython's GIL
 * (struct tp_sample.gil). */
enum tp_gil_state {
	TP_GIL_UNKNOWN = 0,  /* no lock to read (CPython 2.7, 3.6, a free-threaded build), or no
				thread state */
	TP_GIL_HELD = 1,     /* locked, and this thread was the last to take it */
	TP_GIL_RELEASED = 2, /* not this thread's: released, or (user space tells) waited for */
	TP_GIL_WAITING = 3,  /* not this thread's, and the walker saw it wait for it (Ruby: a
				runnable thread outside a blocking region) */
};

/* Small events: discover, exec, exit, fork. */
struct tp_event {
	__u32 kind; /* enum tp_event_kind */
	__u32 pid;  /* tgid (TP_EV_FORK: the child's) */
	__u32 tid;
	__u32 ppid; /* TP_EV_FORK: the parent's tgid; else 0 */
	__u64 time_ns;
};

/* A thread that left the CPU at out_ns (its TP_SF_OFFCPU sample carries that
 * time) runs again at in_ns. */
struct tp_switch_ev {
	__u32 kind; /* TP_EV_SWITCH_IN */
	__u32 pid;  /* tgid */
	__u32 tid;
	__u32 flags; /* enum tp_switch_flags */
	__u64 out_ns, in_ns;
};

/* What the off-CPU program keeps of a thread, in its task storage (map
 * switch_tasks). User space writes one for a thread found asleep when a
 * wall recording starts (struct tp_thread_snap), which BPF never saw leave
 * the CPU: its return is then told as any other's. */
enum tp_switch_target {
	TP_SWT_NONE = 0,    /* not a target: nothing to do until the next look */
	TP_SWT_RUNTIME = 1, /* a recognised process of a runtime: its stack is taken */
	TP_SWT_EARLY = 2, /* tracked, not recognised yet: its time away is kept, without a stack */
};

struct tp_switch_task {
	__u64 away_ns;		      /* when it left the CPU; 0: not away */
	__u64 ran_ns;		      /* then: its CPU time (se.sum_exec_runtime) */
	__u64 checked;		      /* jiffies of the last look in procs */
	__u32 target;		      /* what that look found (enum tp_switch_target) */
	__u32 early;		      /* away_ns is of a process not recognised then, which
				       * sent no stack: why it left, plus one */
	__u64 early_ns[TP_TS__COUNT]; /* such time away by why (enum tp_thread_state), not
				       * yet added to its tp_unknown */
	__u32 early_n[TP_TS__COUNT];  /* ... in so many stretches */
};

/* A thread of one process as the snap_threads iterator finds it: how BPF
 * sees a thread that is not running, for the threads already asleep when a
 * wall recording starts (doc/design/off-cpu.md). */
struct tp_thread_snap {
	__u32 tid;
	__u32 state;	  /* task->__state: 0 runnable or running, else why it sleeps */
	__u32 on_cpu;	  /* still on a CPU (on its way out) */
	__u32 nkstack;	  /* frames in kstack */
	__u64 ran_ns;	  /* its CPU time so far (se.sum_exec_runtime) */
	__u64 ip, sp, bp; /* its user registers, as it entered the kernel */
	__u64 fsbase;	  /* its thread pointer: how its interpreter's thread state is found */
	char comm[TP_COMM_LEN];
	__u64 kstack[TP_KSTACK_MAX]; /* innermost first, from __schedule */
};

enum tp_switch_flags {
	/* No sched_switch named the thread as it ran again (this kernel
	 * skips one now and then): at its next switch-out, in_ns is that
	 * time less the CPU time it ran since it left, which is when it came
	 * back if it ran once in between. */
	TP_SWF_RECOVERED = 1 << 0,
};

/* Code objects a sample describes at most (TP_EV_CODE events, sent ahead of
 * it: BPF's first look at each, doc/design/naming.md "Code objects"); the
 * rest wait for a later sample. */
#define TP_DESCRIBE_MAX 32

/* A sample, as the walk builds it. On the wire (the ring buffer) it is
 * packed: the header (TP_SAMPLE_HDR bytes), then only the used entries of
 * each array, in this order: kstack[nkstack]; anchored[] and exact[],
 * TP_UWORDS(nustack) words each; ustack[nustack]; frames[nframes]
 * (tp_sample_wire_bytes()). A deep native stack costs its bytes only in the
 * samples that have one. */
struct tp_sample {
	__u32 kind; /* TP_EV_SAMPLE */
	__u32 pid;  /* tgid, in the root pid namespace */
	__u32 tid;
	__u32 cpu;
	__u64 time_ns;
	__u64 tstate;		/* the interpreter's thread state, 0 if none */
	__u16 nframes;		/* interpreted frames in frames[], innermost first */
	__u16 nkstack;		/* kernel frames in kstack[], innermost first */
	__u16 err;		/* enum tp_walk_err */
	__u16 flags;		/* enum tp_sample_flags */
	__u32 walk_calls;	/* tail calls the walk took (for diagnosis) */
	__u16 nustack;		/* native frames in ustack[], innermost first (TP_SF_NATIVE) */
	__u16 uerr;		/* enum tp_native_err (TP_SF_NATIVE) */
	char comm[TP_COMM_LEN]; /* thread name */
	__u8 state;		/* enum tp_thread_state */
	__u8 gil;		/* enum tp_gil_state */
	__u8 runtime;		/* enum tp_runtime: whose walk, whose frames */
	__u8 pad2;
	/* CPython: frames[task_idx] is the outermost frame a generator owns:
	 * where asyncio runs a task, its coroutine's (record --async). On
	 * 3.11+ task_frame is that frame's address, before its generator's
	 * (f_gen, 3.6-3.10); 0: none. */
	__u16 task_idx;
	__u16 pad3;
	__u64 task_frame;
	/* The arrays, each packed on the wire. */
	__u64 kstack[TP_KSTACK_MAX];
	/* TP_SF_ANCHORED: bit i set when native frame i holds on its stack
	 * one of the anchors the runtime's walk passed: it is an eval-loop
	 * call, whatever its name, or if it has none (a stripped build's
	 * _PyEval_EvalFrameDefault.cold). */
	__u64 anchored[TP_USTACK_MAX / 64];
	/* TP_SF_NATIVE: bit i set when ustack[i] is where a signal found the
	 * thread, or the kernel's signal frame, and not a return address (the
	 * sampled ustack[0] always is): named as is, not as its call. */
	__u64 exact[TP_USTACK_MAX / 64];
	/* Instruction pointers: the sampled one, then each return address. */
	__u64 ustack[TP_USTACK_MAX];
	struct tp_frame frames[TP_MAX_FRAMES];
};

/* The header of a packed sample, and the words of a bit mask over n native
 * frames. */
#define TP_SAMPLE_HDR __builtin_offsetof(struct tp_sample, kstack)
#define TP_UWORDS(n) (((__u32)(n) + 63) / 64)

/* The bytes of s packed (its counts within their arrays' sizes). */
static inline __u64 tp_sample_wire_bytes(const struct tp_sample *s)
{
	return TP_SAMPLE_HDR + (__u64)s->nkstack * 8 + (__u64)TP_UWORDS(s->nustack) * 16 +
	       (__u64)s->nustack * 8 + (__u64)s->nframes * sizeof(struct tp_frame);
}

/* The anchors of a walk: addresses on the native stack that the runtime's
 * walk passed, innermost first (CPython 3.12+: each eval-loop call's entry
 * frame, a local variable of that call). The native walk (walk/native.h)
 * marks the frame whose stack holds each (struct tp_sample.anchored), so
 * that merging knows the eval-loop calls by where their data lies, not by
 * their names, which a stripped interpreter lacks for the pieces the
 * compiler made of its eval loop. Part of the walk state (walk/state.h). */
struct tpw_anchors {
	__u64 addr[2 * TP_ANCHORS_MAX]; /* the upper half takes the writes past the limit */
	__u32 n;			/* anchors in addr[], at most TP_ANCHORS_MAX */
	__u32 next;			/* the first that no native frame has held yet */
	__u32 full;			/* 1 when some did not fit */
	__u32 pad;
};

/* Native unwinding (doc/design/native-stacks.md). User space turns each
 * mapped file's call-frame information (.eh_frame, .debug_frame) into rows;
 * BPF follows them from the sampled thread's user registers. x86-64 only: the
 * return address is always at CFA - 8 there, so a row does not hold it. */

/* Rows are found through a page index: a table's first TP_UPAGE_SHIFT-sized
 * page of code starts at its base, and index entry i holds the first row
 * that starts in page i (struct tp_ufile). */
#define TP_UPAGE_SHIFT 12

/* How a row finds the canonical frame address (CFA: the caller's stack
 * pointer before the call). */
enum tp_cfa_kind {
	TP_CFA_INVALID = 0,  /* CFI this unwinder cannot follow: stop, marked */
	TP_CFA_SP = 1,	     /* CFA = sp + cfa_off */
	TP_CFA_FP = 2,	     /* CFA = fp + cfa_off */
	TP_CFA_PLT = 3,	     /* a PLT stub: sp + cfa_off, + 8 when (ip & 15) >= 11 */
	TP_CFA_END = 4,	     /* the outermost frame: the return address is undefined */
	TP_CFA_NOCFI = 5,    /* no CFI covers it: follow the frame pointer */
	TP_CFA_SIGNAL = 6,   /* a signal frame (CIE augmentation 'S': the C library's
				__restore_rt): sp points at the ucontext the kernel saved, and
				the interrupted thread's registers are in its mcontext */
	TP_CFA_FP_DEREF = 7, /* CFA = *(fp + cfa_off): GCC's realigned stacks keep the CFA
				there, from the register (DRAP) that held it in the prologue */
	TP_CFA_R10 = 8,	     /* CFA = r10 + cfa_off: inside a realigning prologue or
				epilogue; only where r10 is known (below) */
	TP_CFA_R11 = 9,	     /* CFA = r11 + cfa_off: a stack-clash probe loop
				(-fstack-clash-protection) */
	TP_CFA_R13 = 10,     /* CFA = r13 + cfa_off: GCC's DRAP when r10 is taken */
};
/* r10, r11 and r13 are known only in a frame whose registers are all
 * known: the sampled one, and one a signal interrupted. The code that keeps
 * the CFA in them (a prologue, an epilogue, a probe loop) calls nothing, so
 * no caller's row needs them. */

/* Where the interrupted registers lie from a TP_CFA_SIGNAL frame's sp (x86-64
 * Linux: struct ucontext's uc_mcontext.gregs[], after uc_flags, uc_link and
 * uc_stack): REG_R10, REG_R11, REG_R13, REG_RBP, REG_RSP, REG_RIP. */
#define TP_UC_R10 (40 + 2 * 8)
#define TP_UC_R11 (40 + 3 * 8)
#define TP_UC_R13 (40 + 5 * 8)
#define TP_UC_RBP (40 + 10 * 8)
#define TP_UC_RSP (40 + 15 * 8)
#define TP_UC_RIP (40 + 16 * 8)

/* Where the caller's frame pointer (rbp) is. */
enum tp_fp_rule {
	TP_FP_SAME = 0,	 /* unchanged in this frame */
	TP_FP_AT = 1,	 /* saved at CFA + fp_off */
	TP_FP_AT_FP = 2, /* saved at fp + fp_off (DW_CFA_expression rbp: DW_OP_breg6 N, as
			    GCC's realigning prologue describes its push of rbp) */
};

/* One row of an unwind table: from pc up to the next row's pc. User space
 * builds these (proc/unwtab.c); BPF gets them packed (struct tp_ufile). */
struct tp_urow {
	__u32 pc;      /* link-time virtual address (files above 4 GiB are refused) */
	__s32 cfa_off; /* enum tp_cfa_kind says from what */
	__s16 fp_off;  /* TP_FP_AT: offset from the CFA */
	__u8 cfa;      /* enum tp_cfa_kind */
	__u8 fp;       /* enum tp_fp_rule */
};

/* A row without its pc: how to find the CFA and the caller's rbp. Few
 * differ (about 2,000 in all of libtorch_cpu's 1.4 million rows), so every
 * table shares one array of them (urules), each held once, and a row
 * names its rule by index. */
struct tp_urule {
	__s32 cfa_off;
	__s16 fp_off;
	__u8 cfa;
	__u8 fp;
};

/* A packed row is one 32-bit word: its pc's offset in its page of code
 * (TP_UPAGE_SHIFT bits) above its rule's index (TP_URULE_BITS bits). The
 * rules array holds TP_MAX_URULES (2 MiB); past that, a file's table is
 * not built and its code is followed by frame pointer. */
#define TP_URULE_BITS 20
#define TP_URULE_MASK ((1u << TP_URULE_BITS) - 1)
#define TP_MAX_URULES (1u << 18)

/* Files with an unwind table in BPF at once, and the address ranges of
 * every tracked process that lead to them. */
#define TP_MAX_UFILES 4096
#define TP_MAX_URANGES (1 << 18)
/* Native frames unwound by one BPF program before it tail-calls the next:
 * unrolled (kernels before 5.17), or through bpf_loop, whose body the
 * verifier checks once. The native walk shares the chain's
 * TP_MAX_TAIL_CALLS with the runtime's walk, which takes one per
 * TP_FRAMES_PER_PROG interpreted frames: with bpf_loop, TP_USTACK_MAX
 * native frames take 4 tail calls; unrolled, 16 frames each, the native
 * stack gets what the runtime's walk left (about 30 programs, 480 frames,
 * under a Python stack of 64 frames or fewer). A row is found in at most
 * TP_USEARCH steps within its page. */
#define TP_UFRAMES_PER_PROG 16
#define TP_UFRAMES_PER_LOOP 128
#define TP_USEARCH 13

/* A file's unwind table as BPF holds it: an array of 64-bit elements (an
 * array map's elements take 8 bytes each, whatever their size). The first
 * npages are the page index: element i holds, in its low half, the index
 * among the rows of the first row whose pc lies at or after
 * base + (i << TP_UPAGE_SHIFT), and in its high half that of page i + 1
 * (nrows after the last page), so that one read bounds a page's rows. The
 * nrows packed rows follow, sorted by pc, two to an element (row j in the
 * low half of element npages + j / 2 when j is even). The row that covers
 * an address is the last of its page's rows at or before it, or, when
 * there is none, the row before the page's first. */
struct tp_ufile {
	__u32 base;
	__u32 npages;
	__u32 nrows;
	__u32 pad;
};

/* The umaps LPM trie's key: a tracked process's address range, as a prefix
 * of (tgid, big-endian address). prefixlen counts bits from tgid's first. */
struct tp_umap_key {
	__u32 prefixlen;
	__u32 tgid;
	__u64 addr_be;
};

enum tp_umap_flags {
	TP_UM_FP = 1 << 0, /* no unwind table (anonymous or JIT code, or a table that failed):
			      follow the frame pointer */
};

/* What an executable mapping of a process is: runtime address - bias is the
 * file's link-time virtual address, whose rows are in table file. */
struct tp_umap {
	__u64 bias;
	__u32 file;	  /* slot in ufiles and ufile_info; 0 with TP_UM_FP */
	__u32 flags;	  /* enum tp_umap_flags */
	__u64 start, end; /* the mapping: a walk looks it up once for all its frames in it */
};

/* Every place native unwinding can stop short, as TP_WALK_ERRORS is for the
 * interpreted walk: X(ID, MARKER, KEY, DESCRIPTION). The marker goes at the root
 * of the native part. */
#define TP_NATIVE_ERRORS(X)                                                                        \
	X(NONE, "", "ok", "the native stack was unwound to the thread's root")                     \
	X(REGS, "[native: no user registers]", "regs",                                             \
	  "the user registers of the sampled thread could not be read")                            \
	X(UNMAPPED, "[native: unknown code]", "unmapped",                                          \
	  "an address outside every mapping taipan has read: code it had not read yet (mapped "    \
	  "since, by dlopen or a JIT, or left for the next turn), which it reads, or a return "    \
	  "address into no mapping; the profile's marker says which")                              \
	X(TABLE, "[native: no unwind table]", "table",                                             \
	  "the mapping's unwind table could not be read from the BPF maps")                        \
	X(CFI, "[native: unsupported CFI]", "cfi",                                                 \
	  "the call-frame information at the address uses a rule the unwinder does not follow")    \
	X(READ, "[native: stack unreadable]", "read",                                              \
	  "a return address or a saved frame pointer could not be read from the stack")            \
	X(BAD_STEP, "[native: bad step]", "bad_step",                                              \
	  "an unwinding step did not move up the stack: a wrong rule or a corrupt stack")          \
	X(DEPTH, "[native: truncated]", "depth", "more native frames than a sample holds")         \
	X(STEPS, "[native: truncated]", "steps",                                                   \
	  "the BPF tail-call budget ran out before the native stack did")                          \
	X(NOFP, "[native: no CFI, no frame pointer]", "no_frame_pointer",                          \
	  "code without call-frame information (assembly, JIT code) whose frame pointer leads "    \
	  "nowhere; the profile's marker names its module")

enum tp_native_err {
#define TP_X_ENUM(id, marker, key, desc) TP_UERR_##id,
	TP_NATIVE_ERRORS(TP_X_ENUM)
#undef TP_X_ENUM
	    TP_UERR__COUNT
};

/* Kernel addresses that user space wants named: it fills addr[0 .. n) and
 * runs the ksym_names program (BPF_PROG_TEST_RUN), which writes each one's
 * "%ps" (symbol, then " [module]" for a module's) into name[]: the kernel's
 * own lookup, for the addresses seen, instead of reading and parsing all of
 * /proc/kallsyms. One copy, in the BPF object's global data, shared through
 * its mmap. */
#define TP_KSYM_BATCH 128
#define TP_KSYM_LEN 128
struct tp_ksym_req {
	__u32 n;
	__u32 pad;
	__u64 addr[TP_KSYM_BATCH];
	char name[TP_KSYM_BATCH][TP_KSYM_LEN];
};
_Static_assert(TP_KSYM_BATCH > TP_KSTACK_MAX, "a sample's kernel stack is named in one run");

/* Per-CPU counters, read by --stats. */
enum tp_stat {
	TP_STAT_SAMPLES = 0,	      /* perf samples in tracked processes */
	TP_STAT_SENT,		      /* samples written to the ring */
	TP_STAT_UNKNOWN_PROC,	      /* samples of a tgid not yet classified */
	TP_STAT_DISCOVER_SENT,	      /* discover events written */
	TP_STAT_NO_RUNTIME,	      /* samples of known processes of no runtime (TP_RT_NONE) */
	TP_STAT_TSTATE_CACHED,	      /* a thread state found through the per-thread cache */
	TP_STAT_TSTATE_WALKED,	      /* a thread state found by walking the thread list */
	TP_STAT_RING_FULL,	      /* events dropped: ring buffer full */
	TP_STAT_NATIVE_UNMAPPED_SENT, /* unmapped events written */
	TP_STAT_CODES_DESCRIBED,      /* code objects described (TP_EV_CODE) */
	TP_STAT_CODES_UNDESCRIBED,    /* ... left for a later sample: TP_DESCRIBE_MAX reached */
	TP_STAT_SWITCH_OUT,	      /* off-CPU samples taken at sched_switch */
	TP_STAT_SWITCH_IN,	      /* ... whose thread ran again (TP_EV_SWITCH_IN sent) */
	TP_STAT_SWITCH_IN_MISSED,     /* ... whose return the tracepoint did not report, told at
					 its next switch-out (TP_SWF_RECOVERED) */
	TP_STAT_ERR_BASE,	      /* + a walk-error id (enum tp_walk_err and the runtimes') */
	TP_STAT_UERR_BASE = TP_STAT_ERR_BASE + TP_ERR__COUNT, /* + enum tp_native_err */
	TP_STAT__COUNT = TP_STAT_UERR_BASE + TP_UERR__COUNT
};

#define TP_OFFCPU_EMPTY 2

/* Settings that user space writes into .rodata before load. */
struct tp_config {
	__u32 system_wide;     /* sample every process; else only tgids in the targets map */
	__u32 kernel_stacks;   /* collect kernel stacks */
	__u32 follow_children; /* tgids forked by a target become targets */
	__u32 self_tgid;       /* never sample taipan itself */
	__u32 native;	       /* unwind native stacks */
	__u32 offcpu;	       /* take a stack as a target thread leaves the CPU (sched_switch); or
				* TP_OFFCPU_EMPTY: attach, and do nothing (a benchmark's floor) */
	__u32 drop_in;	       /* tests: ignore one switch-in in drop_in at random, as this kernel
				* sometimes does not report one (TAIPAN_TEST_DROP_SWITCH_IN) */
	__u32 empty_sample;    /* benchmarks: the perf_event program returns at once, the floor
				* of what sampling costs (TAIPAN_BENCH_EMPTY_SAMPLE) */
};

#ifndef __BPF__
_Static_assert(sizeof(struct tp_frame) == 32, "tp_frame layout");
_Static_assert(sizeof(struct tp_proc) == 80, "tp_proc layout");
_Static_assert((TP_DESCRIBE_MAX & (TP_DESCRIBE_MAX - 1)) == 0, "TP_DESCRIBE_MAX is masked");
_Static_assert(sizeof(struct tp_event) == 24, "tp_event layout");
_Static_assert(sizeof(struct tp_switch_ev) == 32, "tp_switch_ev layout");
_Static_assert(sizeof(struct tp_switch_task) == 80, "tp_switch_task layout");
_Static_assert(sizeof(struct tp_thread_snap) == 72 + 8 * TP_KSTACK_MAX, "tp_thread_snap layout");
_Static_assert(sizeof(struct tp_urow) == 12, "tp_urow layout");
_Static_assert(sizeof(struct tp_urule) == 8, "tp_urule layout");
_Static_assert(TP_UPAGE_SHIFT + TP_URULE_BITS == 32, "a packed row is one word");
_Static_assert(TP_MAX_URULES <= TP_URULE_MASK + 1, "rule indexes fit a packed row");
_Static_assert(TP_SAMPLE_HDR == 80, "tp_sample header");
_Static_assert(sizeof(struct tp_sample) == TP_SAMPLE_HDR + 8 * TP_KSTACK_MAX +
					       16 * TP_UWORDS(TP_USTACK_MAX) + 8 * TP_USTACK_MAX +
					       32 * TP_MAX_FRAMES,
	       "tp_sample: no padding between the arrays, as the packing assumes");
_Static_assert(__builtin_offsetof(struct tp_sample, frames) % 8 == 0, "tp_sample frames alignment");
_Static_assert(TP_MAX_FRAMES <= TP_WALK_STEPS, "the tail-call budget cannot reach TP_MAX_FRAMES");
_Static_assert((TP_MAX_FRAMES & (TP_MAX_FRAMES - 1)) == 0, "TP_MAX_FRAMES is masked");
_Static_assert(TP_ERR__COUNT < 65536, "tp_sample.err is a __u16");
_Static_assert(TP_ERR__GENERIC_END <= TP_ERR_BASE(TP_RT_NONE + 1), "the generic error ids");
_Static_assert(TP_WALK_NATIVE < TP_WALK_SLOT(TP_RT_NONE + 1, 0), "the generic slots");
_Static_assert(sizeof(struct tp_umap_key) == 16 && sizeof(struct tp_umap) == 32, "umaps layout");
#endif

#endif /* TAIPAN_ABI_H */
