/* agent.h - the always-on agent's loop: it samples with a session, cuts the
 * session's profile wherever a window or a sink's span starts or ends, and
 * gives the pieces and the windows to its sinks (agent/sink.h). */
#ifndef TAIPAN_AGENT_H
#define TAIPAN_AGENT_H

#include <signal.h>
#include <stdbool.h>

#include "agent/sink.h"
#include "core/session.h"

/* The sinks an agent takes at most. */
#define AGENT_MAX_SINKS 4

struct agent_opts {
	double window;	   /* seconds per window */
	unsigned int rate; /* the sampling rate, for /stats */
	const char *log;   /* --log: reopened on SIGHUP; NULL: none */
	bool stats;	   /* --stats: log the counters at exit */
	/* Set by the signal handlers: the stop signal (SIGTERM, SIGINT), and
	 * SIGHUP. */
	volatile sig_atomic_t *stop_signal, *hup;
};

struct agent;

/* An agent sampling with s (started or not; the caller keeps it and frees
 * it after the agent). Its uptime counts from now. 0 or -ENOMEM. */
int agent_new(const struct agent_opts *o, struct session *s, struct agent **out);

/* Gives sk to a: its pieces and windows, /stats and --stats list it in the
 * order the sinks were added, and agent_run stops them in the opposite
 * order. Add every sink before any of them serves /stats. a owns sk from
 * then on, also on failure (-ENOSPC past AGENT_MAX_SINKS). */
int agent_add_sink(struct agent *a, struct sink sk);

/* GET /stats (httpd_opts.stats_json, with the agent as ctx): the agent's
 * counters as of its last snapshot, then each sink's. JSON text from
 * malloc, or NULL. On the server's thread. */
char *agent_stats_json(void *agent);

/* Runs until a stop signal or a failure to read samples; then ends the
 * spans waiting with what they have, closes the window, stops the sinks
 * with drain (the last one added first), logs the counters (with stats)
 * and why it exits. Returns the exit status: 0 after a signal, 1 after a
 * failure. */
int agent_run(struct agent *a);

/* Frees a and its sinks, stopping at once those that still run. NULL is
 * fine. */
void agent_free(struct agent *a);

#endif /* TAIPAN_AGENT_H */
