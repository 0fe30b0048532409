/* agentlog.h - the agent's event log: one timestamped line per event, on
 * stderr or in a log file that SIGHUP reopens. */
#ifndef TAIPAN_AGENTLOG_H
#define TAIPAN_AGENTLOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* Opens path for appending (creating it 0640) and makes it the process's
 * stderr, so that every message, the agent's and the library's, lands in
 * it. Called again after the file was renamed, it starts a new file and the
 * old descriptor is closed. The file must be a regular file of root's (or
 * the agent's user's) with one link, and path no symbolic link
 * (safefile_open). Returns 0, or a negative errno with err filled; stderr
 * is then unchanged. */
int agentlog_redirect(const char *path, char *err, size_t errlen);

/* Writes "2024-05-01T12:00:00.123Z taipan: MESSAGE\n" to stderr in one
 * write, so that lines from several threads never interleave. */
void agentlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Formats the line agentlog writes for the wall-clock time ts into buf
 * (always terminated, cut to fit). Returns its length. */
size_t agentlog_format(char *buf, size_t len, const struct timespec *ts, const char *msg);

/* Rate-limited lines, for events a client can cause at will (a refused
 * connection, a bad token): the first of a kind is logged, those of the
 * same kind in the next every_s seconds are only counted, and the count is
 * logged as "N more like this" once that time is over (by the next one of
 * the kind, or by agentlog_limiter_flush). At most AGENTLOG_KINDS kinds are
 * told apart; a new kind takes the slot of the one quiet longest. */
#define AGENTLOG_KINDS 16
struct agentlog_kind {
	const char *key; /* NULL: free */
	double last;	 /* CLOCK_MONOTONIC seconds of the last line */
	unsigned long more;
	char msg[256]; /* the latest message counted */
};
struct agentlog_limiter {
	pthread_mutex_t mu;
	double every;
	struct agentlog_kind kinds[AGENTLOG_KINDS];
};

void agentlog_limiter_init(struct agentlog_limiter *l, double every_s);
/* Logs the message unless one of kind key (compared as a string; it must
 * outlive the limiter, a literal) was logged less than every_s ago. */
void agentlog_limited(struct agentlog_limiter *l, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Logs the counts whose quiet time is over (all: every count). */
void agentlog_limiter_flush(struct agentlog_limiter *l, bool all);
/* Flushes every count and frees. */
void agentlog_limiter_destroy(struct agentlog_limiter *l);

#endif /* TAIPAN_AGENTLOG_H */
