/* abi.h - what CPython's BPF walker and user space share: the generic ABI
 * (taipan_abi.h) carries it in its runtime payloads, ranges and slots.
 *
 * The same rules as the generic header: fixed-width types only, target
 * addresses as __u64, compiles on its own in either world, sizes guarded.
 * Only the CPython wing, its BPF unit and the lists of every runtime
 * (taipan_runtimes.h) include it.
 */
#ifndef TAIPAN_CPYTHON_ABI_H
#define TAIPAN_CPYTHON_ABI_H

#include "taipan_abi.h"

/* The per-CPU cache of code-object identities (struct tp_frame.ident), a
 * power of two: deep stacks repeat the same code objects, and an entry serves
 * the sample that filled it only (cpython/walk.h). TP_ICACHE_NS: how long the
 * per-CPU type cache trusts an entry. */
#define TP_ICACHE 256
#define TP_SCACHE 16	 /* per-CPU str -> is "self" or "cls" cache entries */
#define TP_CODE_SPAN 128 /* most bytes of a code object read at once */
#define TP_ICACHE_NS 10000000ULL
#define TP_TYCACHE 64	   /* per-CPU type -> is a metatype cache entries */
#define TP_TCACHE 64	   /* per-CPU thread -> PyThreadState cache entries */
#define TP_TSTATE_SPAN 256 /* most bytes of a PyThreadState read at once */

/* Interpreters and threads visited when looking for a thread's PyThreadState:
 * TP_MAX_THREADS_LOOP where the search is a bpf_loop (5.17+; and in user
 * space), whose steps cost only what they visit, so that a process cannot
 * hide work in its 257th thread; TP_MAX_THREADS in the unrolled programs of
 * older kernels, which the verifier checks step by step. A thread past the
 * limit is counted (TP_ERR_THREAD_LIMIT). A found thread state is kept per
 * thread (tstates), so the search is paid once per thread. */
#define TP_MAX_INTERPS 4
#define TP_MAX_THREADS 256
#define TP_MAX_THREADS_LOOP 16384
/* Steps of that search (cpython/walk.h, tpw_search_step): one to start each
 * interpreter's list, one per thread state, one to end each list, one to
 * stop. */
#define TP_FIND_STEPS_FOR(threads) (TP_MAX_INTERPS * ((threads) + 2) + 1)
#define TP_FIND_STEPS TP_FIND_STEPS_FOR(TP_MAX_THREADS)
#define TP_FIND_STEPS_LOOP TP_FIND_STEPS_FOR(TP_MAX_THREADS_LOOP)

#define TP_MAX_TSTATES 65536 /* tstates: thread -> PyThreadState (LRU) */

/* What the frame walker must know about one Python version's memory layout:
 * flags and offsets, never a version number (doc/design/python-stacks.md,
 * decision 1). */
enum tp_layout_flags {
	TP_LF_INTERP_FRAME = 1 << 0, /* frames are _PyInterpreterFrame (3.11+) */
	TP_LF_CFRAME = 1 << 1,	     /* top frame is tstate->cframe->current_frame (3.11, 3.12) */
	TP_LF_OWNER = 1 << 2,	  /* frames carry an owner byte; owner >= 3 is not Python (3.12+) */
	TP_LF_STACKREF = 1 << 3,  /* f_executable is a tagged _PyStackRef: mask & ~3 (3.14+) */
	TP_LF_LASTI_PTR = 1 << 4, /* position is a pointer into the code object (3.11+) */
	TP_LF_IS_ENTRY = 1 << 5,  /* frames carry an is_entry byte (3.11) */
	TP_LF_SELF_CLASS = 1 << 6, /* record the class of the first local (<= 3.10) */
	/* a frame may run a thread-local copy of the bytecode (3.14t+): record
	 * its whole instruction pointer in aux */
	TP_LF_TLBC = 1 << 7,
};

