/* httpd.h - the agent's HTTP endpoints (libmicrohttpd, one thread):
 * GET /debug/pprof/profile?seconds=N, GET /stats and GET /healthz. */
#ifndef TAIPAN_HTTPD_H
#define TAIPAN_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* The range of ?seconds= (Go's net/http/pprof default when absent: 30). */
#define HTTPD_DEFAULT_SECONDS 30
#define HTTPD_MAX_SECONDS 300

struct httpd_opts {
	const char *listen;	  /* "ADDR:PORT" or "[ADDR6]:PORT"; port 0 picks one */
	unsigned int max_waiting; /* profile requests waiting at once; more get 503 */
	/* GET /stats: called on the server's thread with the server's own
	 * counts (profile requests served and refused); returns JSON text from
	 * malloc, or NULL (500). */
	char *(*stats_json)(void *ctx, unsigned long served, unsigned long refused);
	void *ctx;
};

struct httpd;
/* A profile request waiting for its seconds. Its connection is suspended
 * until httpd_reply(). */
struct httpd_req;

/* Binds and starts serving. The calling thread should block the signals it
 * handles first: the server's thread inherits its mask. Returns 0, or a
 * negative errno with err filled. */
int httpd_start(const struct httpd_opts *o, struct httpd **out, char *err, size_t errlen);

/* The address bound, "127.0.0.1:9100" (with the port picked for port 0). */
const char *httpd_address(const struct httpd *h);

/* The next profile request that arrived since the last call, or NULL. The
 * caller must httpd_reply() to each one it takes. */
struct httpd_req *httpd_take(struct httpd *h);
unsigned int httpd_req_seconds(const struct httpd_req *r);

/* Answers r with status and body (from malloc, len bytes; owned by the
 * server from then on, also when the client has gone). ctype NULL: pprof,
 * sent as application/octet-stream like Go's handler does. r is gone after. */
void httpd_reply(struct httpd *h, struct httpd_req *r, unsigned int status, const char *ctype,
		 void *body, size_t len);

/* Profile requests answered so far, and refused (busy, bad arguments). */
void httpd_counts(struct httpd *h, unsigned long *served, unsigned long *refused);

/* Stops: profile requests not taken yet get 503, new ones too; waits up to
 * wait_s seconds for the answers in flight to be sent, then closes every
 * connection and frees. Accepts NULL. */
void httpd_stop(struct httpd *h, double wait_s);

/* Pieces, public for their unit tests. */

/* Parses "ADDR:PORT" (IPv4, "localhost") or "[ADDR6]:PORT", numeric only.
 * Returns 0 or -EINVAL. */
int httpd_parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *len);

/* Parses ?seconds=: NULL or "" is HTTPD_DEFAULT_SECONDS, otherwise a whole
 * number from 1 to HTTPD_MAX_SECONDS. Returns 0 or -EINVAL. */
int httpd_parse_seconds(const char *arg, unsigned int *out);

#endif /* TAIPAN_HTTPD_H */
