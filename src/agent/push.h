/* push.h - sending the agent's windows to a server over HTTP, from a
 * worker thread, with a bounded backlog and retries with backoff: to
 * Pyroscope's ingest API (push_sink_new), or as they are to one URL (the
 * OTLP sink, otlp.c). */
#ifndef TAIPAN_PUSH_H
#define TAIPAN_PUSH_H

#include <stddef.h>
#include <stdint.h>

#include "agent/sink.h"

/* How many times one window is tried before it is dropped. */
#define PUSH_MAX_ATTEMPTS 6
/* The longest wait between two tries of a window, in seconds. */
#define PUSH_MAX_BACKOFF 30.0

/* What a pusher sends. */
enum push_kind {
	/* POST URL/ingest?name=...: the window in a multipart form, as
	 * Pyroscope's ingest API takes pprof (name and rate_hz). */
	PUSH_PYROSCOPE = 0,
	/* POST URL: the window's bytes as the body, with headers. */
	PUSH_BODY,
};

struct push_opts {
	enum push_kind kind;
	const char *url; /* the server: http(s)://HOST[:PORT][/PREFIX], no user or password */
	/* HTTP Basic authentication: both, or NULL; copied (and wiped when
	 * freed). */
	const char *user, *password;
	const char *name;	   /* PUSH_PYROSCOPE: the ingest name, from push_app_name() */
	unsigned int rate_hz;	   /* PUSH_PYROSCOPE: sent as sampleRate */
	unsigned int backlog;	   /* windows waiting at most, 1 or more */
	unsigned int max_attempts; /* tries per window; 0: PUSH_MAX_ATTEMPTS */
	/* PUSH_BODY: the request's header lines ("Content-Type: ..."), copied
	 * (and wiped when freed: they may hold a token). */
	const char *const *headers;
	size_t nheaders;
	/* What the log lines call these pushes: "push" when NULL. */
	const char *what;
};

struct push_stats {
	uint64_t pushed;   /* windows the server accepted */
	uint64_t failures; /* failed tries (each is logged) */
	uint64_t dropped;  /* windows given up: backlog full, out of tries, or exiting */
	unsigned int waiting;
};

struct pusher;

/* Checks the options and starts the worker thread. The calling thread
 * should block the signals it handles first: the worker inherits its mask.
 * Returns 0, or a negative errno with err filled. */
int push_new(const struct push_opts *o, struct pusher **out, char *err, size_t errlen);

/* Queues a window (gzipped pprof, data from malloc) covering the Unix
 * seconds [from, until]; the pusher owns data from then on, also on error.
 * Never blocks on the network: when the backlog is full the oldest waiting
 * window is dropped, counted and logged. Returns 0 or a negative errno. */
int push_submit(struct pusher *p, void *data, size_t len, uint64_t from, uint64_t until);

void push_get_stats(struct pusher *p, struct push_stats *st);

/* Tries what is still queued once more each, without backoff, for at most
 * flush_s seconds in all (a transfer in progress is cut at that deadline),
 * drops and counts the rest, stops the worker and frees. The final counters
 * go to *final when it is not NULL. Accepts NULL. */
void push_free(struct pusher *p, double flush_s, struct push_stats *final);

/* The pushes as one of the agent's sinks (agent/sink.h): push_new(o), and
 * each window with samples, as gzipped pprof (of a wall-clock window, its
 * samples on the CPU), queued for the server. Stopping it with drain tries
 * what is queued for up to 4 s. o NULL: no pushes; the sink then only puts
 * push_enabled false and zeros in /stats, as the counters' names stay.
 * Returns 0, or a negative errno with err filled. */
int push_sink_new(const struct push_opts *o, struct sink *out, char *err, size_t errlen);

/* Pieces, public for their unit tests. */

/* The ingest name APP{hostname=HOST}: the application name, which must be
 * 1 to 100 of [A-Za-z0-9._-] (-EINVAL otherwise), and the host name with
 * every other character made '_' (no label when host is NULL or empty).
 * Returns 0, -EINVAL, or -ENOSPC when buf is too small. */
int push_app_name(char *buf, size_t len, const char *app, const char *host);

/* Checks a --push URL: http:// or https://, a host, no query or fragment.
 * Returns 0 or -EINVAL. A user name or password in it is -EPERM: every user
 * could read them in ps, and they would be written to the log. */
int push_check_url(const char *url);

/* url for a message: any user name and password before the host become
 * three asterisks (http: then two slashes, the asterisks, "@host:4040"),
 * whatever else url holds. Cut to fit buf (always terminated). */
void push_redact_url(char *buf, size_t len, const char *url);

/* Splits the content of a credentials file, "USER:PASSWORD" on one line
 * (final newlines dropped), in place: *user and *password point into text.
 * Returns 0, or -EINVAL when there is no ':', the user name is empty, or a
 * control character is in either. */
int push_parse_credentials(char *text, char **user, char **password);

/* The ingest request's URL: base (trailing slashes dropped) + "/ingest?"
 * with name (percent-encoded), from, until, spyName=taipan, sampleRate and
 * format=pprof. Returns 0, -ENOSPC when buf is too small, or -ENOMEM. */
int push_ingest_url(char *buf, size_t len, const char *base, const char *name, uint64_t from,
		    uint64_t until, unsigned int rate_hz);

/* Seconds to wait after the failures-th failed try in a row (1 or more):
 * 1, 2, 4, … up to PUSH_MAX_BACKOFF, scaled by 0.75 + jitter / 2 with jitter
 * in [0, 1) so that agents that failed together do not retry together. */
double push_backoff(unsigned int failures, double jitter);

#endif /* TAIPAN_PUSH_H */
