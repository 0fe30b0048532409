/* stacks.h - a sample of a process becomes a stack of named frames and its
 * labels.
 *
 * What a frame is named, where the interpreted frames go among the native
 * ones (profile/merge.h), which marker says what failed, and what the lock
 * and thread labels say, are decided here once, for the session (record, top
 * and the agent) and for dump. Frames are interned in a profile of the
 * caller's; names are cached per process (interpreted frames) and per file
 * (native ones) for as long as that profile is the one in use.
 */
#ifndef TAIPAN_STACKS_H
#define TAIPAN_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/runtime.h"
#include "core/sampler.h"
#include "profile/profile.h"
#include "taipan_abi.h"

struct native_proc;
struct nativesym;
struct nwalk;
struct stacks;
struct stacks_fcache;

/* The marker at the root of a sample of a thread that runs no interpreted
 * frame (doc/taipan.1, MARKERS). */
#define STACKS_MARKER_NO_FRAME "[no Python frame]" /* CPython's runtime_ops.no_frame_marker */
#define STACKS_MARKER_DISAGREE "[native and Python stacks disagree]" /* ... .disagree_marker */

/* A sample's process, as the stacks need to know it. */
struct stacks_proc {
	pid_t pid;
	const struct runtime_ops *rt; /* its runtime, and that runtime's data of it */
	struct rt_proc *rp;
	const struct rt_facts *f;
	const char *cgroup, *container; /* its cgroup path and container id, or "" */
	const char *exe;		/* its executable's path, or NULL */
	/* Where its interpreted frames' names are cached: made at the first
	 * frame, freed with stacks_fcache_free(). */
	struct stacks_fcache **fcache;
	/* How its native frames are named: through its mappings (np, with
	 * stacks' symbol cache), or through dump's walker (nw). */
	const struct native_proc *np;
	struct nwalk *nw;
};

/* Tasks of one chain shown at most (--async): the running one and those
 * that await it. */
#define STACKS_TASKS_MAX 16

/* The leaf of the await stack of an asyncio task that waits (--mode wall
 * --async), as stacks_state_leaf() is a thread's. */
#define STACKS_MARKER_AWAITING "[awaiting]"

struct stacks_opts {
	/* The filtered view of native frames (SESSION_NATIVE_FILTERED). */
	bool filtered;
	/* Names kernel addresses the kernel's way when it can
	 * (sampler_ops.kernel_names); NULL: from /proc/kallsyms. */
	const struct sampler *sm;
	/* --async: the running asyncio task and those awaiting it, as [task
	 * NAME] frames above its coroutine's, and the task label. */
	bool tasks;
};

/* What the stacks counted, since they were made. */
struct stacks_counts {
	uint64_t bad_frames;	  /* interpreted frames whose code could not be read */
	uint64_t freed_frames;	  /* ... whose code was freed before it was read */
	uint64_t snapped_codes;	  /* ... named from BPF's first look */
	uint64_t no_frame;	  /* samples of a thread running no interpreted frame */
	uint64_t merge_failures;  /* samples whose native and interpreted stacks disagreed */
	uint64_t native_new_code; /* native walks stopped at code mapped since its maps were read */
	uint64_t native_jit;	  /* ... cut at the runtime's JIT code (runtime_ops.jit_marker) */
	uint64_t native_nowhere;  /* ... at a return address no mapping holds */
	uint64_t truncated;	  /* stacks deeper than the walk limit */
	uint64_t task_reads;	  /* --async: reads of a process's tasks */
	uint64_t task_read_failures;		/* ... of which found none to read */
	uint64_t task_read_ns;			/* ... and the time they took */
	uint64_t walk_errors[TP_ERR__COUNT];	/* by enum tp_walk_err */
	uint64_t native_errors[TP_UERR__COUNT]; /* native walks, by how they ended */
};

/* Stacks interned in prof (which stays the caller's), native names from
 * nsyms (may be NULL with no native frames). NULL when out of memory. */
struct stacks *stacks_new(const struct stacks_opts *o, struct profile *prof,
			  struct nativesym *nsyms);
/* Accepts NULL. */
void stacks_free(struct stacks *st);

/* From now on frames go into prof: what was cached of the last one is void. */
void stacks_set_profile(struct stacks *st, struct profile *prof);

/* Starts reading the kernel's symbols in the background, where the kernel
 * will not name its own addresses: the first kernel frame waits for it. */
void stacks_start_ksyms(struct stacks *st);

/* The stack of sample smp of process p, root first, into *ids (owned by
 * st, valid until the next call) and *n, with its labels in *lb (its
 * strings p's, smp's or st's); with_native: its native frames too (with
 * TP_SF_NATIVE), merged. The off-CPU leaf is the caller's. Returns 0 or
 * -ENOMEM. */
int stacks_build(struct stacks *st, const struct stacks_proc *p, const struct tp_sample *smp,
		 bool with_native, const uint32_t **ids, uint32_t *n, struct prof_labels *lb);

/* The next stacks_build() puts the chain of tasks names[0..n) (root first,
 * at most STACKS_TASKS_MAX; the strings must live until then) above
 * interpreted frame idx, instead of asking the runtime: a task that waits
 * (--mode wall --async), whose frames are the sample's. */
void stacks_preset_tasks(struct stacks *st, const char *const *names, size_t n, uint32_t idx);

/* Where each frame of a built stack comes from (stacks_origins()): for
 * dump, which prints more of each than its name. */
enum stacks_from {
	STACKS_FROM_INTERP = 0, /* smp->frames[index] (failed: a marker frame) */
	STACKS_FROM_NATIVE,	/* smp->ustack[index] */
	STACKS_FROM_KERNEL,	/* smp->kstack[index] */
	STACKS_FROM_WALK_ERR,	/* the marker of smp->err */
	STACKS_FROM_NO_FRAME,	/* STACKS_MARKER_NO_FRAME */
	STACKS_FROM_DISAGREE,	/* the native and interpreted stacks disagree */
	STACKS_FROM_NATIVE_CUT, /* the marker of smp->uerr */
	STACKS_FROM_CALLER,	/* a marker stacks_push_marker() added */
	STACKS_FROM_TASK,	/* an asyncio task (--async) */
	STACKS_FROM_JIT,	/* the runtime's JIT code: the native stack is cut there */
};

struct stacks_origin {
	uint8_t from; /* enum stacks_from */
	uint32_t index;
};

/* Where each frame of the stack the last stacks_build() returned comes
 * from, in the same order (and as long-lived) as its ids. */
const struct stacks_origin *stacks_origins(const struct stacks *st);

/* The leaf that says why a thread was off the CPU (enum tp_thread_state):
 * "[runnable]", "[sleeping]", "[blocked]". */
const char *stacks_state_leaf(unsigned int state);

/* The id of marker frame text in the profile, or a negative errno. */
int stacks_marker(struct stacks *st, const char *text);

/* Appends marker text to the stack the last stacks_build() returned (room
 * is kept for one). 0 or a negative errno. */
int stacks_push_marker(struct stacks *st, uint32_t *n, const char *text);

void stacks_get_counts(const struct stacks *st, struct stacks_counts *out);

/* Frees a process's cache (stacks_proc.fcache). Accepts NULL. */
void stacks_fcache_free(struct stacks_fcache *c);

#endif /* TAIPAN_STACKS_H */
