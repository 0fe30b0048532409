/* session.h - one profiling session: BPF in, aggregated profile out.
 * record, top and agent all drive the same session. */
#ifndef TAIPAN_SESSION_H
#define TAIPAN_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "profile/profile.h"
#include "core/sampler.h"
#include "taipan_abi.h"

/* Native frames in the stacks (--native). */
enum session_native {
	SESSION_NATIVE_NONE = 0, /* Python and kernel frames only */
	SESSION_NATIVE_FILTERED, /* native frames, without the interpreter's call machinery */
	SESSION_NATIVE_ALL,	 /* every native frame */
};

struct session_opts {
	bool system_wide;
	bool kernel_stacks;
	bool follow_children;
	enum session_native native; /* native frames, merged with the Python ones */
	/* --mode: on-CPU samples (PROF_MODE_CPU), those and the stacks of
	 * threads off the CPU weighed by how long they were (PROF_MODE_WALL),
	 * or the latter only (PROF_MODE_OFFCPU). */
	enum prof_mode mode;
	/* Off-CPU stretches shorter than this are left out (--min-block). */
	uint64_t min_block_ns;
	/* --gil: only samples of threads that hold the GIL. */
	bool gil_only;
	unsigned int rate_hz;
	/* System-wide only: profile just the processes whose comm is one of
	 * these (NULL-terminated; NULL: all), and that are in the cgroup
	 * cgroup or below it (procfs_cgroup_within; NULL: all). Others are
	 * ignored like non-Python ones. */
	const char *const *comms;
	const char *cgroup;
	/* The nice value the thread that reads samples and classifies
	 * processes takes when sampling starts, if below its own (0: leave
	 * it). On a loaded host, a process must be recognised within
	 * milliseconds of its first sample, or its samples are lost. */
	int nice;
	/* The most bytes kept of the targets (unwind tables, native symbol
	 * indexes, code objects and line tables), together (--max-memory);
	 * 0: BUDGET_DEFAULT (util/budget.h). */
	size_t max_memory;
	/* The sampler: NULL for the BPF programs; the unit tests give a fake. */
	sampler_open_fn open_sampler;
};

/* The --nice of record, top and agent. */
#define SESSION_NICE_DEFAULT (-5)

/* The marker at the root of a sample of a Python thread that runs no Python
 * frame (doc/taipan.1, MARKERS). */
#define SESSION_MARKER_NO_PYTHON "[no Python frame]"

