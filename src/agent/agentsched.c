/* agentsched.c - the agent's schedule (agentsched.h). */
#include "agent/agentsched.h"

/* Counters for /stats are copied this often. */
#define SNAPSHOT_EVERY_S 1.0

void agent_sched_init(struct agent_sched *s, double now, double window)
{
	s->window = window;
	s->win_end = now + window;
	s->next_snap = now;
}

int agent_sched_wait_ms(const struct agent_sched *s, double now, double first_request_end,
			int max_ms)
{
	double next = s->win_end < s->next_snap ? s->win_end : s->next_snap;
	if (first_request_end < next)
		next = first_request_end;
	double ms = (next - now) * 1000 + 1;
	if (ms < 0)
		return 0;
	return ms > max_ms ? max_ms : (int)ms;
}

struct agent_due agent_sched_due(struct agent_sched *s, double now, double first_request_end,
				 bool stopping)
{
	struct agent_due d = {0};
	d.close_window = now >= s->win_end || stopping;
	/* One cut serves everything that starts or ends now. */
	d.cut = d.close_window || first_request_end <= now;
	d.snapshot = now >= s->next_snap || stopping;
	if (now >= s->win_end)
		while (s->win_end <= now)
			s->win_end += s->window;
	if (d.snapshot)
		s->next_snap = now + SNAPSHOT_EVERY_S;
	return d;
}
