/* runtime.h - an interpreter taipan reads, as a table of operations.
 *
 * The session, the stacks it builds and the commands name no interpreter:
 * each one taipan knows (src/cpython/ for CPython) fills in a struct
 * runtime_ops, and the session keeps, for each process, the runtime that
 * recognised it and that runtime's data (struct rt_proc, opaque here).
 * Adding a runtime is a wing of its own, its rows in taipan_runtimes.h (from
 * which runtimes.c makes its list), and its BPF walker (doc/DESIGN.md,
 * "Adding a runtime").
 *
 * The shape is the OpenTelemetry profiler's interpreter interface: a
 * loader that recognises a process (detect), the data of a process
 * (struct rt_proc), and what it answers of that process's frames.
 */
#ifndef TAIPAN_RUNTIME_H
#define TAIPAN_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "profile/profile.h"
#include "taipan_abi.h"

struct budget;
struct rt_proc;

/* What every runtime says of a process it recognised: labels and logs. */
struct rt_facts {
	const char *version; /* "3.12.1", "3.13.15t" */
	const char *comm;    /* its command name as the runtime read it */
	uint32_t ns_pid;     /* its pid in its own namespace; 0: the same */
	const char *binary;  /* the file that holds the interpreter, as it sees it */
	const char *how; /* how it was recognised, for -v: "version from ..., offsets from ..." */
};

/* A thread of a process as its runtime lists it, with its interpreted
 * frames as BPF would walk them (dump). */
struct rt_thread {
	uint64_t tstate;	       /* the runtime's thread state */
	uint64_t thread_id;	       /* its pthread_t */
	pid_t tid;		       /* its OS thread id, 0 when not found */
	unsigned int interp;	       /* its interpreter, 0 = the main one */
	int err;		       /* enum tp_walk_err: why its stack is incomplete */
	int lock;		       /* enum tp_gil_state, as its frames were read */
	uint32_t nframes;	       /* interpreted frames in frames[] */
	const struct tp_frame *frames; /* innermost first */
	const uint64_t *frame_addrs;   /* each frame's address (locals), or NULL */
};

/* A variable of an interpreted frame, as dump --locals shows it. */
enum rt_local_kind {
	RT_LOCAL = 0,	   /* an argument or a local */
	RT_LOCAL_CELL = 1, /* a local that an inner function uses (a cell) */
	RT_LOCAL_FREE = 2, /* an outer function's, which this one uses */
};

struct rt_local {
	char name[64];
	char type[48];	 /* its type's name ("int", "list", "Foo") */
	char value[208]; /* its value as repr() writes it ("3", "'abc'"), escaped and safe
			  * to print (util/strutil.h); "" when only its type is shown */
	int64_t len;	 /* a container's length, -1 when it is not one */
	uint64_t addr;	 /* the object's address */
	uint8_t kind;	 /* enum rt_local_kind */
};

/* Every thread of a process (rt_thread), in the runtime's order. */
struct rt_threads {
	struct rt_thread *v;
	size_t n;
	int err;    /* enum tp_walk_err: the thread list itself was cut short */
	void *priv; /* the runtime's */
};

/* A task of the process's event loops (asyncio's), as dump --tasks shows
 * it: its coroutines' frames and the tasks that await it. */
struct rt_task {
	uint64_t addr;
	uint64_t coro; /* its coroutine (--async: whose frame a sample runs) */
	char name[64];
	const char *state; /* "pending", "cancelled", "finished" */
	bool running;	   /* its loop runs it now */
	bool stack_cut;	   /* its chain of coroutines was cut (too long, or unreadable) */
	uint32_t tid;	   /* the OS thread whose loop it belongs to, 0 when not known */
	uint32_t nframes;
	struct tp_frame *frames; /* its coroutines' frames, innermost first */
	uint32_t nawaiters;
	uint64_t *awaiters; /* the tasks that await it (addr), in the runtime's order */
};

/* Every task of a process, in the runtime's order (rt_task). */
struct rt_tasks {
	struct rt_task *v;
	size_t n;
	int err;	  /* 0, or a negative errno: the list is incomplete (-E2BIG: cut) */
	char source[160]; /* where they were found, for -v */
};

