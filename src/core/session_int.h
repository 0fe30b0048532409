/* session_int.h - what the parts of the session share: its state, its
 * processes, and the functions one part calls in another (session.c: the
 * processes and the events; stacks.c: samples to stacks; offcpu.c: time off
 * the CPU). Not for anything outside src/core/session*.c and offcpu.c. */
#ifndef TAIPAN_SESSION_INT_H
#define TAIPAN_SESSION_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uthash.h>

#include "core/native.h"
#include "core/runtime.h"
#include "core/session.h"
#include "core/stacks.h"
#include "proc/procfs.h"
#include "util/budget.h"

/* A process: not looked at yet, read by a runtime (rt), not one to profile,
 * or gone. */
enum sproc_state { SP_PENDING, SP_RUNTIME, SP_OTHER, SP_EXITED };

struct sproc {
	UT_hash_handle hh;
	pid_t pid;
	enum sproc_state state;
	const struct runtime_ops *rt; /* SP_RUNTIME: its runtime, */
	struct rt_proc *rp;	      /* that runtime's data of it, */
	struct rt_facts f;	      /* and what it says of it (strings of rp's) */
	struct procfs_cgroup cg;      /* its cgroup path and container id */
	char *exe;		      /* its executable's path (malloc), or NULL */
	struct stacks_fcache *fcache;
	struct native_proc np;	/* its executable mappings (native unwinding) */
	uint64_t classified_ns; /* CLOCK_MONOTONIC, like the BPF events' time_ns */
	uint64_t exited_ns;
	bool warned;
	bool rescan; /* code was mapped: read its mappings again after this poll */
	/* SP_PENDING: when housekeeping looks at it again (CLOCK_MONOTONIC),
	 * and the wait after that look, doubled at each one. */
	uint64_t next_look_ns;
	uint32_t look_ms;
	/* --mode wall --async: when its tasks were last looked at (0: never,
	 * or the look failed), when they are next (tasks_waiting()), and
	 * whether they were ever. */
	uint64_t tasks_at_ns, tasks_next_ns;
	bool tasks_looked;
	uint8_t tasks_fails; /* looks that failed in a row, up to TASKS_LOOK_BACKOFF */
};

struct session {
	struct session_opts opts;
	struct sampler sm;	    /* the BPF programs, or a test's fake */
	struct tp_sample *unpacked; /* the sample on_event() unpacks from the ring */
	struct profile *prof;
	struct sproc *procs;
	void *caches[RT_MAX];	 /* each runtime's, by its index in runtimes[] */
	struct native *native;	 /* NULL: native unwinding off */
	struct nativesym *nsyms; /* names of native frames */
	struct dinfod *dinfod;	 /* their debug files by build-id; NULL: none */
	struct stacks *stacks;	 /* samples to stacks */
	struct session_stats st; /* what is counted as it goes; session_stats() adds the rest */
	uint64_t start_ns;
	uint64_t dropped;	/* samples of processes user space no longer knows */
	uint64_t early_dropped; /* early samples the profile had no room for */
	uint64_t stop_ns;	/* when sampling stopped, 0 while it runs */
	bool rescans;		/* some process's rescan is due */
	bool first_sample_seen;
	struct away *away; /* threads off the CPU, by tid */
	/* --mode wall --async: the sample a waiting task's stack is built
	 * in (made at the first), and the time the looks at tasks took */
	struct tp_sample *task_smp;
	uint64_t task_look_ns;
	bool tasks_last; /* the last look, at the stop, was taken */
	/* What is kept of the targets (tables, symbol indexes, code
	 * objects), under one limit (--max-memory). */
	struct budget budget;
};

/* A thread off the CPU (--mode wall, off-cpu): the sample its stack went
 * into, with a count of 0 until the thread runs again
 * (doc/design/off-cpu.md). */
struct away {
	UT_hash_handle hh;
	uint32_t tid;
	uint64_t out_ns;  /* when it left: its TP_EV_SWITCH_IN names it by this */
	uint64_t from_ns; /* what the current profile has not weighed yet: from here */
	uint64_t ran_ns;  /* a cpu-clock sample of it on the CPU since, at this time: it is
			   * back, its return lost; 0: none */
	size_t index;	  /* its sample in s->prof */
};

/* session.c */
struct sproc *sproc_get(struct session *s, pid_t pid);
/* p as the stacks see it (SP_RUNTIME). */
struct stacks_proc sproc_stacks(struct sproc *p);
void account_early(struct session *s, struct sproc *p);
int on_sample(struct session *s, const struct tp_sample *smp, size_t size);

/* offcpu.c: threads off the CPU (--mode wall, off-cpu). */
void seen_running(struct session *s, uint32_t tid, uint64_t time_ns);
int went_away(struct session *s, const struct tp_sample *smp, const uint32_t *ids, uint32_t n,
	      const struct prof_labels *lb);
void came_back(struct session *s, uint32_t tid, uint64_t out_ns, uint64_t in_ns);
void end_away(struct session *s, uint64_t end_ns);
/* The profile is cut at now: old (still s->prof) is done, fresh is next. */
void away_cut(struct session *s, struct profile *old, struct profile *fresh, uint64_t now);

/* --mode wall --async: the asyncio tasks of the processes whose look is
 * due at now, each that waits weighing its await stack. 0 or -ENOMEM. */
int tasks_waiting(struct session *s, uint64_t now);

/* The threads of the processes known before BPF watches (asleep_before),
 * and, once it does (started), the stacks of those asleep, which weigh from
 * the start (asleep_after, which frees pre). 0 or -ENOMEM. */
struct asleep_pre;
void asleep_before(struct session *s, struct asleep_pre **out, size_t *n);
int asleep_after(struct session *s, struct asleep_pre *pre, size_t n, bool started);

/* The time between two cpu-clock samples of a running thread. */
static inline uint64_t sample_period_ns(const struct session *s)
{
	return 1000000000ULL / (s->opts.rate_hz ? s->opts.rate_hz : 1);
}

/* A CLOCK_MONOTONIC time (BPF's) as wall-clock nanoseconds in the profile
 * prof, whose window began at s->start_ns: an event's time (profile_bump_at).
 * A time before the window is its start. */
static inline uint64_t session_unix_ns(const struct session *s, const struct profile *prof,
				       uint64_t mono_ns)
{
	return profile_start_ns(prof) + (mono_ns > s->start_ns ? mono_ns - s->start_ns : 0);
}

#endif /* TAIPAN_SESSION_INT_H */
