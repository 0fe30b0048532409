/* profile.h - the aggregated profile: interned frames, interned stacks, counts
 * per label set. Every output format reads this and nothing else.
 */
#ifndef TAIPAN_PROFILE_H
#define TAIPAN_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum prof_frame_kind {
	PROF_FRAME_INTERP = 0, /* an interpreted frame of a runtime (prof_frame.runtime) */
	PROF_FRAME_KERNEL = 1,
	PROF_FRAME_NATIVE = 2,
	PROF_FRAME_MARKER = 3, /* taipan's own annotations: "[truncated]", "[unknown]" */
};

/* A frame as the encoders see it. Strings are owned by the profile once interned. */
struct prof_frame {
	const char *name;     /* qualified function name, kernel symbol, or marker text */
	const char *file;     /* source file, or NULL */
	const char *module;   /* mapping: "[kernel]", a library path, or NULL for interpreted */
	const char *runtime;  /* interpreted: its runtime ("python"), or NULL */
	const char *build_id; /* native: the module's build-id in hex, or NULL */
	int line;	      /* current line, 0 when unknown */
	int first_line;	      /* the function's first line, 0 when unknown */
	uint64_t addr;	      /* kernel: the address; native: the module's link-time address, which
			       * is the same in every process that maps it; 0 for interpreted */
	enum prof_frame_kind kind;
};

/* Whether f is machine code (native or kernel) that no symbol named: its
 * name is empty, "0xADDR", or "MODULE+0xVADDR" with MODULE the base name of
 * f->module (what nativesym_format() writes for such an address). A reader
 * with the module, such as pprof given its build-id, can name it later. */
bool prof_frame_unnamed(const struct prof_frame *f);

/* What a thread was doing when its sample was taken (--mode wall, off-cpu):
 * the state label. */
enum prof_state {
	PROF_STATE_NONE = 0, /* not known: --mode cpu, where every sample is running */
	PROF_STATE_RUNNING,  /* on a CPU (a cpu-clock sample) */
	PROF_STATE_RUNNABLE, /* off the CPU, waiting for one */
	PROF_STATE_SLEEPING, /* off the CPU, in an interruptible sleep */
	PROF_STATE_BLOCKED,  /* off the CPU, in an uninterruptible sleep */
	PROF_STATE_AWAITING, /* no thread: an asyncio task that waits (--mode wall --async) */
	PROF_STATE__COUNT
};

/* The state's label value ("running", ...), NULL for PROF_STATE_NONE. */
const char *prof_state_name(enum prof_state st);

/* What a sampled thread had of its interpreter's lock (CPython's GIL): the
 * lock label, named by the runtime (prof_labels.lock_name: "gil"). */
enum prof_lock {
	PROF_LOCK_NONE = 0, /* no lock to tell of: none read (2.7, 3.6, free-threaded) */
	PROF_LOCK_HELD,	    /* the thread holds it */
	PROF_LOCK_WAITING,  /* the thread waits for it (its runtime's wait function in its native
			       stack) */
	PROF_LOCK_RELEASED, /* another thread holds it, or nobody: this one runs without it */
	PROF_LOCK__COUNT
};

/* The lock label's value ("held", ...), NULL for PROF_LOCK_NONE. */
const char *prof_lock_name(enum prof_lock l);

/* What a profile's values measure (--mode). */
enum prof_mode {
	PROF_MODE_CPU = 0, /* on-CPU samples: counts, each worth the period */
	PROF_MODE_WALL,	   /* on-CPU samples and off-CPU time: nanoseconds */
	PROF_MODE_OFFCPU,  /* off-CPU time only: nanoseconds */
};

/* The mode's name as --mode spells it: "cpu", "wall", "off-cpu". */
const char *prof_mode_name(enum prof_mode mode);

/* Labels that every sample carries. Strings are interned by the profile. */
struct prof_labels {
	uint32_t pid;
	uint32_t tid;
	uint32_t ns_pid; /* pid inside the process's own namespace, 0 when the same */
	const char *thread_name;
	const char *comm;
	const char *runtime;	     /* "python" */
	const char *runtime_version; /* "3.12.1" */
	/* Another name the runtime_version label is also written under, for
	 * readers of older profiles ("python_version"), or NULL. */
	const char *version_alias;
	/* The name of the runtime's lock label ("gil"), or NULL. */
	const char *lock_name;
	const char *cgroup;	  /* cgroup v2 path, or NULL */
	const char *container_id; /* the container id in the cgroup path, or NULL */
	const char *task;	  /* the asyncio task it runs (--async), or NULL */
	const char *exe;	  /* its executable's path (/proc/PID/exe), or NULL */
	uint8_t state;		  /* enum prof_state */
	uint8_t lock;		  /* enum prof_lock */
};

/* One event of a sample, when the profile keeps them (profile_keep_events):
 * what one add brought, and when. */
struct prof_event {
	uint64_t at_ns;	 /* wall-clock (Unix) nanoseconds; 0: untimed, the profile's start */
	uint64_t count;	 /* as prof_sample.count */
	uint64_t off_ns; /* as prof_sample.off_ns */
};

/* One aggregated sample: a stack (root first) with its labels and count. */
struct prof_sample {
	const uint32_t *frames; /* frame ids, root first */
	uint32_t nframes;
	struct prof_labels labels;
	uint64_t count;	 /* samples: cpu-clock ones, or times the thread left the CPU */
	uint64_t off_ns; /* time off the CPU, for a state other than running */
	/* Its events in the order added, when the profile keeps them: their
	 * counts and times add up to count and off_ns. nevents is 0 for a
	 * sample with nothing added (count and off_ns 0). */
	struct prof_event *events;
	uint32_t nevents, events_cap;
};