/* What the merge of native and interpreted frames needs to know of a
 * native frame of a process (profile/merge.h's enum merge_nkind): by its
 * name (NULL: unnamed), its module, and its address in that module's
 * link-time terms (0: not in a file), for a stripped runtime whose eval
 * loop has no name. */
typedef int (*rt_native_kind_fn)(const struct rt_proc *rp, const char *name, const char *module,
				 uint64_t vaddr);

/* Frame naming's answer for a frame the runtime runs on its own behalf,
 * left out of stacks as BPF leaves out the others (CPython's __init__
 * shim). */
#define RT_FRAME_SKIP 1

struct runtime_ops {
	/* The runtime label ("python"), and its name in messages
	 * ("Python"). */
	const char *name;
	const char *title;
	/* Another label its version is also written under, for readers of
	 * older profiles ("python_version"), or NULL; and the name of its
	 * lock label ("gil"), or NULL when it has no lock. */
	const char *version_label;
	const char *lock_label;
	/* What rt_thread.interp counts, in dump's words ("interpreter":
	 * CPython's subinterpreters; "ractor"). */
	const char *interp_noun;
	/* The marker at the root of a sample of a thread that runs none of
	 * the runtime's frames ("[no Python frame]"). */
	const char *no_frame_marker;
	/* The marker of the runtime's JIT code (Ruby's "[YJIT]"): a native
	 * frame in anonymous executable memory of a process for which
	 * jit_code says so; the native stack past it (towards the root) is not
	 * unwound through such code, and is left out. NULL: none. */
	const char *jit_marker;
	bool (*jit_code)(const struct rt_proc *rp);
	/* The marker of a sample whose native and interpreted stacks do not
	 * pair up ("[native and Python stacks disagree]"). */
	const char *disagree_marker;

	/* A cache of what is learnt from interpreter files, shared by the
	 * processes of one session; NULL when out of memory. */
	void *(*cache_new)(void);
	void (*cache_free)(void *cache);

	/* Whether pid runs this interpreter: 0 with *out; -ENOEXEC: not this
	 * runtime's (nothing of it is mapped); -ENOTSUP: its, but a version or
	 * build it cannot read; -ESRCH: gone; another negative errno. msg
	 * always gets a line naming the pid and what to do. */
	int (*detect)(void *cache, pid_t pid, struct rt_proc **out, char *msg, size_t msglen);
	/* The data of child, a fork of parent's process: the same layout,
	 * without a look at /proc (a short child may be gone). 0 or -ENOMEM. */
	int (*fork)(const struct rt_proc *parent, pid_t child, struct rt_proc **out);
	void (*free)(struct rt_proc *rp);

	/* What BPF gets for the process (its walker, offsets, flags). */
	const struct tp_proc *(*bpf_proc)(const struct rt_proc *rp);
	void (*facts)(const struct rt_proc *rp, struct rt_facts *out);
	/* Charges what is kept of the process to b from now on. */
	void (*set_budget)(struct rt_proc *rp, struct budget *b);

	/* BPF's first look at a code object of the process (the runtime's
	 * event payload, size bytes). 0 or a negative errno. */
	int (*describe)(struct rt_proc *rp, const void *ev, size_t size);
	/* Names an interpreted frame: 0 with *out, RT_FRAME_SKIP, -ESTALE
	 * (the code the sample ran was freed since: out is a marker), or
	 * another negative errno (out is the "[unknown]" marker). The strings
	 * of out live as long as rp. */
	int (*frame)(struct rt_proc *rp, const struct tp_frame *f, struct prof_frame *out);
	/* The name the program gave thread tid (whose thread state BPF read
	 * at tstate), or NULL: then its OS name. now_ns: CLOCK_MONOTONIC. */
	const char *(*thread_name)(struct rt_proc *rp, uint32_t tid, uint64_t tstate,
				   uint64_t now_ns);
	/* The merge kind of a named native frame (NULL name: unnamed). */
	rt_native_kind_fn native_kind;
	/* Whether the process's eval-loop calls each run frames up to an
	 * entry frame (CPython 3.11+), for the merge. */
	bool (*interp_frames)(const struct rt_proc *rp);
	/* A native function whose frame in a thread's stack says the thread
	 * waits for the interpreter's lock (CPython's GIL), or NULL. */
	const char *lock_wait_function;

