/* agentlog.h - the agent's event log: one timestamped line per event, on
 * stderr or in a log file that SIGHUP reopens. */
#ifndef TAIPAN_AGENTLOG_H
#define TAIPAN_AGENTLOG_H

#include <stddef.h>
#include <time.h>

/* Opens path for appending (creating it 0640) and makes it the process's
 * stderr, so that every message, the agent's and the library's, lands in
 * it. Called again after the file was renamed, it starts a new file and the
 * old descriptor is closed. Returns 0 or a negative errno; stderr is then
 * unchanged. */
int agentlog_redirect(const char *path);

/* Writes "2024-05-01T12:00:00.123Z taipan: MESSAGE\n" to stderr in one
 * write, so that lines from several threads never interleave. */
void agentlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Formats the line agentlog writes for the wall-clock time ts into buf
 * (always terminated, cut to fit). Returns its length. */
size_t agentlog_format(char *buf, size_t len, const struct timespec *ts, const char *msg);

#endif /* TAIPAN_AGENTLOG_H */
