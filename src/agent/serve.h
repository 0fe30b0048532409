/* serve.h - the agent's HTTP server as a sink (agent/sink.h): profile
 * requests are its spans, answered with what was sampled in them. */
#ifndef TAIPAN_SERVE_H
#define TAIPAN_SERVE_H

#include <stddef.h>

#include "agent/httpd.h"
#include "agent/sink.h"

/* The sink, not serving yet: add it to the agent first, so that GET /stats
 * has it from the server's first request on. 0 or -ENOMEM. */
int serve_sink_new(struct sink *out);

/* Starts serving as o says (httpd_start; the sink sets max_waiting). s is
 * what serve_sink_new() made. Returns 0, or a negative errno with err
 * filled. Stopping the sink with drain gives the answers up to 2 s to go
 * out. */
int serve_start(const struct sink *s, const struct httpd_opts *o, char *err, size_t errlen);

/* The address it serves on (httpd_address), "" before it does. */
const char *serve_address(const struct sink *s);

#endif /* TAIPAN_SERVE_H */
