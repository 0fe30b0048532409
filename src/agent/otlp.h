/* otlp.h - the agent's windows to an OpenTelemetry profiles receiver over
 * HTTP (OTLP/HTTP, binary protobuf, gzip), with push.c's queue, backlog and
 * retries. */
#ifndef TAIPAN_OTLP_H
#define TAIPAN_OTLP_H

#include <stddef.h>

#include "agent/sink.h"

/* The path of the profiles signal under the receiver's URL. */
#define OTLP_PROFILES_PATH "/v1development/profiles"
/* Header lines a --otlp-headers-file may hold, at most. */
#define OTLP_MAX_HEADERS 32

struct otlp_opts {
	const char *url; /* the receiver: http(s)://HOST[:PORT][/PREFIX] */
	/* Extra request headers, "Key: Value" each (otlp_parse_headers), or
	 * none; copied, and wiped when freed. */
	const char *const *headers;
	size_t nheaders;
	unsigned int backlog;	   /* windows waiting at most, 1 or more */
	unsigned int max_attempts; /* tries per window; 0: PUSH_MAX_ATTEMPTS */
};

/* The OTLP pushes as one of the agent's sinks (agent/sink.h): each window
 * with samples, as an ExportProfilesServiceRequest (output/out_otlp.c),
 * gzipped, POSTed to URL/v1development/profiles from push.c's worker.
 * Stopping it with drain tries what is queued for up to 4 s. Returns 0, or
 * a negative errno with err filled. */
int otlp_sink_new(const struct otlp_opts *o, struct sink *out, char *err, size_t errlen);

/* Pieces, public for their unit tests. */

/* The endpoint: url (trailing slashes dropped) + OTLP_PROFILES_PATH.
 * Returns 0, -EINVAL when url is not one push_check_url() takes, or
 * -ENOSPC when buf is too small. */
int otlp_endpoint(char *buf, size_t len, const char *url);

/* Splits the content of a headers file in place: one "Key: Value" a line
 * (blank lines and lines starting with '#' skipped, "\r\n" taken), Key a
 * token of HTTP (letters, digits and !#$%&'*+-.^_`|~), Value without
 * control characters, at most max lines. The headers taipan sets itself
 * (Content-Type, Content-Encoding, Content-Length, Host, Expect,
 * Transfer-Encoding) are refused. lines[i] point into text, each line
 * "Key: Value" with the spaces around Value trimmed to one before it
 * ("Key:Value" when there was none). Returns 0 with *n set,
 * or -EINVAL with why filled ("line 3: ..."). */
int otlp_parse_headers(char *text, char **lines, size_t max, size_t *n, char *why, size_t whylen);

#endif /* TAIPAN_OTLP_H */
