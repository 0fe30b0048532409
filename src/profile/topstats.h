/* topstats.h - what `taipan top` shows: per function, the samples in which
 * it is the innermost frame (own) and those in which it appears at all
 * (total), over a window of a growing profile, optionally for one thread.
 *
 * The profile only grows (its counts never go down, its sample indexes stay
 * put), so a window is the difference between the counts now and the
 * counts at a snapshot: taken at the last reset, or a fixed number of ticks
 * ago for a sliding window.
 *
 * Counts are the profile's values (prof_value()): samples, or in a wall-clock
 * or off-CPU profile nanoseconds, and "samples" below means those. The leaf
 * that says why a thread was off the CPU is not a function: the function
 * under it is the own one, and the state goes in its own_state.
 */
#ifndef TAIPAN_TOPSTATS_H
#define TAIPAN_TOPSTATS_H

#include <stddef.h>
#include <stdint.h>

#include "profile/profile.h"

enum top_sort {
	TOP_SORT_OWN = 0,
	TOP_SORT_TOTAL = 1,
};

/* A function: frames with the same name and file, whatever their line; for
 * native code, with the same name and module. A module's code that no
 * symbol named is one row, "[unnamed]". */
struct top_row {
	const char *name;   /* owned by the profile */
	const char *file;   /* owned by the profile; NULL for native code and markers */
	const char *module; /* native code: its file, owned by the profile; else NULL */
	int first_line;
	uint64_t own;	/* samples in view whose innermost non-kernel frame is this */
	uint64_t total; /* samples in view with this function anywhere (once each) */
	/* own by the thread's state (--mode wall, off-cpu; else all in
	 * PROF_STATE_NONE) */
	uint64_t own_state[PROF_STATE__COUNT];
};

/* A thread that has samples in the window (whatever the filter). */
struct top_thread {
	uint32_t tid;
	const char *name; /* owned by the profile */
	uint64_t samples;
};

struct topstats;

/* A new view. window is the number of ticks a sliding window spans, or 0 to
 * count from the start (or the last reset). NULL when out of memory. */
struct topstats *topstats_new(unsigned int window);
/* Frees ts. Accepts NULL. */
void topstats_free(struct topstats *ts);

/* Marks a tick (call it once per refresh, before topstats_compute): the
 * sliding window moves on. Returns 0 or -ENOMEM; on error the window stays
 * where it was. */
int topstats_tick(struct topstats *ts, const struct profile *p);

/* Counts from now on only. Returns 0 or -ENOMEM (the view is unchanged). */
int topstats_reset(struct topstats *ts, const struct profile *p);

/* Recomputes the rows from p for thread tid (0: every thread), sorted by
 * sort, largest first. Returns 0 or -ENOMEM. The rows and threads stay
 * valid until the next call, and as long as p lives. */
int topstats_compute(struct topstats *ts, const struct profile *p, uint32_t tid,
		     enum top_sort sort);

/* The rows with samples in view, sorted; *rows is owned by ts. */
size_t topstats_rows(const struct topstats *ts, const struct top_row *const **rows);
/* The threads with samples in the window, by tid; *threads is owned by ts. */
size_t topstats_threads(const struct topstats *ts, const struct top_thread **threads);
/* Samples in view (the thread filter applied) and in the window (all threads). */
uint64_t topstats_view_samples(const struct topstats *ts);
uint64_t topstats_window_samples(const struct topstats *ts);

#endif /* TAIPAN_TOPSTATS_H */
