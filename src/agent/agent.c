/* agent.c - the agent's loop.
 *
 * One thread samples: it polls the session and cuts the session's profile
 * (session_take_profile) at every window boundary and wherever a sink's
 * span starts or ends (an HTTP request's seconds), and gives each piece to
 * the sinks, which add it to whatever covers it, and to the window being
 * aggregated when a sink takes windows (the pushes). The pieces are cut
 * exactly at those moments, so a request gets the samples of its own
 * seconds, and no history is kept. The sinks do their waiting on the
 * network on threads of their own (libmicrohttpd's, the pusher's), so
 * neither a slow client nor a dead server holds up sampling.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/agentlog.h"
#include "agent/agentsched.h"
#include "core/walkerr.h"
#include "util/clock.h"

#define POLL_MAX_MS 100 /* the longest the loop sleeps: signals and new requests */

/* Counters that /stats reads on the server's thread: the loop copies them
 * here once a second. */
struct snapshot {
	struct session_stats st;
	unsigned int live;
	uint64_t windows, empty_windows;
};

struct agent {
	struct sink_loop loop; /* what the sinks call back; first, for agent_of() */
	struct agent_opts o;
	struct session *s;
	double t0;
	struct sink sinks[AGENT_MAX_SINKS];
	unsigned int nsinks;
	bool windowed; /* a sink takes windows: they are aggregated */

	struct profile *win; /* the window being aggregated; NULL: nothing yet */
	uint64_t windows, empty_windows;
	bool cut_done;				    /* this turn */
	bool merge_failed, cut_failed, poll_failed; /* logged once */

	pthread_mutex_t mu;
	struct snapshot snap;
};

static struct agent *agent_of(struct sink_loop *l)
{
	return (struct agent *)((char *)l - offsetof(struct agent, loop));
}

/* --- profiles ------------------------------------------------------------------ */

static void merge_into(struct sink_loop *l, struct profile *dst, const struct profile *piece)
{
	struct agent *a = agent_of(l);
	int err = profile_merge(dst, piece);
	if (err && !a->merge_failed) {
		a->merge_failed = true;
		agentlog("warning: cannot add samples to a profile (%s): it will miss some; "
			 "said once",
			 strerror(-err));
	}
}

/* Ends the session's current piece now and adds it to everything that
 * covers it: once a turn. */
static void cut(struct sink_loop *l)
{
	struct agent *a = agent_of(l);
	if (a->cut_done)
		return;
	a->cut_done = true;
	/* What the ring buffer holds belongs before the cut. */
	int ret = session_poll(a->s, 0);
	if (ret && !a->poll_failed) {
		a->poll_failed = true;
		agentlog("warning: reading samples before a cut: %s; the profile may miss "
			 "some; said once",
			 strerror(-ret));
	}
	struct profile *piece = session_take_profile(a->s);
	if (!piece) {
		/* The session keeps aggregating; the next cut takes it. */
		if (!a->cut_failed) {
			a->cut_failed = true;
			agentlog("warning: out of memory cutting the profile; said once");
		}
		return;
	}
	for (unsigned int i = 0; i < a->nsinks; i++)
		if (a->sinks[i].ops->piece)
			a->sinks[i].ops->piece(a->sinks[i].impl, piece, l);
	if (a->windowed && !a->win) {
		a->win = piece; /* the usual case: a window is one piece */
		return;
	}
	if (a->windowed)
		merge_into(l, a->win, piece);
	profile_free(piece);
}

/* The window is over: to the sinks of windows (when it has samples), and
 * the next one starts. */
static void close_window(struct agent *a)
{
	struct profile *w = a->win;
	a->win = NULL;
	a->windows++;
	if (!a->windowed)
		return;
	if (!w || !profile_sample_count(w)) {
		a->empty_windows++;
		profile_free(w);
		return;
	}
	for (unsigned int i = 0; i < a->nsinks; i++)
		if (a->sinks[i].ops->window)
			a->sinks[i].ops->window(a->sinks[i].impl, w);
	profile_free(w);
}

/* --- counters ------------------------------------------------------------------ */

