/* sink.h - where the agent's profiles go: a table of operations, as
 * core/sampler.h is for the session's sampler.
 *
 * The agent's loop (agent.c) samples, cuts the session's profile into
 * pieces where a window or a span of a sink starts or ends, and gives each
 * piece to the sinks. A sink takes whole windows (the pushes to Pyroscope,
 * push.c), or times spans of its own and collects the pieces they cover
 * (the HTTP profile endpoints, serve.c: a request wants the next N
 * seconds), or both. Another exporter is one more sink. */
#ifndef TAIPAN_SINK_H
#define TAIPAN_SINK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "profile/profile.h"

/* What the loop lends a sink in a turn. */
struct sink_loop {
	/* Ends the session's current piece now and gives it to every sink,
	 * unless this turn cut already: a span that starts now covers only
	 * what comes after. */
	void (*cut)(struct sink_loop *l);
	/* Adds piece to dst. A failure is logged, once for the whole agent:
	 * dst then misses those samples. */
	void (*merge)(struct sink_loop *l, struct profile *dst, const struct profile *piece);
};

/* Each operation may be NULL where a sink has no use for it. All are
 * called on the loop's thread but stats, which the server's thread calls
 * for GET /stats at any time from the sink's start on: it reads only what
 * is safe there. */
struct sink_ops {
	/* A window is over and has samples: its profile, the loop's. */
	void (*window)(void *impl, const struct profile *w);
	/* Takes the spans that start now (the requests that came in), calling
	 * l->cut before the first of them joins. */
	void (*take)(void *impl, double now, struct sink_loop *l);
	/* A piece of the session's profile: adds it to every span waiting. */
	void (*piece)(void *impl, const struct profile *piece, struct sink_loop *l);
	/* The earliest end of its spans (mono_seconds()), or INFINITY: the
	 * loop cuts then. */
	double (*next_end)(void *impl);
	/* Ends the spans over by now (every one when stopping) and does what
	 * is due each turn (gone clients, late request heads). */
	void (*due)(void *impl, double now, bool stopping);
	/* Adds its counters to GET /stats's object o. 0, or -1 when out of
	 * memory. */
	int (*stats)(void *impl, json_t *o);
	/* For --stats at exit, after stop: its words on the agent's line of
	 * windows (words, from a separator on), and a line of its own (line),
	 * each "" when it has none. */
	void (*totals)(void *impl, char *words, size_t wlen, char *line, size_t llen);
	/* Stops: with drain, lets what is under way finish within the sink's
	 * own bound (answers sent, last windows pushed); else at once. Its
	 * counters stay for totals. */
	void (*stop)(void *impl, bool drain);
	/* Frees it, stopping it at once first if it still runs. */
	void (*free)(void *impl);
};

struct sink {
	const struct sink_ops *ops;
	void *impl;
};

#endif /* TAIPAN_SINK_H */