/* Offsets are bytes from the start of the named structure. */
struct tp_py_offsets {
	__u16 interp_next;	    /* PyInterpreterState.next */
	__u16 interp_tstate_head;   /* PyInterpreterState.tstate_head / threads.head */
	__u16 ts_next;		    /* PyThreadState.next */
	__u16 ts_thread_id;	    /* PyThreadState.thread_id (== pthread_self() == fs base) */
	__u16 ts_frame;		    /* PyThreadState.frame / .cframe / .current_frame */
	__u16 cframe_current_frame; /* _PyCFrame.current_frame (TP_LF_CFRAME) */
	__u16 frame_back;	    /* f_back / previous */
	__u16 frame_code;	    /* f_code / f_executable */
	__u16 frame_lasti;	    /* f_lasti (int) / prev_instr / instr_ptr (pointer) */
	/* 3.11+: the owner byte (TP_LF_OWNER). <= 3.10: f_gen, the pointer
	 * to the generator that runs the frame (3.6+; record --async), or 0. */
	__u16 frame_owner;
	__u16 frame_is_entry;	/* is_entry byte (TP_LF_IS_ENTRY) */
	__u16 frame_localsplus; /* f_localsplus (TP_LF_SELF_CLASS) */
	__u16 obj_type;		/* PyObject.ob_type */
	__u16 type_flags;	/* PyTypeObject.tp_flags */
	__u16 frame_span; /* bytes of a frame that hold every field above that the walkers use */
	__u16 code_name;  /* PyCodeObject.co_name: the frame's identity check */
	__u16 name_data;  /* where a str's characters start (sizeof(PyASCIIObject); 2.7: ob_sval) */
	__u16 code_filename;  /* PyCodeObject.co_filename: the identity check too */
	__u16 code_qualname;  /* PyCodeObject.co_qualname (3.11+), 0 if none: described codes */
	__u16 code_linetable; /* co_linetable / co_lnotab: described codes */
	/* co_varnames and PyTupleObject.ob_item (TP_LF_SELF_CLASS), 0 if
	 * unknown: the walker reads a first local's class only where the
	 * first local is called self or cls. */
	__u16 code_varnames;
	__u16 tuple_item;
	__u32 flags; /* enum tp_layout_flags */
};

/* The largest frame_span is 384, in 2.7's and 3.6's PyFrameObject up to
 * f_localsplus[0]: within TP_FRAME_BUF, which pyproc.c checks. */

/* Where a GIL build keeps its GIL (struct _gil_runtime_state), to tell
 * whether a sampled thread holds it: in _PyRuntime at addr (3.7-3.11), or
 * through each interpreter's ceval.gil pointer (3.12+, addr 0). holder 0: not
 * known (2.7, 3.6, free-threaded builds). */
struct tp_gil {
	__u64 addr;	 /* the GIL's address, 0 if per interpreter */
	__u16 ts_interp; /* PyThreadState.interp */
	__u16 interp;	 /* PyInterpreterState.ceval.gil (a pointer) */
	__u16 locked;	 /* _gil_runtime_state.locked (int) */
	__u16 holder;	 /* _gil_runtime_state.last_holder (a PyThreadState pointer) */
};

/* CPython's payload of a procs entry (struct tp_proc.data, runtime
 * TP_RT_CPYTHON), written by user space after discovery. Read in place
 * (tp_py_data()), so its type may alias the entry's bytes. */
struct __attribute__((may_alias)) tp_py_proc {
	__u64 interp_head_addr; /* address of the pointer to the first PyInterpreterState */
	struct tp_py_offsets off;
	struct tp_gil gil;
};

/* The payload of a CPython process's procs entry. */
static inline __attribute__((always_inline)) const struct tp_py_proc *
tp_py_data(const struct tp_proc *p)
{
	return (const struct tp_py_proc *)(const void *)p->data;
}

/* A procs entry for a Python process whose payload is py. */
static inline void tp_py_proc_set(struct tp_proc *p, const struct tp_py_proc *py)
{
	*p = (struct tp_proc){.runtime = TP_RT_CPYTHON};
	__builtin_memcpy(p->data, py, sizeof(*py));
}

/* CPython's programs, by their slot in the BPF tail-call table. */
enum tp_py_walker {
	TP_WALK_FRAME_OBJECTS = TP_WALK_SLOT(TP_RT_CPYTHON, 0), /* <= 3.10: PyFrameObject */
	TP_WALK_INTERP_FRAMES = TP_WALK_SLOT(TP_RT_CPYTHON, 1), /* 3.11+: _PyInterpreterFrame */
	TP_WALK_DESCRIBE =
	    TP_WALK_SLOT(TP_RT_CPYTHON, 2), /* copies new code objects (tp_code_ev) */
};

/* The programs the loader puts in those slots, by name:
 *   X(SLOT, PROGRAM, ITS BPF_LOOP BUILD or NULL) */
#define TP_PY_WALKERS(X)                                                                           \
	X(TP_WALK_FRAME_OBJECTS, "walk_frame_objects", "walk_frame_objects_loop")                  \
	X(TP_WALK_INTERP_FRAMES, "walk_interp_frames", "walk_interp_frames_loop")                  \
	X(TP_WALK_DESCRIBE, "describe_codes", NULL)

/* Every place a Python walk can stop short that only CPython has, in
 * CPython's range of ids (after the generic ones of TP_WALK_ERRORS, whose
 * rows these follow): X(ID, MARKER, KEY, DESCRIPTION). */
