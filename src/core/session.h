/* session.h - one profiling session: BPF in, aggregated profile out.
 * record, top and agent all drive the same session. */
#ifndef TAIPAN_SESSION_H
#define TAIPAN_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "profile/profile.h"
#include "core/sampler.h"
#include "core/walkerr.h"
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
	/* No debug files from debuginfod (--no-debuginfod); otherwise they
	 * are fetched where DEBUGINFOD_URLS is set. */
	bool no_debuginfod;
	/* --async: asyncio tasks in the stacks (stacks_opts.tasks). */
	bool async;
	/* Keep each sample's events with their times (profile_keep_events,
	 * up to PROFILE_EVENTS_MAX a profile): for OTLP, whose samples carry
	 * timestamps. */
	bool events;
	/* The sampler: NULL for the BPF programs; the unit tests give a fake. */
	sampler_open_fn open_sampler;
};

/* The --nice of record, top and agent. */
#define SESSION_NICE_DEFAULT (-5)

/* The marker at the root of a sample of a Python thread that runs no Python
 * frame (doc/taipan.1, MARKERS). */
#define SESSION_MARKER_NO_PYTHON "[no Python frame]"

/* The session's counters, each named once: X(type, field, key, text) for
 * a number, V(field, count, first, name, key) for a vector of them, by an
 * enum (name(i), a function of core/walkerr.h, names element i, from first
 * on; NULL: an i that names none, left out). key is its name in the
 * agent's GET /stats (NULL: not there); text says what it counts on the
 * first line of record's --stats, after the number (NULL: a line of its own,
 * or none). They make struct session_stats, that JSON and that line, in
 * this order, grouped as GET /stats lists them: the samples, what is held,
 * the processes (before which the agent says how many it tracks now), and
 * the time off the CPU. */
#define SESSION_SAMPLE_COUNTERS(X, V)                                                              \
	X(uint64_t, bpf_samples, NULL, "perf samples in targets")                                  \
	/* samples turned into stacks */                                                           \
	X(uint64_t, samples, "samples", "stacks recorded")                                         \
	/* samples of profiled Python processes that the profile does not hold                     \
	 * (ring full, or read after taipan forgot the process): what record and                   \
	 * top call "lost" */                                                                      \
	X(uint64_t, lost, "lost_samples", NULL)                                                    \
	X(uint64_t, lost_ring, "lost_ring_full", "lost (ring full)")                               \
	/* read after taipan forgot the process */                                                 \
	X(uint64_t, lost_gone, NULL, "lost (read after the process exited or exec'd)")             \
	/* dropped: process not classified yet */                                                  \
	X(uint64_t, lost_unknown, "lost_unknown_process", NULL)                                    \
	/* of those, in processes later found to be Python: in the profile as                      \
	 * "[before taipan recognised the process]" */                                             \
	X(uint64_t, lost_early, NULL,                                                              \
	  "taken before taipan recognised the process (in the profile as a marker)")               \
	/* of those, in processes never profiled as Python */                                      \
	X(uint64_t, unrecognised, NULL,                                                            \
	  "of processes not profiled (not Python, filtered out, or gone before taipan looked)")    \
	X(uint64_t, bad_frames, NULL, "frames of unreadable code objects ([unknown])")             \
	X(uint64_t, freed_frames, NULL,                                                            \
	  "frames of code objects freed before taipan read them ([code object freed])")            \
	X(uint64_t, no_python, NULL,                                                               \
	  "samples of Python threads running no Python frame (" SESSION_MARKER_NO_PYTHON ")")      \
	/* stacks deeper than the walk limit */                                                    \
	X(uint64_t, truncated, "truncated_stacks", NULL)                                           \
	/* --async: reads of a process's tasks (one a coroutine no read knew, at                   \
	 * most every 250 ms), and the time they took */                                           \
	X(uint64_t, task_reads, "task_reads", NULL)                                                \
	/* ... of which found no tasks to read (asyncio not imported yet, or                       \
	 * memory that cannot be read) */                                                          \
	X(uint64_t, task_read_failures, "task_read_failures", NULL)                                \
	X(uint64_t, task_read_ms, "task_read_ms", NULL)                                            \
	/* --mode wall --async: await stacks of waiting tasks weighed */                           \
	X(uint64_t, task_awaits, "task_awaits", NULL)                                              \
	/* by enum tp_walk_err */                                                                  \
	V(walk_errors, TP_ERR__COUNT, 1, walkerr_row_key, "walk_errors")                           \
	/* native walks, by how they ended */                                                      \
	V(native_errors, TP_UERR__COUNT, 0, walkerr_native_key, "native_walks")                    \
	/* samples whose native and Python stacks disagreed */                                     \
	X(uint64_t, merge_failures, "native_merge_failures", NULL)                                 \
	X(uint64_t, native_jit, "native_jit",                                                      \
	  "native walks cut at the runtime's JIT code (its marker: [YJIT])")                       \
	X(uint64_t, native_new_code, "native_new_code",                                            \
	  "native walks that met code mapped after taipan read the process's maps "                \
	  "(" STACKS_MARKER_NEW_CODE ")")                                                          \
	X(uint64_t, native_nowhere, "native_nowhere",                                              \
	  "native walks that met a return address no mapping holds (" STACKS_MARKER_NOWHERE ")")   \
	/* code objects BPF described (struct tp_code_ev) */                                       \
	X(uint64_t, codes_described, NULL, NULL)                                                   \
	/* ... named from that copy: gone when user space looked */                                \
	X(uint64_t, snapped_codes, NULL, NULL)                                                     \
	/* code objects left undescribed: TP_DESCRIBE_MAX a sample */                              \
	X(uint64_t, codes_undescribed, NULL, NULL)                                                 \
	/* --gil: samples left out, of threads without the GIL */                                  \
	X(uint64_t, gil_other, NULL, NULL)                                                         \
	/* ... of them, of builds whose GIL taipan cannot read */                                  \
	X(uint64_t, gil_unknown, NULL, NULL)

