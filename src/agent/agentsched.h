/* agentsched.h - when the agent cuts the session's profile, closes a push
 * window, takes its counters and wakes up: arithmetic on a clock that the
 * caller reads and passes in, so that the schedule is tested on a made-up
 * clock (tests/unit/test_agent_parts.c) instead of in real time. */
#ifndef TAIPAN_AGENTSCHED_H
#define TAIPAN_AGENTSCHED_H

#include <stdbool.h>

struct agent_sched {
	double window;	  /* seconds per push window */
	double win_end;	  /* when the current window ends */
	double next_snap; /* when the counters are next copied for /stats */
};

/* What is due at one moment. */
struct agent_due {
	bool cut;	   /* end the session's current piece: a window or a request ends */
	bool close_window; /* push the window and start the next */
	bool snapshot;	   /* copy the counters for /stats */
};

/* The first window starts at now; the first snapshot is due at once. */
void agent_sched_init(struct agent_sched *s, double now, double window);

/* Milliseconds to wait from now until the next thing due (a window's end,
 * a snapshot, or first_request_end, the earliest end of the requests
 * waiting, or a value past all others when none waits), between 0 and
 * max_ms. One millisecond more than the exact time, so that a wake-up
 * never comes just before its deadline. */
int agent_sched_wait_ms(const struct agent_sched *s, double now, double first_request_end,
			int max_ms);

/* What is due at now, and the schedule moved on past it: a window that is
 * over is closed once, however many window lengths the caller was late
 * (the next window keeps the original phase); stopping closes the window
 * and takes a snapshot whatever the time. */
struct agent_due agent_sched_due(struct agent_sched *s, double now, double first_request_end,
				 bool stopping);

#endif /* TAIPAN_AGENTSCHED_H */