struct session_stats {
	uint64_t samples;	  /* samples turned into stacks */
	uint64_t lost_ring;	  /* dropped: ring buffer full */
	uint64_t lost_unknown;	  /* dropped: process not classified yet */
	uint64_t lost_early;	  /* of those, in processes later found to be Python: in the profile
				   * as "[before taipan recognised the process]" */
	uint64_t unrecognised;	  /* of those, in processes never profiled as Python: not Python,
				   * filtered out, or gone before taipan looked */
	uint64_t lost;		  /* samples of profiled Python processes that the profile does not
				   * hold (ring full, or read after taipan forgot the process): what
				   * record and top call "lost" */
	uint64_t bad_frames;	  /* Python frames whose code object could not be read */
	uint64_t freed_frames;	  /* Python frames whose code object was freed before it was read */
	uint64_t no_python;	  /* samples of a Python thread running no Python frame */
	uint64_t codes_described; /* code objects BPF described (struct tp_code_ev) */
	uint64_t snapped_codes;	  /* ... named from that copy: gone when user space looked */
	uint64_t codes_undescribed; /* code objects left undescribed: TP_DESCRIBE_MAX a sample */
	uint64_t walk_errors[TP_ERR__COUNT];	/* by enum tp_walk_err */
	uint64_t truncated;			/* stacks deeper than the walk limit */
	uint64_t native_errors[TP_UERR__COUNT]; /* native walks, by how they ended */
	uint64_t merge_failures;       /* samples whose native and Python stacks disagreed */
	uint64_t native_files;	       /* files with an unwind table in BPF */
	uint64_t native_files_failed;  /* files without one: followed by frame pointer */
	uint64_t native_table_bytes;   /* of those tables */
	uint64_t native_build_ms;      /* spent building them */
	uint64_t native_fds;	       /* descriptors of mapped files held open now */
	uint64_t native_maps_capped;   /* executable mappings not tracked: past a process's cap */
	uint64_t native_builds_capped; /* files left to frame pointers: past a process's tables */
	uint64_t native_over_budget;   /* tables not built: the memory budget was spent */
	uint64_t native_scans_partial; /* reads of a process's mappings left for the next turn */
	size_t symbol_bytes;	       /* native symbol indexes held */
	uint64_t symbols_cut;	       /* files indexed in part: past the per-file bound */
	uint64_t symbols_over_budget;  /* files not indexed: no room in the budget */
	size_t code_bytes;	       /* code objects, names and line tables held */
	uint64_t lines_shared;	       /* code objects whose line table another had: kept once */
	size_t memory_limit;	       /* the budget (--max-memory) */
	size_t memory_used;	       /* held of it now */
	size_t memory_peak;	       /* the most held at once */
	uint64_t memory_refused;       /* what was not kept, or cut, for lack of room */
	unsigned int processes;	       /* Python processes seen */
	unsigned int unsupported;      /* processes refused (version, layout) */
	char refused[512];	       /* why the first of them was refused, "" if none */
	uint64_t bpf_samples;	       /* perf samples in tracked processes */
	uint64_t offcpu;	       /* off-CPU stretches in the profile */
	uint64_t offcpu_short;	       /* ... left out: shorter than --min-block */
	uint64_t offcpu_unended;       /* ... whose end was never seen (ring full): weigh 0 */
	uint64_t offcpu_open;	       /* ... still off the CPU at the end: weighed until then */
	uint64_t offcpu_missed;	       /* ... whose return no sched_switch reported: timed at its
					* next switch-out from its CPU time (TP_SWF_RECOVERED) */
	uint64_t offcpu_early;	       /* ... of processes not recognised yet: under the marker */
	uint64_t offcpu_asleep;	       /* ... of threads asleep when the recording started, their
					* stacks read then from user space */
	uint64_t offcpu_asleep_ran;    /* threads asleep then that ran while read: left to BPF */
	uint64_t offcpu_seen_back;     /* ... whose return was lost (ring full) but a cpu-clock
					* sample saw it run: ended a period before that sample */
	uint64_t gil_other;	       /* --gil: samples left out, of threads without the GIL */
	uint64_t gil_unknown;	       /* ... of them, of builds whose GIL taipan cannot read */
};

struct session;

/* Loads the BPF side. Returns 0 or a negative errno with err filled. */
int session_new(const struct session_opts *o, struct session **out, char *err, size_t errlen);
void session_free(struct session *s);

/* Profiles pid from now on. With require_python, a pid that is not a
 * supported Python process is an error (err says why); otherwise it is only
 * a target, classified when it first runs. */
int session_add_pid(struct session *s, pid_t pid, bool require_python, char *err, size_t errlen);

/* Starts sampling. */
int session_start(struct session *s, char *err, size_t errlen);

/* Profiles the processes that pid started and that still run, their
 * children, and so on, as session_add_pid(require_python false) does, and
 * classifies them now. Called after session_start() with follow_children:
 * BPF then sees every later fork. Returns how many it added, or a negative
 * errno when /proc cannot be listed. */
int session_add_descendants(struct session *s, pid_t pid);

/* Stops sampling: what is taken afterwards is nothing, so the counters
 * (session_stats()) and the profile's duration are those of this moment.
 * What the ring still holds is read by the next session_poll(). */
void session_stop(struct session *s);

/* Handles whatever arrived within timeout_ms. Returns 0 or a negative errno. */
int session_poll(struct session *s, int timeout_ms);

/* The aggregated profile so far (owned by the session). */
struct profile *session_profile(struct session *s);

/* Hands over the profile aggregated so far (the caller frees it with
 * profile_free) and starts an empty one: the agent's fixed windows. Its
 * duration is the time since the last take (or the start). NULL when out of
 * memory; the session then keeps its profile. */
struct profile *session_take_profile(struct session *s);

void session_stats(struct session *s, struct session_stats *st);

/* How many of the given pids are still alive (not zombies) and being
 * profiled. Reads /proc for each: call it a few times a second, not more. */
unsigned int session_live_targets(struct session *s);

#endif /* TAIPAN_SESSION_H */
