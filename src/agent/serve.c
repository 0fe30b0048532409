/* serve.c - the agent's HTTP server as one of its sinks: a request for
 * /debug/pprof/profile or /debug/pprof/wall waits for the seconds it asked
 * for, collecting the pieces of the session's profile cut in them, and is
 * answered with their sum as pprof. The server itself, its other endpoints
 * and who may use it are httpd.c's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/serve.h"
#include "output/output.h"

#define MAX_WAITING 8	 /* profile requests at once */
#define HTTP_DRAIN_S 2.0 /* exiting: for answers to go out */

/* A profile request being aggregated. */
struct waiter {
	struct httpd_req *req;
	struct profile *acc;
	double end; /* mono_seconds() */
};

struct serve {
	struct httpd *h; /* NULL: not started, or stopped */
	struct waiter waiters[MAX_WAITING];
	unsigned int nwaiters;
	struct httpd_counts final; /* once stopped */
};

/* Answers r with text, status. */
static void reply_text(struct serve *sv, struct httpd_req *r, unsigned int status, const char *text)
{
	char *msg = strdup(text);
	httpd_reply(sv->h, r, status, "text/plain; charset=utf-8", msg, msg ? strlen(msg) : 0);
}

static void answer(struct serve *sv, struct waiter *w)
{
	char *data;
	size_t len;
	/* /debug/pprof/profile is Go's CPU profile whatever the agent
	 * records: of a wall-clock profile, the samples on the CPU. */
	struct profile *cpu = NULL;
	if (profile_weighted(w->acc) && !httpd_req_wall(w->req) &&
	    !(cpu = profile_cpu_view(w->acc))) {
		profile_free(w->acc);
		w->acc = NULL;
		reply_text(sv, w->req, 503, "out of memory\n");
		return;
	}
	int err = output_encode_memory(cpu ? cpu : w->acc, output_write_pprof, NULL, &data, &len);
	profile_free(cpu);
	profile_free(w->acc);
	w->acc = NULL;
	if (err) {
		reply_text(sv, w->req, 500, "cannot encode the profile\n");
		return;
	}
	httpd_reply(sv->h, w->req, 200, NULL, data, len);
}

static void serve_take(void *impl, double now, struct sink_loop *l)
{
	struct serve *sv = impl;
	struct httpd_req *r;
	while ((r = httpd_take(sv->h))) {
		/* The server lets no more than MAX_WAITING wait; this is a guard. */
		struct profile *acc = sv->nwaiters < MAX_WAITING ? profile_new() : NULL;
		if (!acc) {
			reply_text(sv, r, 503, "busy\n");
			continue;
		}
		/* The request covers from now: cut before it joins. */
		l->cut(l);
		sv->waiters[sv->nwaiters++] =
		    (struct waiter){.req = r, .acc = acc, .end = now + httpd_req_seconds(r)};
	}
}

static void serve_piece(void *impl, const struct profile *piece, struct sink_loop *l)
{
	struct serve *sv = impl;
	for (unsigned int i = 0; i < sv->nwaiters; i++)
		l->merge(l, sv->waiters[i].acc, piece);
}

/* The earliest end of the requests waiting, or +infinity. */
static double serve_next_end(void *impl)
{
	const struct serve *sv = impl;
	double first = INFINITY;
	for (unsigned int i = 0; i < sv->nwaiters; i++)
		if (sv->waiters[i].end < first)
			first = sv->waiters[i].end;
	return first;
}

/* Requests whose client has gone: their slots are free at once. */
static void drop_gone(struct serve *sv)
{
	for (unsigned int i = 0; i < sv->nwaiters;) {
		if (httpd_req_gone(sv->waiters[i].req)) {
			profile_free(sv->waiters[i].acc);
			httpd_abandon(sv->h, sv->waiters[i].req);
			sv->waiters[i] = sv->waiters[--sv->nwaiters];
		} else {
			i++;
		}
	}
}