#define SESSION_HELD_COUNTERS(X, V)                                                                \
	/* files with an unwind table in BPF */                                                    \
	X(uint64_t, native_files, "native_table_files", NULL)                                      \
	/* of those tables */                                                                      \
	X(uint64_t, native_table_bytes, "native_table_bytes", NULL)                                \
	/* the rules their rows share (8 bytes each) */                                            \
	X(uint64_t, native_rules, "native_rules", NULL)                                            \
	/* debug files asked of debuginfod, fetched, and that no server had */                     \
	X(uint64_t, debuginfod_asked, NULL, NULL)                                                  \
	X(uint64_t, debuginfod_found, NULL, NULL)                                                  \
	X(uint64_t, debuginfod_missing, NULL, NULL)                                                \
	/* the budget (--max-memory) */                                                            \
	X(size_t, memory_limit, "memory_limit_bytes", NULL)                                        \
	/* held of it now */                                                                       \
	X(size_t, memory_used, "memory_used_bytes", NULL)                                          \
	/* the most held at once */                                                                \
	X(size_t, memory_peak, "memory_peak_bytes", NULL)                                          \
	/* what was not kept, or cut, for lack of room */                                          \
	X(uint64_t, memory_refused, "memory_refused", NULL)                                        \
	/* descriptors of mapped files held open now */                                            \
	X(uint64_t, native_fds, "native_fds", NULL)                                                \
	/* files without an unwind table: followed by frame pointer */                             \
	X(uint64_t, native_files_failed, NULL, NULL)                                               \
	/* spent building the tables */                                                            \
	X(uint64_t, native_build_ms, NULL, NULL)                                                   \
	/* executable mappings not tracked: past a process's cap */                                \
	X(uint64_t, native_maps_capped, NULL, NULL)                                                \
	/* files left to frame pointers: past a process's tables */                                \
	X(uint64_t, native_builds_capped, NULL, NULL)                                              \
	/* tables not built: the memory budget was spent */                                        \
	X(uint64_t, native_over_budget, NULL, NULL)                                                \
	/* reads of a process's mappings left for the next turn */                                 \
	X(uint64_t, native_scans_partial, NULL, NULL)                                              \
	/* native symbol indexes held */                                                           \
	X(size_t, symbol_bytes, NULL, NULL)                                                        \
	/* files indexed in part: past the per-file bound */                                       \
	X(uint64_t, symbols_cut, NULL, NULL)                                                       \
	/* files not indexed: no room in the budget */                                             \
	X(uint64_t, symbols_over_budget, NULL, NULL)                                               \
	/* code objects, names and line tables held */                                             \
	X(size_t, code_bytes, NULL, NULL)                                                          \
	/* code objects whose line table another had: kept once */                                 \
	X(uint64_t, lines_shared, NULL, NULL)