static void take_snapshot(struct agent *a)
{
	struct snapshot sn;
	session_stats(a->s, &sn.st);
	sn.live = session_live_targets(a->s);
	sn.windows = a->windows;
	sn.empty_windows = a->empty_windows;
	pthread_mutex_lock(&a->mu);
	a->snap = sn;
	pthread_mutex_unlock(&a->mu);
}

/* A session counter into o as key, unless key is NULL. 0 or -1. */
static int json_counter(json_t *o, const char *key, json_int_t v)
{
	return key ? json_object_set_new(o, key, json_integer(v)) : 0;
}

/* A vector of them as an object under key: name(i) for i from first, but
 * for the i that name(i) names none (NULL). */
static int json_vector(json_t *o, const char *key, const uint64_t *v, unsigned int count,
		       unsigned int first, const char *(*name)(unsigned int))
{
	json_t *vo = json_object();
	int bad = !vo;
	for (unsigned int i = first; vo && i < count; i++)
		if (name(i))
			bad |= json_object_set_new(vo, name(i), json_integer((json_int_t)v[i]));
	return bad | (!vo || json_object_set_new(o, key, vo));
}

/* On the server's thread: it reads only what is set before the server
 * starts, the snapshot, and what each sink's stats reads. */
char *agent_stats_json(void *ctx)
{
	struct agent *a = ctx;
	struct snapshot sn;
	char *text = NULL;

	pthread_mutex_lock(&a->mu);
	sn = a->snap;
	pthread_mutex_unlock(&a->mu);

	json_t *o = json_object();
	if (!o)
		return NULL;
	int bad = 0;
	bad |= json_object_set_new(o, "uptime_seconds", json_real(mono_seconds() - a->t0));
	bad |= json_object_set_new(o, "rate_hz", json_integer(a->o.rate));
	bad |= json_object_set_new(o, "window_seconds", json_real(a->o.window));
#define JSON_COUNTER(type, field, key, text) bad |= json_counter(o, key, (json_int_t)sn.st.field);
#define JSON_VECTOR(field, count, first, name, key)                                                \
	bad |= json_vector(o, key, sn.st.field, count, first, name);
	SESSION_SAMPLE_COUNTERS(JSON_COUNTER, JSON_VECTOR)
	SESSION_HELD_COUNTERS(JSON_COUNTER, JSON_VECTOR)
	bad |= json_object_set_new(o, "processes_tracked", json_integer(sn.live));
	SESSION_PROCESS_COUNTERS(JSON_COUNTER, JSON_VECTOR)
	SESSION_OFFCPU_COUNTERS(JSON_COUNTER, JSON_VECTOR)
#undef JSON_COUNTER
#undef JSON_VECTOR
	bad |= json_object_set_new(o, "windows", json_integer((json_int_t)sn.windows));
	bad |= json_object_set_new(o, "windows_empty", json_integer((json_int_t)sn.empty_windows));
	for (unsigned int i = 0; i < a->nsinks; i++)
		if (a->sinks[i].ops->stats)
			bad |= a->sinks[i].ops->stats(a->sinks[i].impl, o);
	if (!bad)
		text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return text;
}

/* --stats, at exit: the sinks are stopped, their counters final. */
static void log_counters(struct agent *a)
{
	struct session_stats st;
	char line[1024], words[256], own[AGENT_MAX_SINKS][256];
	session_stats(a->s, &st);
	agentlog("stats: %.0f s up, %" PRIu64 " samples, %" PRIu64 " lost (ring full), %" PRIu64
		 " lost (process not yet known), %u Python processes seen, %u refused",
		 mono_seconds() - a->t0, st.samples, st.lost_ring, st.lost_unknown, st.processes,
		 st.unsupported);
	size_t n = (size_t)snprintf(line, sizeof(line), "%" PRIu64 " windows (%" PRIu64 " empty)",
				    a->windows, a->empty_windows);
	for (unsigned int i = 0; i < a->nsinks; i++) {
		words[0] = own[i][0] = '\0';
		if (a->sinks[i].ops->totals)
			a->sinks[i].ops->totals(a->sinks[i].impl, words, sizeof(words), own[i],
						sizeof(own[i]));
		if (n < sizeof(line))
			n += (size_t)snprintf(line + n, sizeof(line) - n, "%s", words);
	}
	agentlog("stats: %s", line);
	for (unsigned int i = 0; i < a->nsinks; i++)
		if (own[i][0])
			agentlog("stats: %s", own[i]);
}