static void serve_due(void *impl, double now, bool stopping)
{
	struct serve *sv = impl;
	drop_gone(sv);
	for (unsigned int i = 0; i < sv->nwaiters;) {
		if (stopping || sv->waiters[i].end <= now) {
			answer(sv, &sv->waiters[i]);
			sv->waiters[i] = sv->waiters[--sv->nwaiters];
		} else {
			i++;
		}
	}
	httpd_tick(sv->h);
}

/* On the server's thread, which the server's counts are locked for. */
static int serve_stats(void *impl, json_t *o)
{
	struct serve *sv = impl;
	struct httpd_counts hc = sv->final;
	int bad = 0;
	if (sv->h)
		httpd_counts(sv->h, &hc);
	bad |=
	    json_object_set_new(o, "profile_requests_served", json_integer((json_int_t)hc.served));
	bad |= json_object_set_new(o, "profile_requests_refused",
				   json_integer((json_int_t)hc.refused));
	bad |= json_object_set_new(o, "profile_requests_waiting", json_integer(hc.waiting));
	bad |= json_object_set_new(o, "profile_requests_abandoned",
				   json_integer((json_int_t)hc.abandoned));
	bad |= json_object_set_new(o, "requests_denied", json_integer((json_int_t)hc.denied));
	bad |= json_object_set_new(o, "connections_cut", json_integer((json_int_t)hc.cut));
	bad |= json_object_set_new(o, "connections_refused",
				   json_integer((json_int_t)hc.refused_conns));
	bad |= json_object_set_new(o, "connections_evicted", json_integer((json_int_t)hc.evicted));
	bad |=
	    json_object_set_new(o, "accept_failures", json_integer((json_int_t)hc.accept_failures));
	return bad ? -1 : 0;
}

static void serve_totals(void *impl, char *words, size_t wlen, char *line, size_t llen)
{
	const struct httpd_counts *hc = &((struct serve *)impl)->final;
	snprintf(words, wlen,
		 "; %lu profile requests served, %lu refused, %lu abandoned; %lu requests "
		 "denied, %lu connections cut",
		 hc->served, hc->refused, hc->abandoned, hc->denied, hc->cut);
	snprintf(line, llen,
		 "%lu connections refused, %lu idle ones closed to make room, %lu accept "
		 "failures",
		 hc->refused_conns, hc->evicted, hc->accept_failures);
}

/* The counts as of the stop: what the answers sent while draining do not
 * change. */
static void serve_stop(void *impl, bool drain)
{
	struct serve *sv = impl;
	if (!sv->h)
		return;
	httpd_counts(sv->h, &sv->final);
	httpd_stop(sv->h, drain ? HTTP_DRAIN_S : 0);
	sv->h = NULL;
}

static void serve_free(void *impl)
{
	struct serve *sv = impl;
	serve_stop(sv, false);
	for (unsigned int i = 0; i < sv->nwaiters; i++)
		profile_free(sv->waiters[i].acc);
	free(sv);
}

static const struct sink_ops serve_ops = {
    .take = serve_take,
    .piece = serve_piece,
    .next_end = serve_next_end,
    .due = serve_due,
    .stats = serve_stats,
    .totals = serve_totals,
    .stop = serve_stop,
    .free = serve_free,
};

int serve_sink_new(struct sink *out)
{
	struct serve *sv = calloc(1, sizeof(*sv));
	if (!sv)
		return -ENOMEM;
	*out = (struct sink){.ops = &serve_ops, .impl = sv};
	return 0;
}

int serve_start(const struct sink *s, const struct httpd_opts *o, char *err, size_t errlen)
{
	struct serve *sv = s->impl;
	struct httpd_opts ho = *o;
	ho.max_waiting = MAX_WAITING;
	return httpd_start(&ho, &sv->h, err, errlen);
}

const char *serve_address(const struct sink *s)
{
	const struct serve *sv = s->impl;
	return sv->h ? httpd_address(sv->h) : "";
}