#define TP_PY_ERRORS(X)                                                                            \
	X(INTERP_HEAD, "[interpreter unreadable]", "interp_head",                                  \
	  "the pointer to the first interpreter could not be read")                                \
	X(INTERP_THREADS, "[interpreter unreadable]", "interp_threads",                            \
	  "an interpreter's list of thread states could not be read")                              \
	X(INTERP_LIMIT, "[no Python thread state]", "interp_limit",                                \
	  "more interpreters than the walk visits")                                                \
	X(TSTATE_ID, "[thread state unreadable]", "tstate_id",                                     \
	  "a thread state's thread id could not be read")                                          \
	X(TSTATE_NEXT, "[thread state unreadable]", "tstate_next",                                 \
	  "a thread state's link to the next one could not be read")                               \
	X(THREAD_LIMIT, "[no Python thread state]", "thread_limit",                                \
	  "more thread states in one interpreter than the walk visits")                            \
	X(NO_TSTATE, "[no Python thread state]", "no_tstate",                                      \
	  "no thread state belongs to the thread: not a Python thread, or not yet")                \
	X(TSTATE_FRAME, "[thread state unreadable]", "tstate_frame",                               \
	  "the thread state's pointer to its current frame could not be read")                     \
	X(CFRAME, "[thread state unreadable]", "cframe",                                           \
	  "the thread's _PyCFrame (3.11, 3.12) could not be read")

enum tp_py_walk_err {
	TP_ERR__PY_FIRST = TP_ERR_BASE(TP_RT_CPYTHON) - 1,
#define TP_X_ENUM(id, marker, key, desc) TP_ERR_##id,
	TP_PY_ERRORS(TP_X_ENUM)
#undef TP_X_ENUM
	    TP_ERR__PY_END
};

/* What identifies a code object (struct tp_frame.ident), computed alike by
 * BPF at the sample and by user space when it reads the object: the
 * addresses of its co_name and co_filename and the first 8 bytes of the
 * name's characters. Pointers alone do not do: a new code object and its
 * new name string can both land where freed ones were. The file tells
 * apart two "<module>" code objects (one interned name) of two imports,
 * the first freed once its module ran. 0 when the name is unknown. */
static inline __u64 tp_code_ident(__u64 name, __u64 chars, __u64 file)
{
	if (!name)
		return 0;
	__u64 id = name ^ chars ^ ((file << 29) | (file >> 35));
	return id ? id : 1;
}

/* BPF's first look at a code object (doc/design/naming.md, "Code objects"):
 * the first time a process's stack shows a code object (by address and
 * identity), BPF copies the bytes user space needs to name it (the head of
 * the object, its name, qualified name and file name objects, and the start
 * of its line table object), and sends them before the sample, as a
 * TP_EV_CODE event. A code object freed before user space reads it (a
 * module's <module> code, right after its import) is then still named. At
 * most TP_DESCRIBE_MAX a sample; the rest wait for a later sample. */
#define TP_DESCRIBE_PER_PROG 4 /* ... described a program call (tail calls go on) */
#define TP_DCACHE 512	       /* per-CPU cache of code objects described (a power of two) */
#define TP_MAX_DESCRIBED 65536 /* described code objects BPF remembers, all processes (LRU) */
#define TP_CODE_HEAD 256       /* bytes of the code object: every field user space reads */
#define TP_CODE_STR 256	       /* bytes of a str object: header and characters */
#define TP_CODE_LT 1024	       /* bytes of the line table object: header and the table's start */

/* One copied object: its address and how many bytes of it follow (0: none). */
struct tp_code_part {
	__u64 addr;
	__u32 len;
	__u32 pad;
};

enum tp_code_parts {
	TP_CP_HEAD = 0, /* the code object */
	TP_CP_NAME,	/* co_name */
	TP_CP_QUALNAME, /* co_qualname */
	TP_CP_FILE,	/* co_filename */
	TP_CP_LINETABLE,
	TP_CP__COUNT
};

struct tp_code_ev {
	__u32 kind; /* TP_EV_CODE */
	__u32 pid;  /* tgid */
	__u64 code, ident;
	struct tp_code_part part[TP_CP__COUNT];
	__u8 head[TP_CODE_HEAD];
	__u8 name[TP_CODE_STR];
	__u8 qualname[TP_CODE_STR];
	__u8 file[TP_CODE_STR];
	__u8 linetable[TP_CODE_LT];
};

#ifndef __BPF__
_Static_assert(sizeof(struct tp_py_offsets) == 48, "tp_py_offsets layout");
_Static_assert(sizeof(struct tp_py_proc) == 72, "tp_py_proc layout");
_Static_assert(sizeof(struct tp_py_proc) <= sizeof(((struct tp_proc *)0)->data),
	       "CPython's payload fits in a procs entry");
_Static_assert(TP_WALK_DESCRIBE < TP_WALK_SLOT(TP_RT_CPYTHON + 1, 0), "CPython's slots");
_Static_assert(TP_ERR__PY_END <= TP_ERR_BASE(TP_RT_CPYTHON + 1), "CPython's error ids");
_Static_assert((TP_CODE_HEAD & (TP_CODE_HEAD - 1)) == 0, "TP_CODE_HEAD is masked");
_Static_assert(__builtin_offsetof(struct tp_code_ev, head) % 8 == 0, "tp_code_ev layout");
#endif

#endif /* TAIPAN_CPYTHON_ABI_H */