	/* The walk BPF does, from user space, over the live process: the
	 * interpreted frames of the thread whose pid_tgid is id and whose fs
	 * base is fsbase (walk_thread), or of the thread state tstate that
	 * the runtime found for a thread (walk_tstate), into *out (frames,
	 * tstate, lock state, err, flags), and the anchors it passed into
	 * *anchors (NULL: not wanted) for the native walk. 0 or -ENOMEM; read
	 * failures are in out->err. */
	int (*walk_thread)(const struct rt_proc *rp, uint64_t id, uint64_t fsbase,
			   struct tp_sample *out, struct tpw_anchors *anchors);
	int (*walk_tstate)(const struct rt_proc *rp, uint64_t tstate, struct tp_sample *out,
			   struct tpw_anchors *anchors);
	/* Every thread of the live process with its frames, into *out (free
	 * it with threads_free, in every case). 0; -ESRCH: gone; -ENOMEM;
	 * another negative errno with msg saying why the list cannot be
	 * read. */
	int (*threads)(const struct rt_proc *rp, struct rt_threads *out, char *msg, size_t msglen);
	void (*threads_free)(struct rt_threads *t);
	/* The tasks of the process's event loops, into *out (free it with
	 * tasks_free, in every case): 0; -ESRCH; -ENOMEM; another negative
	 * errno with msg saying why they cannot be read. NULL: the runtime
	 * has none. */
	int (*tasks)(const struct rt_proc *rp, struct rt_tasks *out, char *msg, size_t msglen);
	void (*tasks_free)(struct rt_tasks *t);
	/* --async: the tasks of the chain whose innermost task's coroutine
	 * is frame's (tp_sample.task_frame: its frame, or itself), root first (the one
	 * its loop started, ..., the running one), into names[0..max): how
	 * many, 0 when frame is no task's. The names live until the next call
	 * for rp. now_ns: CLOCK_MONOTONIC. *read_ns: the time it spent
	 * reading the process's tasks again, 0 when it did not; *read_failed
	 * set when that read found no tasks to read (asyncio not imported, or
	 * memory that cannot be read). NULL: the runtime has no tasks. */
	size_t (*task_chain)(struct rt_proc *rp, uint64_t frame, uint64_t now_ns,
			     const char **names, size_t max, uint64_t *read_ns, bool *read_failed);
	/* --mode wall --async: reads rp's tasks now into the list that
	 * task_chain searches, and gives it in *out, valid until the next
	 * call of either for rp; *read_ns: the time the read took. 0, or a
	 * negative errno with *out empty. NULL: the runtime has no tasks. */
	int (*tasks_now)(struct rt_proc *rp, uint64_t now_ns, const struct rt_tasks **out,
			 uint64_t *read_ns);
	/* The chain of (*out)->v[i] of tasks_now, as task_chain gives it. */
	size_t (*task_chain_of)(struct rt_proc *rp, size_t i, const char **names, size_t max);
	/* The variables of interpreted frame f, whose frame is at frame
	 * (rt_thread.frame_addrs), into out[0..max), in the frame's order:
	 * how many, with *cut set when more were left out or a read failed;
	 * or a negative errno (-ENOTSUP when the runtime reads no locals).
	 * NULL: the runtime reads none. */
	int (*locals)(const struct rt_proc *rp, const struct tp_frame *f, uint64_t frame,
		      struct rt_local *out, size_t max, bool *cut);

	/* Counters of the process's naming, added to the session's. */
	void (*counts)(const struct rt_proc *rp, uint64_t *snapshots_used, size_t *bytes,
		       uint64_t *lines_shared);
};

/* Every runtime taipan reads, NULL-terminated, in the order they are tried
 * (runtimes.c); at most RT_MAX. */
#define RT_MAX 4
extern const struct runtime_ops *const runtimes[];

/* Asks each runtime in turn whether pid is one of its own (caches: one per
 * runtime, in runtimes[]'s order, or NULL): 0 with *rt and *rp; else the
 * first answer that is not -ENOEXEC (not that runtime's), or -ENOEXEC, with
 * msg saying why. */
int runtime_detect(void *const *caches, pid_t pid, const struct runtime_ops **rt,
		   struct rt_proc **rp, char *msg, size_t msglen);

#endif /* TAIPAN_RUNTIME_H */
