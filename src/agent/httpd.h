/* httpd.h - the agent's HTTP endpoints (libmicrohttpd's thread, and an acceptor):
 * GET /debug/pprof/profile?seconds=N, GET /stats and GET /healthz, on a
 * Unix socket (peers told apart by uid) or on TCP (with a bearer token). */
#ifndef TAIPAN_HTTPD_H
#define TAIPAN_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

/* The range of ?seconds= (Go's net/http/pprof default when absent: 30). */
#define HTTPD_DEFAULT_SECONDS 30
#define HTTPD_MAX_SECONDS 300

/* A request's head (request line and headers) must be in within this many
 * seconds of the connection's start or of its previous request's end. */
#define HTTPD_HEAD_DEADLINE_S 10
/* More query parameters than this get 400 (see uri_seen in httpd.c). */
#define HTTPD_MAX_ARGS 32
#define HTTPD_MAX_ALLOW_UIDS 32

/* What the server counted. */
struct httpd_counts {
	unsigned long served;	       /* profile requests answered with a profile */
	unsigned long refused;	       /* profile requests refused: busy, bad arguments */
	unsigned long abandoned;       /* profile requests whose client left before the end */
	unsigned long denied;	       /* requests without the token, or from a uid not allowed */
	unsigned long cut;	       /* connections closed at the head deadline */
	unsigned long refused_conns;   /* connections refused at accept (uid, limits) */
	unsigned long evicted;	       /* idle connections closed to make room */
	unsigned long accept_failures; /* accept() failed (out of descriptors) */
	unsigned int waiting;	       /* profile requests waiting now */
};

struct httpd_opts {
	/* TCP: "ADDR:PORT" or "[ADDR6]:PORT"; port 0 picks one. NULL: the Unix
	 * socket at socket_path, created mode 0600 (0666 with allow_uids: every
	 * peer's uid is checked as it is accepted instead) in a directory that
	 * only root (or the agent's user) may write, made 0755 when missing. */
	const char *listen;
	const char *socket_path;
	/* Unix socket: the uids let in besides root and the agent's own. */
	const uid_t *allow_uids;
	unsigned int nallow_uids;
	/* Every request must carry "Authorization: Bearer TOKEN"; NULL: none. */
	const char *token;
	unsigned int max_waiting; /* profile requests waiting at once; more get 503 */
	/* GET /debug/pprof/wall is served (the agent's --mode wall or
	 * off-cpu); else it gets 404, which says how to have it. */
	bool wall;
	/* GET /stats: called on the server's thread; returns JSON text from
	 * malloc, or NULL (500). The server's own counts are httpd_counts(). */
	char *(*stats_json)(void *ctx);
	void *ctx;
};

struct httpd;
/* A profile request waiting for its seconds. Its connection is suspended
 * until httpd_reply(). */
struct httpd_req;

/* Binds and starts serving: libmicrohttpd's thread, and the acceptor's,
 * which accepts each connection and decides who gets a slot (httpd.c).
 * The calling thread should block the signals it handles first: the
 * server's threads inherit its mask. Returns 0, or a negative errno with
 * err filled. */
int httpd_start(const struct httpd_opts *o, struct httpd **out, char *err, size_t errlen);

/* The address bound, "http://127.0.0.1:9100" (with the port picked for
 * port 0) or "unix:/run/taipan/agent.sock". */
const char *httpd_address(const struct httpd *h);

/* The next profile request that arrived since the last call, or NULL. The
 * caller must httpd_reply() to each one it takes. */
struct httpd_req *httpd_take(struct httpd *h);
unsigned int httpd_req_seconds(const struct httpd_req *r);
/* Whether r asked for /debug/pprof/wall (else /debug/pprof/profile). */
bool httpd_req_wall(const struct httpd_req *r);

/* Answers r with status and body (from malloc, len bytes; owned by the
 * server from then on, also when the client has gone). ctype NULL: pprof,
 * sent as application/octet-stream like Go's handler does. r is gone after. */
void httpd_reply(struct httpd *h, struct httpd_req *r, unsigned int status, const char *ctype,
		 void *body, size_t len);

/* Whether r's client has closed its connection (or its sending half, as
 * Go's server takes it too): nobody waits for the answer. */
bool httpd_req_gone(const struct httpd_req *r);

/* Gives up r, whose client has gone: its slot is free at once. r is gone
 * after. */
void httpd_abandon(struct httpd *h, struct httpd_req *r);

/* Closes the connections whose request head is late, and logs the counts
 * of rate-limited lines that are due. Call it often (every 100 ms). */
void httpd_tick(struct httpd *h);

void httpd_counts(struct httpd *h, struct httpd_counts *c);

/* Stops: profile requests not taken yet get 503, new ones too; waits up to
 * wait_s seconds for the answers in flight to be sent, then closes every
 * connection, removes the Unix socket and frees. Accepts NULL. */
void httpd_stop(struct httpd *h, double wait_s);

/* Pieces, public for their unit tests. */

/* Parses "ADDR:PORT" (IPv4, "localhost") or "[ADDR6]:PORT", numeric only.
 * Returns 0 or -EINVAL. */
int httpd_parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *len);

/* Parses ?seconds=: NULL or "" is HTTPD_DEFAULT_SECONDS, otherwise a whole
 * number from 1 to HTTPD_MAX_SECONDS. Returns 0 or -EINVAL. */
int httpd_parse_seconds(const char *arg, unsigned int *out);

/* Whether the Authorization header value auth is "Bearer TOKEN" (the scheme
 * in any case) with token, compared in a time that depends on token's
 * length only. NULL auth: false. */
bool httpd_bearer_ok(const char *auth, const char *token);

#endif /* TAIPAN_HTTPD_H */