struct profile;

/* A new empty profile, or NULL when out of memory. Free with profile_free(). */
struct profile *profile_new(void);
/* Frees a profile and every string it interned. Accepts NULL. */
void profile_free(struct profile *p);

/* Sampling period and time span, for the formats that record them. */
void profile_set_timing(struct profile *p, uint64_t period_ns, uint64_t start_unix_ns,
			uint64_t duration_ns);
uint64_t profile_period_ns(const struct profile *p);
uint64_t profile_start_ns(const struct profile *p);
uint64_t profile_duration_ns(const struct profile *p);

void profile_set_mode(struct profile *p, enum prof_mode mode);
enum prof_mode profile_mode(const struct profile *p);
/* Whether the profile's values are nanoseconds of wall-clock or off-CPU
 * time (prof_value()) rather than sample counts. */
bool profile_weighted(const struct profile *p);

/* Interns f (copying its strings) and returns its id, or a negative errno.
 * The same frame always gets the same id. */
int profile_intern_frame(struct profile *p, const struct prof_frame *f);

/* Adds count to the stack frames[0..n) (ids from profile_intern_frame, root
 * first) under labels. Returns 0 or a negative errno; on error nothing changes. */
int profile_add(struct profile *p, const uint32_t *frames, uint32_t n,
		const struct prof_labels *labels, uint64_t count);

/* As profile_add, and off_ns nanoseconds off the CPU. */
int profile_add_off(struct profile *p, const uint32_t *frames, uint32_t n,
		    const struct prof_labels *labels, uint64_t count, uint64_t off_ns);

/* As profile_add_off, and the index of the sample it added to in *index
 * (which stays that sample's: profile_sample(p, *index)). */
int profile_add_at(struct profile *p, const uint32_t *frames, uint32_t n,
		   const struct prof_labels *labels, uint64_t count, uint64_t off_ns,
		   size_t *index);
/* Adds count and off_ns to sample index. */
void profile_bump(struct profile *p, size_t index, uint64_t count, uint64_t off_ns);
/* Adds sample index of src to dst with a count and time of 0 (its stack and
 * labels only), and its index in dst in *out. 0 or a negative errno. */
int profile_copy_stack(struct profile *dst, const struct profile *src, size_t index, size_t *out);

/* A new profile (PROF_MODE_CPU) of src's samples on the CPU only, without
 * their state label, and src's timing: a wall-clock profile seen as Go's
 * CPU profiles are. NULL when out of memory. */
struct profile *profile_cpu_view(const struct profile *src);

/* From now on, each add to p is also kept as an event of its sample, with
 * its time (profile_bump_at; untimed adds have at_ns 0), up to max events in
 * all. Past max, an add to a sample that has events goes into its latest
 * one (profile_events_merged() counts these), so that memory stays bounded
 * and the values stay whole; a sample's first event is always kept. */
void profile_keep_events(struct profile *p, size_t max);
/* Whether p keeps events, and how many adds past its limit went into a
 * sample's latest event. */
bool profile_keeps_events(const struct profile *p);
uint64_t profile_events_merged(const struct profile *p);
/* The event limit a profile keeping events is given by the commands
 * (24 bytes each: 24 MiB). */
#define PROFILE_EVENTS_MAX (1u << 20)

/* As profile_bump, as one event at at_ns (wall-clock nanoseconds) when p
 * keeps events. Out of memory for the event, the add goes into the sample's
 * latest event (counted as merged); a sample that could not keep its first
 * event keeps none, and reads as one untimed event. */
void profile_bump_at(struct profile *p, size_t index, uint64_t count, uint64_t off_ns,
		     uint64_t at_ns);

/* Iteration for the encoders. Ids and indexes are dense, from 0. */
uint32_t profile_frame_count(const struct profile *p);
const struct prof_frame *profile_frame(const struct profile *p, uint32_t id);
size_t profile_sample_count(const struct profile *p);
const struct prof_sample *profile_sample(const struct profile *p, size_t i);
/* Sum of all sample counts. */
uint64_t profile_total(const struct profile *p);

/* A sample's time on the CPU (its count times the period, for a running
 * sample), its wall-clock time (that and its time off the CPU), and the value
 * the profile's mode shows: its count (--mode cpu) or its wall-clock
 * nanoseconds. Saturating. */
uint64_t prof_sample_cpu_ns(const struct profile *p, const struct prof_sample *s);
uint64_t prof_sample_wall_ns(const struct profile *p, const struct prof_sample *s);
uint64_t prof_value(const struct profile *p, const struct prof_sample *s);
/* Nanoseconds as whole microseconds, rounded to the nearest: how folded
 * lines and the flame graph carry wall-clock and off-CPU time. */
static inline uint64_t prof_ns_to_us(uint64_t ns)
{
	return ns / 1000 + (ns % 1000 >= 500);
}

/* The sum of prof_value() over the profile. */
uint64_t profile_total_value(const struct profile *p);

/* Adds every sample of src to dst, re-interning src's frames and labels in
 * dst, so that dst reads as if it had aggregated both. dst's time span grows
 * to cover src's (the earliest start, the latest end); its period is src's
 * when dst has none. src is not changed. Returns 0 or a negative errno; on
 * -ENOMEM dst holds some of src's samples (its counts stay consistent with
 * its stacks) and its span is unchanged. */
int profile_merge(struct profile *dst, const struct profile *src);

#endif /* TAIPAN_PROFILE_H */