/* --- the loop ------------------------------------------------------------------ */

/* The earliest end of the sinks' spans, or +infinity. */
static double first_end(struct agent *a)
{
	double first = INFINITY;
	for (unsigned int i = 0; i < a->nsinks; i++) {
		if (!a->sinks[i].ops->next_end)
			continue;
		double end = a->sinks[i].ops->next_end(a->sinks[i].impl);
		if (end < first)
			first = end;
	}
	return first;
}

static void reopen_log(struct agent *a)
{
	if (!a->o.log) {
		agentlog("SIGHUP: no --log file to reopen");
		return;
	}
	char why[512];
	if (agentlog_redirect(a->o.log, why, sizeof(why)))
		agentlog("SIGHUP: cannot reopen the log: %s; logging on to the old file", why);
	else
		agentlog("SIGHUP: reopened the log file %s", a->o.log);
}

int agent_run(struct agent *a)
{
	struct agent_sched sched;
	double now = mono_seconds();
	int status = 0;

	agent_sched_init(&sched, now, a->o.window);
	for (;;) {
		int wait_ms = agent_sched_wait_ms(&sched, now, first_end(a), POLL_MAX_MS);
		int ret = session_poll(a->s, wait_ms);
		if (ret) {
			agentlog("error: reading samples: %s; exiting", strerror(-ret));
			status = 1;
		}
		if (*a->o.hup) {
			*a->o.hup = 0;
			reopen_log(a);
		}
		now = mono_seconds();
		bool stopping = *a->o.stop_signal || status;
		struct agent_due due = agent_sched_due(&sched, now, first_end(a), stopping);
		a->cut_done = false;
		if (due.cut)
			cut(&a->loop);
		for (unsigned int i = 0; i < a->nsinks; i++)
			if (a->sinks[i].ops->take)
				a->sinks[i].ops->take(a->sinks[i].impl, now, &a->loop);
		for (unsigned int i = 0; i < a->nsinks; i++)
			if (a->sinks[i].ops->due)
				a->sinks[i].ops->due(a->sinks[i].impl, now, stopping);
		if (due.close_window)
			close_window(a);
		if (due.snapshot)
			take_snapshot(a);
		if (stopping)
			break;
	}

	const char *why = *a->o.stop_signal == SIGTERM	? "SIGTERM"
			  : *a->o.stop_signal == SIGINT ? "SIGINT"
							: "an error";
	/* The last added first: the server's answers go out, while the
	 * pusher already sends the last window, before the pushes left are
	 * tried. */
	for (unsigned int i = a->nsinks; i-- > 0;)
		if (a->sinks[i].ops->stop)
			a->sinks[i].ops->stop(a->sinks[i].impl, true);
	if (a->o.stats)
		log_counters(a);
	agentlog("exiting on %s after %.0f s, %" PRIu64 " windows", why, mono_seconds() - a->t0,
		 a->windows);
	return status;
}

int agent_new(const struct agent_opts *o, struct session *s, struct agent **out)
{
	struct agent *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->loop = (struct sink_loop){.cut = cut, .merge = merge_into};
	a->o = *o;
	a->s = s;
	a->t0 = mono_seconds();
	pthread_mutex_init(&a->mu, NULL);
	*out = a;
	return 0;
}

int agent_add_sink(struct agent *a, struct sink sk)
{
	if (a->nsinks == AGENT_MAX_SINKS) {
		sk.ops->free(sk.impl);
		return -ENOSPC;
	}
	a->sinks[a->nsinks++] = sk;
	a->windowed |= sk.ops->window != NULL;
	return 0;
}

void agent_free(struct agent *a)
{
	if (!a)
		return;
	for (unsigned int i = a->nsinks; i-- > 0;)
		a->sinks[i].ops->free(a->sinks[i].impl);
	profile_free(a->win);
	pthread_mutex_destroy(&a->mu);
	free(a);
}