#define SESSION_PROCESS_COUNTERS(X, V)                                                             \
	/* Python processes seen */                                                                \
	X(unsigned int, processes, "processes_seen", NULL)                                         \
	/* processes refused (version, layout) */                                                  \
	X(unsigned int, unsupported, "processes_unsupported", NULL)

#define SESSION_OFFCPU_COUNTERS(X, V)                                                              \
	/* off-CPU stretches in the profile */                                                     \
	X(uint64_t, offcpu, NULL, NULL)                                                            \
	/* ... left out: shorter than --min-block */                                               \
	X(uint64_t, offcpu_short, NULL, NULL)                                                      \
	/* ... whose end was never seen (ring full): weigh 0 */                                    \
	X(uint64_t, offcpu_unended, NULL, NULL)                                                    \
	/* ... still off the CPU at the end: weighed until then */                                 \
	X(uint64_t, offcpu_open, NULL, NULL)                                                       \
	/* ... whose return no sched_switch reported: timed at its next                            \
	 * switch-out from its CPU time (TP_SWF_RECOVERED) */                                      \
	X(uint64_t, offcpu_missed, NULL, NULL)                                                     \
	/* ... of processes not recognised yet: under the marker */                                \
	X(uint64_t, offcpu_early, NULL, NULL)                                                      \
	/* ... of threads asleep when the recording started, their stacks                          \
	 * read then from user space */                                                            \
	X(uint64_t, offcpu_asleep, NULL, NULL)                                                     \
	/* threads asleep then that ran while read: left to BPF */                                 \
	X(uint64_t, offcpu_asleep_ran, NULL, NULL)                                                 \
	/* ... whose return was lost (ring full) but a cpu-clock sample saw                        \
	 * it run: ended a period before that sample */                                            \
	X(uint64_t, offcpu_seen_back, NULL, NULL)

#define SESSION_COUNTERS(X, V)                                                                     \
	SESSION_SAMPLE_COUNTERS(X, V)                                                              \
	SESSION_HELD_COUNTERS(X, V)                                                                \
	SESSION_PROCESS_COUNTERS(X, V)                                                             \
	SESSION_OFFCPU_COUNTERS(X, V)

#define SESSION_STATS_FIELD(type, field, key, text) type field;
#define SESSION_STATS_VECTOR(field, count, first, name, key) uint64_t field[count];

struct session_stats {
	SESSION_COUNTERS(SESSION_STATS_FIELD, SESSION_STATS_VECTOR)
	char refused[512]; /* why the first unsupported one was refused, "" if none */
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

/* The counters as of now into *st. Reads the session and its parts,
 * changes nothing. */
void session_stats(struct session *s, struct session_stats *st);

/* How many of the given pids are still alive (not zombies) and being
 * profiled. Reads /proc for each: call it a few times a second, not more. */
unsigned int session_live_targets(struct session *s);

#endif /* TAIPAN_SESSION_H */
