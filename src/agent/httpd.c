/* httpd.c - the agent's HTTP endpoints, on libmicrohttpd's own thread.
 *
 * A profile request waits for the seconds it asked for, so its connection
 * is suspended: it costs a socket and a small struct, no thread. The main
 * loop takes the new requests (httpd_take), cuts the session's profile at
 * their start and end, and answers (httpd_reply), which resumes the
 * connection. Everything a client controls is bounded: connections in all
 * and per address, the memory of a connection (and so the request line and
 * headers), the time its request head may take (from the start, however
 * slowly the bytes trickle in), idle time, how many profile requests may
 * wait at once (a client that leaves frees its slot at once), and the log
 * lines its refusals write.
 *
 * Who may ask: on the Unix socket, root, the agent's own user and the uids
 * allowed (SO_PEERCRED); on TCP, whoever has the bearer token.
 *
 * Connections are accepted here, on a thread of ours (the acceptor), and
 * handed to libmicrohttpd (MHD_add_connection), which has no listening
 * socket: its own accept() would count a connection before anyone could
 * look at it, refuse by its count alone, and spin when accept() fails for
 * want of descriptors with no connection open. The acceptor decides at
 * accept, before a byte is read:
 *
 *  - a uid that may not ask is answered 403 there and then and never holds
 *    a slot (the socket is 0666 with --allow-uid);
 *  - a peer has at most CONN_PER_PEER of the CONN_LIMIT slots: one address
 *    on TCP, one allowed uid on the Unix socket, where the allowed uids
 *    together leave CONN_RESERVED to root and the agent's user;
 *  - when the slots are all taken, an idle connection (no request under
 *    way) is closed to make room: one that never showed the token first,
 *    of the peer that holds the most, the oldest (evict_idle). A local
 *    user can bind any address of 127/8, so per-address counts alone
 *    would not keep the slots for the token's holders;
 *  - accept() failing for want of descriptors (EMFILE, ENFILE) is met with
 *    a descriptor kept in reserve, closed to accept and opened again when
 *    one is free, with a connection idle for SHORT_IDLE_S closed to free
 *    one, and with pauses (ACCEPT_PAUSE_MIN_S doubling up to
 *    ACCEPT_PAUSE_MAX_S) while none is free: never a spin.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/agentlog.h"
#include "agent/httpd.h"
#include "util/clock.h"
#include "util/dynlib.h"

#ifndef MHD_SONAME
#define MHD_SONAME "libmicrohttpd.so.12"
#endif

/* libmicrohttpd, opened by the first httpd_start() (util/dynlib.h). */
#define MHD_FNS(X)                                                                                 \
	X(MHD_, add_connection)                                                                    \
	X(MHD_, add_response_header)                                                               \
	X(MHD_, create_response_from_buffer)                                                       \
	X(MHD_, destroy_response)                                                                  \
	X(MHD_, get_connection_info)                                                               \
	X(MHD_, lookup_connection_value)                                                           \
	X(MHD_, queue_response)                                                                    \
	X(MHD_, resume_connection)                                                                 \
	X(MHD_, start_daemon)                                                                      \
	X(MHD_, stop_daemon)                                                                       \
	X(MHD_, suspend_connection)

DYNLIB_TABLE(mhd, MHD_FNS);

#define CONN_LIMIT 32		 /* connections served at once */
#define CONN_PER_PEER 16	 /* of one address (TCP), or of one uid of --allow-uid */
#define CONN_RESERVED 8		 /* Unix socket: slots the uids of --allow-uid leave to root */
#define CONN_CLOSING 32		 /* closed to make room, not yet closed by libmicrohttpd */
#define ACCEPT_PAUSE_MIN_S 0.001 /* accept() failed: the first pause, doubled ... */
#define ACCEPT_PAUSE_MAX_S 0.1	 /* ... up to this, while it fails */
#define SHORT_IDLE_S 0.2	 /* out of descriptors: idle this long gives way */
#define ACCEPT_BATCH 16		 /* connections accepted at one wake-up, at most */
#define LINGER_MAX 8		 /* refused connections whose 403 is still being read */
#define LINGER_S 1.0
#define UNCLAIMED_S 5.0		/* handed to libmicrohttpd, never seen by it: forgotten */
#define CONN_MEMORY (16 * 1024) /* request line and headers must fit */
#define CONN_TIMEOUT_S 10	/* idle; waiting requests are exempt */
#define LOG_EVERY_S 5		/* a refusal of a kind is logged once per this */

#define FORBIDDEN_BODY "this user may not use the agent; see --allow-uid\n"
#define PROFILE_PATH "/debug/pprof/profile"
#define WALL_PATH "/debug/pprof/wall"

/* Who is at the other end of a connection. */
struct peer {
	int family;		/* AF_UNIX, AF_INET or AF_INET6 */
	uid_t uid;		/* AF_UNIX: SO_PEERCRED's */
	unsigned char addr[16]; /* AF_INET(6): the address, not the port */
};

/* A connection, from accept to close (libmicrohttpd's socket context once
 * it has it). */
struct conn {
	struct conn *prev, *next;
	int fd;
	struct peer peer;
	double accepted;    /* CLOCK_MONOTONIC s */
	double head_start;  /* CLOCK_MONOTONIC s: accepted, or the last request ended */
	bool head_done;	    /* the current request's head is in */
	bool cut;	    /* shut down at the head deadline */
	bool too_many_args; /* its request line had more than HTTPD_MAX_ARGS */
	bool claimed;	    /* libmicrohttpd has it (its STARTED notification came) */
	bool counted;	    /* holds a slot: not closed to make room */
	bool privileged;    /* Unix socket: root or the agent's user */
	bool proven;	    /* TCP: a request of it had the token; Unix socket: always */
};

/* A refused connection whose answer the peer is reading (the acceptor's). */
struct lingerer {
	int fd;
	double until;
};

struct httpd_req {
	struct httpd_req *next;
	struct MHD_Connection *conn;
	int fd;
	unsigned int seconds;
	bool wall; /* WALL_PATH */
	unsigned int status;
	const char *ctype;
	void *body; /* until handed to a response */
	size_t len;
};

struct httpd {
	struct MHD_Daemon *d;
	struct httpd_opts o;
	char addr[sizeof(((struct sockaddr_un *)0)->sun_path) + 16];
	bool is_unix;
	char *path;	/* the Unix socket, removed at the end */
	dev_t sock_dev; /* ... when it is still the one bound */
	ino_t sock_ino;
	uid_t allow[HTTPD_MAX_ALLOW_UIDS + 2]; /* root, the agent's user, --allow-uid */
	unsigned int nallow;
	struct agentlog_limiter lim;

	/* The acceptor's. */
	int lfd;     /* the listening socket */
	int wake[2]; /* httpd_stop: a byte in wake[1] */
	int reserve; /* kept for accept() when descriptors run out; -1: in use */
	pthread_t acceptor;
	bool acceptor_up;
	struct lingerer lingering[LINGER_MAX];
	unsigned int nlinger;

	pthread_mutex_t mu;
	pthread_cond_t cv;	    /* in_flight went down; CLOCK_MONOTONIC */
	struct httpd_req *incoming; /* arrived, not taken yet (oldest first) */
	unsigned int waiting;	    /* profile requests not answered yet */
	unsigned int in_flight;	    /* profile requests whose connection is open */
	struct httpd_counts counts;
	struct conn *conns;  /* every connection accepted and not closed */
	unsigned int nconns; /* of them, those counted */
	unsigned int nlisted;
	bool stopping;
};

/* --- pieces ------------------------------------------------------------------ */

int httpd_parse_seconds(const char *arg, unsigned int *out)
{
	if (!arg || !*arg) {
		*out = HTTPD_DEFAULT_SECONDS;
		return 0;
	}
	unsigned long v = 0;
	for (const char *p = arg; *p; p++) {
		if (*p < '0' || *p > '9' || p - arg > 5)
			return -EINVAL;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (v < 1 || v > HTTPD_MAX_SECONDS)
		return -EINVAL;
	*out = (unsigned int)v;
	return 0;
}

int httpd_parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *port, *end;
	bool v6 = false;

	if (s[0] == '[') {
		end = strchr(s, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		s++;
		port = end + 2;
		v6 = true;
	} else {
		end = strchr(s, ':');
		/* More than one colon: an IPv6 address wants its brackets. */
		if (!end || strchr(end + 1, ':'))
			return -EINVAL;
		port = end + 1;
	}
	size_t hlen = (size_t)(end - s);
	if (!hlen || hlen >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hlen);
	host[hlen] = 0;
	unsigned long p = 0;
	if (!*port || strlen(port) > 5)
		return -EINVAL;
	for (const char *c = port; *c; c++) {
		if (*c < '0' || *c > '9')
			return -EINVAL;
		p = p * 10 + (unsigned long)(*c - '0');
	}
	if (p > 65535)
		return -EINVAL;

	memset(ss, 0, sizeof(*ss));
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)p);
		if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
			return -EINVAL;
		*len = sizeof(*a);
		return 0;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)p);
	if (!strcmp(host, "localhost"))
		strcpy(host, "127.0.0.1");
	if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
		return -EINVAL;
	*len = sizeof(*a);
	return 0;
}

bool httpd_bearer_ok(const char *auth, const char *token)
{
	if (!auth || strncasecmp(auth, "Bearer ", 7))
		return false;
	const char *given = auth + 7;
	while (*given == ' ')
		given++;
	size_t glen = strlen(given), tlen = strlen(token);
	while (glen && given[glen - 1] == ' ')
		glen--;
	/* Every byte of token is looked at whatever was given: the time
	 * tells nothing of how much of it matched. */
	unsigned char diff = glen != tlen;
	for (size_t i = 0; i < tlen; i++)
		diff |= (unsigned char)token[i] ^ (unsigned char)(i < glen ? given[i] : 0);
	return !diff;
}

/* --- responses --------------------------------------------------------------- */

/* Queues body (freed by the response when must_free) with the usual
 * headers. */
static enum MHD_Result respond(struct MHD_Connection *c, unsigned int status, const char *ctype,
			       void *body, size_t len, bool must_free)
{
	struct MHD_Response *r = mhd.create_response_from_buffer(
	    len, body, must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_MUST_COPY);
	if (!r) {
		if (must_free)
			free(body);
		return MHD_NO;
	}
	mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	mhd.add_response_header(r, "X-Content-Type-Options", "nosniff");
	mhd.add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		mhd.add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET");
	if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
		mhd.add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "5");
	if (status == MHD_HTTP_UNAUTHORIZED)
		mhd.add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"taipan\"");
	/* A client refused keeps no slot for its next request. */
	if (status == MHD_HTTP_UNAUTHORIZED || status == MHD_HTTP_FORBIDDEN)
		mhd.add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	if (!strcmp(ctype, "application/octet-stream"))
		mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_DISPOSITION,
					"attachment; filename=\"profile\"");
	enum MHD_Result ret = mhd.queue_response(c, status, r);
	mhd.destroy_response(r);
	return ret;
}

static enum MHD_Result respond_text(struct MHD_Connection *c, unsigned int status, const char *text)
{
	return respond(c, status, "text/plain; charset=utf-8", (void *)text, strlen(text), false);
}

/* --- the handler --------------------------------------------------------------- */

static enum MHD_Result refuse(struct httpd *h, struct MHD_Connection *c, unsigned int status,
			      const char *text)
{
	pthread_mutex_lock(&h->mu);
	h->counts.refused++;
	pthread_mutex_unlock(&h->mu);
	return respond_text(c, status, text);
}

static struct conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    mhd.get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

static bool uid_allowed(const struct httpd *h, uid_t uid)
{
	for (unsigned int i = 0; i < h->nallow; i++)
		if (uid == h->allow[i])
			return true;
	return false;
}

/* Whether the request may be served; if not, queues its 401 or 403. The
 * acceptor let in allowed uids only: the uid is checked again here all the
 * same, where the request is. */
static bool admitted(struct httpd *h, struct MHD_Connection *c, struct conn *cn,
		     enum MHD_Result *ret)
{
	unsigned int status;
	const char *body;
	if (h->is_unix && (!cn || !uid_allowed(h, cn->peer.uid))) {
		agentlog_limited(&h->lim, "uid",
				 "refused a request from uid %ld: not allowed (--allow-uid)",
				 cn ? (long)cn->peer.uid : -1L);
		status = MHD_HTTP_FORBIDDEN;
		body = FORBIDDEN_BODY;
	} else if (h->o.token &&
		   !httpd_bearer_ok(mhd.lookup_connection_value(c, MHD_HEADER_KIND,
								MHD_HTTP_HEADER_AUTHORIZATION),
				    h->o.token)) {
		agentlog_limited(&h->lim, "token",
				 "refused a request without the bearer token (--auth-token-file)");
		status = MHD_HTTP_UNAUTHORIZED;
		body = "send Authorization: Bearer TOKEN (--auth-token-file)\n";
	} else {
		if (cn && !cn->proven) {
			pthread_mutex_lock(&h->mu);
			cn->proven = true;
			pthread_mutex_unlock(&h->mu);
		}
		return true;
	}
	pthread_mutex_lock(&h->mu);
	h->counts.denied++;
	pthread_mutex_unlock(&h->mu);
	*ret = respond_text(c, status, body);
	return false;
}

/* GET /debug/pprof/profile: suspended until the main loop answers. */
static enum MHD_Result start_profile(struct httpd *h, struct MHD_Connection *c, void **con_cls,
				     bool wall)
{
	unsigned int seconds;
	const char *arg = mhd.lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seconds");
	if (httpd_parse_seconds(arg, &seconds))
		return refuse(h, c, MHD_HTTP_BAD_REQUEST,
			      "seconds must be a whole number from 1 to 300\n");
	/* A GET has no body; one that comes with a body is not ours. */
	if (mhd.lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH) ||
	    mhd.lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return refuse(h, c, MHD_HTTP_BAD_REQUEST, "a profile request has no body\n");
	struct httpd_req *r = calloc(1, sizeof(*r));
	if (!r)
		return refuse(h, c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
	const union MHD_ConnectionInfo *ci =
	    mhd.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	r->conn = c;
	r->fd = ci ? ci->connect_fd : -1;
	r->seconds = seconds;
	r->wall = wall;

	pthread_mutex_lock(&h->mu);
	if (h->stopping || h->waiting >= h->o.max_waiting) {
		bool stopping = h->stopping;
		pthread_mutex_unlock(&h->mu);
		free(r);
		return refuse(h, c, MHD_HTTP_SERVICE_UNAVAILABLE,
			      stopping ? "the agent is exiting\n"
				       : "too many profile requests at once; retry later\n");
	}
	/* Suspended before the main loop can see it, so that its resume
	 * never comes first; under the lock, so that httpd_stop sees it. */
	mhd.suspend_connection(c);
	struct httpd_req **tail = &h->incoming;
	while (*tail)
		tail = &(*tail)->next;
	*tail = r;
	h->waiting++;
	h->in_flight++;
	pthread_mutex_unlock(&h->mu);
	*con_cls = r;
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **con_cls)
{
	struct httpd *h = cls;
	struct httpd_req *r = *con_cls;
	(void)version, (void)upload_data, (void)upload_data_size;

	if (r) {
		/* Resumed: the answer is in. */
		pthread_mutex_lock(&h->mu);
		void *body = r->body;
		r->body = NULL;
		unsigned int status = r->status;
		const char *ctype = r->ctype;
		size_t len = r->len;
		pthread_mutex_unlock(&h->mu);
		return respond(c, status, ctype, body, len, true);
	}
	struct conn *cn = conn_of(c);
	if (cn) {
		pthread_mutex_lock(&h->mu);
		cn->head_done = true;
		pthread_mutex_unlock(&h->mu);
	}
	enum MHD_Result ret;
	if (!admitted(h, c, cn, &ret))
		return ret;
	if (cn && cn->too_many_args)
		return respond_text(c, MHD_HTTP_BAD_REQUEST,
				    "too many query parameters (at most 32)\n");
	bool known = !strcmp(url, PROFILE_PATH) || !strcmp(url, WALL_PATH) ||
		     !strcmp(url, "/stats") || !strcmp(url, "/healthz");
	if (!known)
		return respond_text(c, MHD_HTTP_NOT_FOUND,
				    "not found; try /debug/pprof/profile?seconds=N, "
				    "/debug/pprof/wall?seconds=N, /stats or /healthz\n");
	if (!strcmp(url, WALL_PATH) && !h->o.wall)
		return respond_text(c, MHD_HTTP_NOT_FOUND,
				    "this agent samples threads on the CPU only: start it with "
				    "--mode wall for /debug/pprof/wall\n");
	if (strcmp(method, MHD_HTTP_METHOD_GET))
		return respond_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n");
	if (!strcmp(url, "/healthz"))
		return respond_text(c, MHD_HTTP_OK, "ok\n");
	if (!strcmp(url, "/stats")) {
		struct httpd_counts counts;
		httpd_counts(h, &counts);
		char *json = h->o.stats_json ? h->o.stats_json(h->o.ctx, &counts) : NULL;
		if (!json)
			return respond_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "no stats\n");
		return respond(c, MHD_HTTP_OK, "application/json", json, strlen(json), true);
	}
	return start_profile(h, c, con_cls, !strcmp(url, WALL_PATH));
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct httpd *h = cls;
	struct httpd_req *r = *con_cls;
	struct conn *cn = conn_of(c);
	(void)toe;
	if (cn) {
		/* The next request's head has its own deadline. */
		pthread_mutex_lock(&h->mu);
		cn->head_done = false;
		cn->head_start = mono_seconds();
		pthread_mutex_unlock(&h->mu);
	}
	if (!r)
		return;
	*con_cls = NULL;
	pthread_mutex_lock(&h->mu);
	h->in_flight--;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	free(r->body);
	free(r);
}

/* libmicrohttpd's messages are mostly about what a client did (a refused
 * connection, a request too big): rate-limited, by message. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct httpd *h = cls;
	char msg[512];
	/* A connection handed over (MHD_add_connection) is taken for TCP:
	 * on the Unix socket, setting TCP_NODELAY fails with EOPNOTSUPP,
	 * which libmicrohttpd does not read as "not TCP". Nothing is lost. */
	if (h->is_unix && (!strncmp(fmt, "Setting %s option", 17) ||
			   !strncmp(fmt, "Failed to push the data", 23)))
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = 0;
	agentlog_limited(&h->lim, fmt, "http: %s", msg);
}

/* Takes cn out of the list. Under h->mu. */
static void unlist(struct httpd *h, struct conn *cn)
{
	if (cn->prev)
		cn->prev->next = cn->next;
	else
		h->conns = cn->next;
	if (cn->next)
		cn->next->prev = cn->prev;
	if (cn->counted)
		h->nconns--;
	h->nlisted--;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct httpd *h = cls;
	struct conn *cn = *socket_context;
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		/* Before libmicrohttpd closes the fd: httpd_tick and the
		 * acceptor, which shut fds down under the lock, never see it
		 * reused. */
		if (!cn)
			return;
		pthread_mutex_lock(&h->mu);
		unlist(h, cn);
		pthread_mutex_unlock(&h->mu);
		free(cn);
		*socket_context = NULL;
		return;
	}
	/* A connection the acceptor handed over: its struct is in the list,
	 * not claimed yet. */
	const union MHD_ConnectionInfo *ci =
	    mhd.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return;
	pthread_mutex_lock(&h->mu);
	for (cn = h->conns; cn; cn = cn->next)
		if (!cn->claimed && cn->fd == ci->connect_fd)
			break;
	if (cn)
		cn->claimed = true;
	pthread_mutex_unlock(&h->mu);
	if (!cn) {
		/* Not the acceptor's: without its checks it is not served. */
		shutdown(ci->connect_fd, SHUT_RDWR);
		return;
	}
	*socket_context = cn;
}

/* The request line, before libmicrohttpd parses its query. libmicrohttpd
 * 0.9.75 keeps each query parameter in the connection's memory pool; when
 * they overflow it, it queues a 431 but then carries on waiting for headers
 * and never sends it: the client hangs until the idle timeout. A query of
 * more than HTTPD_MAX_ARGS parameters is cut here, before that parse (the
 * request line is the connection's own buffer, which libmicrohttpd itself
 * cuts at the '?' next), and the request is answered 400. */
static void *uri_seen(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct conn *cn = conn_of(c);
	char *q = strchr(uri, '?');
	(void)cls;
	if (!cn || !q)
		return NULL;
	unsigned int args = 1;
	for (const char *p = q; *p; p++)
		args += *p == '&';
	if (args > HTTPD_MAX_ARGS) {
		cn->too_many_args = true;
		q[1] = 0;
	}
	return NULL;
}

/* --- the server ---------------------------------------------------------------- */

/* A listening socket of our own, for an exact error when the bind fails
 * (libmicrohttpd only says that it did). */
static int listen_on(const struct sockaddr_storage *ss, socklen_t len, char *err, size_t errlen,
		     const char *what)
{
	int one = 1;
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", what, strerror(errno));
		return -errno;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss->ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, len) || listen(fd, SOMAXCONN)) {
		int e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", what, strerror(e));
		close(fd);
		return -e;
	}
	return fd;
}

/* The directory of a Unix socket: made 0755 when missing; refused when
 * anyone but root (or the agent's user) may write in it, who could put a
 * socket of their own in the agent's place. */
static int check_dir(const char *path, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	struct stat st;
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) : 1;
	if (!slash)
		path = ".";
	if (len == 0)
		len = 1; /* "/name" */
	if (len >= sizeof(dir)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	memcpy(dir, slash ? path : ".", len);
	dir[len] = 0;
	if (mkdir(dir, 0755) && errno != EEXIST) {
		int e = errno;
		snprintf(err, errlen, "cannot create the socket's directory %s: %s", dir,
			 strerror(e));
		return -e;
	}
	if (lstat(dir, &st)) {
		int e = errno;
		snprintf(err, errlen, "cannot use the socket's directory %s: %s", dir, strerror(e));
		return -e;
	}
	if (!S_ISDIR(st.st_mode) || (st.st_uid != 0 && st.st_uid != geteuid()) ||
	    (st.st_mode & 022)) {
		snprintf(err, errlen,
			 "the socket's directory %s must be a directory of root's that only it "
			 "may write (it is mode %04o, owner uid %u): another user could put "
			 "their own socket there",
			 dir, (unsigned int)(st.st_mode & 07777), (unsigned int)st.st_uid);
		return -EPERM;
	}
	return 0;
}

/* Binds the Unix socket at h->path, mode 0600 (0666 when uids are
 * allowed: the acceptor checks each peer's uid), replacing a stale one. */
static int listen_unix(struct httpd *h, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	const char *path = h->path;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long (at most %zu bytes): %s",
			 sizeof(sa.sun_path) - 1, path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	int ret = check_dir(path, err, errlen);
	if (ret)
		return ret;
	if (!lstat(path, &st)) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "cannot listen on %s: it exists and is not a socket",
				 path);
			return -EEXIST;
		}
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		bool live = probe >= 0 && !connect(probe, (struct sockaddr *)&sa, sizeof(sa));
		if (probe >= 0)
			close(probe);
		if (live) {
			snprintf(err, errlen, "cannot listen on %s: another agent is serving there",
				 path);
			return -EADDRINUSE;
		}
		unlink(path); /* left by an agent that died */
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
		return -e;
	}
	/* Created with its mode, never a moment more open. */
	mode_t old = umask(0177);
	int b = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (b || (h->nallow > 2 && chmod(path, 0666)) || lstat(path, &st) ||
	    listen(fd, SOMAXCONN)) {
		int e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
		if (!b)
			unlink(path);
		close(fd);
		return -e;
	}
	h->sock_dev = st.st_dev;
	h->sock_ino = st.st_ino;
	snprintf(h->addr, sizeof(h->addr), "unix:%s", path);
	return fd;
}

static void name_address(struct httpd *h, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned int port = 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return;
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
		snprintf(h->addr, sizeof(h->addr), "http://[%s]:%u", host, port);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
		snprintf(h->addr, sizeof(h->addr), "http://%s:%u", host, port);
	}
}

/* --- the acceptor -------------------------------------------------------------- */

static int peer_of(const struct httpd *h, int fd, const struct sockaddr_storage *ss, struct peer *p)
{
	memset(p, 0, sizeof(*p));
	p->family = ss->ss_family;
	if (h->is_unix) {
		struct ucred uc;
		socklen_t len = sizeof(uc);
		p->family = AF_UNIX;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len))
			return -errno;
		p->uid = uc.uid;
	} else if (ss->ss_family == AF_INET) {
		memcpy(p->addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		memcpy(p->addr, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	}
	return 0;
}

static bool same_peer(const struct peer *a, const struct peer *b)
{
	if (a->family != b->family)
		return false;
	if (a->family == AF_UNIX)
		return a->uid == b->uid;
	return !memcmp(a->addr, b->addr, sizeof(a->addr));
}

static void describe_peer(const struct peer *p, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	if (p->family == AF_UNIX) {
		snprintf(buf, len, "uid %u", (unsigned int)p->uid);
		return;
	}
	inet_ntop(p->family, p->addr, host, sizeof(host));
	snprintf(buf, len, "%s", host);
}

/* How many counted connections p has. Under h->mu. */
static unsigned int held_by(const struct httpd *h, const struct peer *p)
{
	unsigned int n = 0;
	for (const struct conn *cn = h->conns; cn; cn = cn->next)
		n += cn->counted && same_peer(&cn->peer, p);
	return n;
}

/* Closes a connection idle (no request under way) for min_idle seconds at
 * least, to make room: one that never showed the token first (TCP), or of a
 * uid of --allow-uid (Unix socket); then one of the peer that holds the
 * most; then the oldest. Not the newest: a client that just connected has
 * its request on the way, and an attacker who connects over and over
 * closes its own connections first. Its slot is free at once;
 * libmicrohttpd reads end of file and closes it, which frees its
 * descriptor. Under h->mu. Returns whether one was closed. */
static bool evict_idle(struct httpd *h, double now, double min_idle)
{
	struct conn *victim = NULL;
	unsigned int best = 0, best_held = 0;
	for (struct conn *cn = h->conns; cn; cn = cn->next) {
		/* A request under way (a profile waiting too) is not idle.
		 * One not claimed yet is libmicrohttpd's all the same, on its
		 * way in, unless it is old: then libmicrohttpd closed it unseen
		 * and its fd number is not ours (httpd_tick forgets it). */
		if (!cn->counted || cn->cut || cn->head_done || now - cn->head_start < min_idle ||
		    (!cn->claimed && now - cn->accepted >= UNCLAIMED_S))
			continue;
		unsigned int rank = (cn->proven ? 2 : 0) + (cn->privileged ? 1 : 0);
		unsigned int held = held_by(h, &cn->peer);
		if (!victim || rank < best || (rank == best && held > best_held) ||
		    (rank == best && held == best_held && cn->head_start < victim->head_start)) {
			victim = cn;
			best = rank;
			best_held = held;
		}
	}
	if (!victim)
		return false;
	shutdown(victim->fd, SHUT_RDWR);
	victim->counted = false;
	h->nconns--;
	h->counts.evicted++;
	return true;
}

enum verdict {
	ADMIT,
	REFUSE_UID,	 /* Unix socket: not allowed */
	REFUSE_PEER,	 /* the peer has CONN_PER_PEER */
	REFUSE_RESERVED, /* the uids of --allow-uid have all they may have */
	REFUSE_FULL,	 /* every slot taken, none idle */
};

/* Whether a connection from p may be served, making room when the slots
 * are all taken or the descriptors ran out (fds_short). Under h->mu. */
static enum verdict make_room(struct httpd *h, const struct peer *p, bool privileged,
			      bool fds_short, double now)
{
	unsigned int same = 0, others = 0;
	if (h->is_unix && !uid_allowed(h, p->uid))
		return REFUSE_UID;
	for (struct conn *cn = h->conns; cn; cn = cn->next) {
		if (!cn->counted)
			continue;
		same += same_peer(&cn->peer, p);
		others += h->is_unix && !cn->privileged;
	}
	if (!privileged && same >= CONN_PER_PEER)
		return REFUSE_PEER;
	if (h->is_unix && !privileged && others >= CONN_LIMIT - CONN_RESERVED)
		return REFUSE_RESERVED;
	/* libmicrohttpd's own limit (it would close it unseen), counting
	 * those closed to make room that it has not closed yet. */
	if (h->nlisted >= CONN_LIMIT + CONN_CLOSING)
		return REFUSE_FULL;
	if (h->nconns >= CONN_LIMIT) {
		if (!evict_idle(h, now, 0))
			return REFUSE_FULL;
	} else if (fds_short) {
		/* It is served with the reserve's descriptor; one idle for
		 * long gives its own back for the next. */
		evict_idle(h, now, SHORT_IDLE_S);
	}
	return ADMIT;
}

/* A refused connection: closed once its peer read the answer (or after
 * LINGER_S), so that the peer sees the answer, not a reset for what it
 * sent meanwhile. At once when too many linger or descriptors are short. */
static void linger_or_close(struct httpd *h, int fd)
{
	if (h->reserve < 0 || h->nlinger >= LINGER_MAX) {
		close(fd);
		return;
	}
	shutdown(fd, SHUT_WR);
	h->lingering[h->nlinger++] =
	    (struct lingerer){.fd = fd, .until = mono_seconds() + LINGER_S};
}

/* Reads and drops what lingering connections sent; closes those done. p:
 * their pollfds, in the same order. */
static void linger_tend(struct httpd *h, const struct pollfd *p, double now)
{
	char buf[4096];
	/* Backwards: the last one, moved into a closed one's place, was seen. */
	for (unsigned int i = h->nlinger; i-- > 0;) {
		bool done = now >= h->lingering[i].until;
		for (int n = 0; !done && p[i].revents && n < 16; n++) {
			ssize_t r = read(h->lingering[i].fd, buf, sizeof(buf));
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				break;
			done = r <= 0;
		}
		if (done) {
			close(h->lingering[i].fd);
			h->lingering[i] = h->lingering[--h->nlinger];
		}
	}
}

/* The answer to a uid refused at accept, as admitted() words it. */
static const char forbidden[] = "HTTP/1.1 403 Forbidden\r\n"
				"Content-Type: text/plain; charset=utf-8\r\n"
				"Content-Length: 49\r\n"
				"Connection: close\r\n"
				"Cache-Control: no-store\r\n"
				"X-Content-Type-Options: nosniff\r\n"
				"\r\n" FORBIDDEN_BODY;
_Static_assert(sizeof(FORBIDDEN_BODY) - 1 == 49, "Content-Length");

/* Serves or refuses a connection just accepted. */
static void take(struct httpd *h, int fd, const struct sockaddr_storage *ss, socklen_t len,
		 bool fds_short)
{
	struct peer p;
	char who[INET6_ADDRSTRLEN + 16];
	double now = mono_seconds();
	enum verdict v = REFUSE_FULL;
	struct conn *cn = NULL;
	if (peer_of(h, fd, ss, &p)) {
		close(fd); /* SO_PEERCRED fails only on a socket that is gone */
		return;
	}
	bool privileged = h->is_unix && (p.uid == 0 || p.uid == h->allow[1]);
	cn = calloc(1, sizeof(*cn));
	pthread_mutex_lock(&h->mu);
	if (cn)
		v = make_room(h, &p, privileged, fds_short, now);
	if (v == ADMIT) {
		/* A struct of an fd that libmicrohttpd closed without a word
		 * (it could not take it) has that fd's number: forgotten. */
		for (struct conn *old = h->conns, *next; old; old = next) {
			next = old->next;
			if (!old->claimed && old->fd == fd) {
				unlist(h, old);
				free(old);
			}
		}
		cn->fd = fd;
		cn->peer = p;
		cn->accepted = cn->head_start = now;
		cn->counted = true;
		cn->privileged = privileged;
		cn->proven = h->is_unix;
		cn->next = h->conns;
		if (h->conns)
			h->conns->prev = cn;
		h->conns = cn;
		h->nconns++;
		h->nlisted++;
	} else {
		h->counts.refused_conns++;
		h->counts.denied += v == REFUSE_UID;
	}
	pthread_mutex_unlock(&h->mu);

	if (v == ADMIT) {
		/* It closes fd itself when it cannot take it. */
		if (mhd.add_connection(h->d, fd, (const struct sockaddr *)ss, len) != MHD_YES) {
			pthread_mutex_lock(&h->mu);
			unlist(h, cn);
			h->counts.refused_conns++;
			pthread_mutex_unlock(&h->mu);
			free(cn);
		}
		return;
	}
	free(cn);
	describe_peer(&p, who, sizeof(who));
	switch (v) {
	case REFUSE_UID:
		/* The whole answer fits a new socket's buffer: never waits. */
		if (send(fd, forbidden, sizeof(forbidden) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
			close(fd);
		} else {
			linger_or_close(h, fd);
		}
		agentlog_limited(&h->lim, "uid",
				 "refused a connection from %s: not allowed (--allow-uid)", who);
		return;
	case REFUSE_PEER:
		agentlog_limited(
		    &h->lim, "peer",
		    "refused a connection from %s: it has %d open, the most one %s may "
		    "have",
		    who, CONN_PER_PEER, h->is_unix ? "user" : "address");
		break;
	case REFUSE_RESERVED:
		agentlog_limited(&h->lim, "reserved",
				 "refused a connection from %s: the users of --allow-uid have %d "
				 "open, the most they may have (the rest is kept for root)",
				 who, CONN_LIMIT - CONN_RESERVED);
		break;
	default:
		agentlog_limited(&h->lim, "full",
				 "refused a connection from %s: %d open, none of them idle", who,
				 CONN_LIMIT);
		break;
	}
	close(fd);
}

static bool out_of_fds(int e)
{
	return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

/* Accepts what waits on the listening socket. Returns how long to wait
 * before the next try: 0, or longer each time accept() fails in a row. */
static double accept_pending(struct httpd *h, double pause)
{
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		bool fds_short = false;
		int fd =
		    accept4(h->lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && out_of_fds(errno) && h->reserve >= 0) {
			/* The descriptor kept makes room for this one. */
			close(h->reserve);
			h->reserve = -1;
			len = sizeof(ss);
			fd = accept4(h->lfd, (struct sockaddr *)&ss, &len,
				     SOCK_NONBLOCK | SOCK_CLOEXEC);
			fds_short = true;
		}
		if (fd < 0) {
			int e = errno;
			if (e == EAGAIN || e == EWOULDBLOCK)
				return 0;
			if (e == EINTR || e == ECONNABORTED || e == EPROTO || e == EPERM)
				continue; /* that one is gone; the next may wait */
			pthread_mutex_lock(&h->mu);
			if (out_of_fds(e))
				evict_idle(h, mono_seconds(), SHORT_IDLE_S);
			h->counts.accept_failures++;
			pthread_mutex_unlock(&h->mu);
			agentlog_limited(&h->lim, "accept",
					 "%s to accept a connection (%s): pausing accept(), up to "
					 "%.0f ms at a time, until one is free",
					 out_of_fds(e) ? "out of file descriptors" : "cannot",
					 strerror(e), ACCEPT_PAUSE_MAX_S * 1000);
			pause = pause ? pause * 2 : ACCEPT_PAUSE_MIN_S;
			return pause < ACCEPT_PAUSE_MAX_S ? pause : ACCEPT_PAUSE_MAX_S;
		}
		pause = 0;
		take(h, fd, &ss, len, fds_short);
		if (h->reserve < 0)
			h->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	return 0;
}

static int ms_until(double when, double now)
{
	double ms = (when - now) * 1000 + 1;
	return ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

static void *acceptor(void *arg)
{
	struct httpd *h = arg;
	double resume = 0, pause = 0;
	for (;;) {
		struct pollfd p[2 + LINGER_MAX];
		double now = mono_seconds();
		bool listening = now >= resume;
		nfds_t n = 0;
		int timeout = -1;
		p[n++] = (struct pollfd){.fd = h->wake[0], .events = POLLIN};
		if (listening)
			p[n++] = (struct pollfd){.fd = h->lfd, .events = POLLIN};
		else
			timeout = ms_until(resume, now);
		nfds_t lingers = n;
		for (unsigned int i = 0; i < h->nlinger; i++) {
			p[n++] = (struct pollfd){.fd = h->lingering[i].fd, .events = POLLIN};
			int t = ms_until(h->lingering[i].until, now);
			if (timeout < 0 || t < timeout)
				timeout = t;
		}
		if (poll(p, n, timeout) < 0 && errno != EINTR) {
			agentlog_limited(&h->lim, "poll", "http: poll: %s", strerror(errno));
			usleep(100000);
			continue;
		}
		if (p[0].revents)
			break;
		now = mono_seconds();
		linger_tend(h, p + lingers, now);
		if (h->reserve < 0)
			h->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (listening && p[1].revents) {
			pause = accept_pending(h, pause);
			resume = now + pause;
		}
	}
	for (unsigned int i = 0; i < h->nlinger; i++)
		close(h->lingering[i].fd);
	h->nlinger = 0;
	return NULL;
}

/* Removes the Unix socket, if it is still the one bound. */
static void remove_socket(struct httpd *h)
{
	struct stat st;
	if (h->path && !lstat(h->path, &st) && st.st_dev == h->sock_dev && st.st_ino == h->sock_ino)
		unlink(h->path);
	free(h->path);
	h->path = NULL;
}

int httpd_start(const struct httpd_opts *o, struct httpd **out, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	pthread_condattr_t ca;
	int fd = -1, ret;

	if (!o->listen && (!o->socket_path || !*o->socket_path)) {
		snprintf(err, errlen, "no socket path");
		return -EINVAL;
	}
	if (o->nallow_uids > HTTPD_MAX_ALLOW_UIDS) {
		snprintf(err, errlen, "at most %d uids may be allowed", HTTPD_MAX_ALLOW_UIDS);
		return -EINVAL;
	}
	if (o->listen && httpd_parse_listen(o->listen, &ss, &sslen)) {
		snprintf(err, errlen,
			 "--listen wants ADDR:PORT or [ADDR6]:PORT with a numeric address, not "
			 "'%s'",
			 o->listen);
		return -EINVAL;
	}
	ret = DYNLIB_OPEN(mhd, MHD_SONAME, err, errlen);
	if (ret)
		return ret;
	struct httpd *h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	h->o = *o;
	if (!h->o.max_waiting)
		h->o.max_waiting = 1;
	h->is_unix = !o->listen;
	h->allow[h->nallow++] = 0;
	h->allow[h->nallow++] = geteuid();
	for (unsigned int i = 0; i < o->nallow_uids; i++)
		h->allow[h->nallow++] = o->allow_uids[i];
	h->o.allow_uids = NULL; /* the caller's; copied */
	h->lfd = h->reserve = h->wake[0] = h->wake[1] = -1;
	agentlog_limiter_init(&h->lim, LOG_EVERY_S);
	pthread_mutex_init(&h->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);

	if (h->is_unix) {
		h->path = strdup(o->socket_path);
		fd = h->path ? listen_unix(h, err, errlen) : -ENOMEM;
		if (!h->path)
			snprintf(err, errlen, "out of memory");
	} else {
		fd = listen_on(&ss, sslen, err, errlen, o->listen);
		if (fd >= 0)
			name_address(h, fd);
	}
	if (fd < 0) {
		ret = fd;
		free(h->path);
		h->path = NULL; /* not ours to remove */
		goto fail;
	}
	h->lfd = fd;
	/* The reserve descriptor and the acceptor's wake-up, made now while
	 * descriptors are there to be had. */
	h->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (h->reserve < 0 || pipe2(h->wake, O_CLOEXEC | O_NONBLOCK)) {
		ret = -errno;
		snprintf(err, errlen, "cannot start the HTTP server: %s", strerror(-ret));
		goto fail;
	}
	/* No listening socket of its own: the acceptor hands it each
	 * connection (MHD_add_connection, which needs MHD_USE_ITC). Its limit
	 * is a backstop; the acceptor keeps to less, with room for those it
	 * counts closed that libmicrohttpd has not counted closed yet. */
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
			     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
			     MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
	h->d = mhd.start_daemon(
	    flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)(CONN_LIMIT + CONN_CLOSING + ACCEPT_BATCH),
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned int)CONN_TIMEOUT_S, MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION,
	    on_connection, h, MHD_OPTION_URI_LOG_CALLBACK, uri_seen, h, MHD_OPTION_END);
	if (!h->d) {
		snprintf(err, errlen, "cannot start the HTTP server on %s", h->addr);
		ret = -EIO;
		goto fail;
	}
	ret = -pthread_create(&h->acceptor, NULL, acceptor, h);
	if (ret) {
		snprintf(err, errlen, "cannot start the HTTP server's thread: %s", strerror(-ret));
		mhd.stop_daemon(h->d);
		goto fail;
	}
	h->acceptor_up = true;
	*out = h;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 2; i++)
		if (h->wake[i] >= 0)
			close(h->wake[i]);
	if (h->reserve >= 0)
		close(h->reserve);
	remove_socket(h);
	agentlog_limiter_destroy(&h->lim);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
	return ret;
}

const char *httpd_address(const struct httpd *h)
{
	return h->addr;
}

struct httpd_req *httpd_take(struct httpd *h)
{
	pthread_mutex_lock(&h->mu);
	struct httpd_req *r = h->incoming;
	if (r) {
		h->incoming = r->next;
		r->next = NULL;
	}
	pthread_mutex_unlock(&h->mu);
	return r;
}

unsigned int httpd_req_seconds(const struct httpd_req *r)
{
	return r->seconds;
}

bool httpd_req_wall(const struct httpd_req *r)
{
	return r->wall;
}

void httpd_reply(struct httpd *h, struct httpd_req *r, unsigned int status, const char *ctype,
		 void *body, size_t len)
{
	pthread_mutex_lock(&h->mu);
	r->status = status;
	r->ctype = ctype ? ctype : "application/octet-stream";
	r->body = body;
	r->len = len;
	h->waiting--;
	if (status == MHD_HTTP_OK)
		h->counts.served++;
	else
		h->counts.refused++;
	pthread_mutex_unlock(&h->mu);
	/* Outside the lock: the handler takes it inside libmicrohttpd's. */
	mhd.resume_connection(r->conn);
}

bool httpd_req_gone(const struct httpd_req *r)
{
	/* The connection is suspended: libmicrohttpd neither reads it nor
	 * closes its fd until it is resumed. A closed peer is end of file
	 * (POLLRDHUP), or an error. */
	struct pollfd p = {.fd = r->fd, .events = POLLRDHUP};
	return r->fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

void httpd_abandon(struct httpd *h, struct httpd_req *r)
{
	pthread_mutex_lock(&h->mu);
	r->status = MHD_HTTP_SERVICE_UNAVAILABLE;
	r->ctype = "text/plain; charset=utf-8";
	r->body = NULL;
	r->len = 0;
	h->waiting--;
	h->counts.abandoned++;
	pthread_mutex_unlock(&h->mu);
	/* Nobody reads: resumed only to be closed. */
	shutdown(r->fd, SHUT_RDWR);
	mhd.resume_connection(r->conn);
}

void httpd_tick(struct httpd *h)
{
	double now = mono_seconds();
	unsigned int cut = 0;
	pthread_mutex_lock(&h->mu);
	for (struct conn *cn = h->conns, *next; cn; cn = next) {
		next = cn->next;
		if (!cn->claimed) {
			/* Handed over and never seen: libmicrohttpd closed it
			 * unseen (it could not take it). Its fd is not ours. */
			if (now - cn->accepted >= UNCLAIMED_S) {
				unlist(h, cn);
				free(cn);
			}
			continue;
		}
		if (cn->head_done || cn->cut || now - cn->head_start < HTTPD_HEAD_DEADLINE_S)
			continue;
		/* libmicrohttpd reads end of file and closes it. The fd is
		 * still open: its close waits for on_connection, for this
		 * lock. */
		shutdown(cn->fd, SHUT_RDWR);
		cn->cut = true;
		cut++;
	}
	h->counts.cut += cut;
	pthread_mutex_unlock(&h->mu);
	if (cut)
		agentlog_limited(&h->lim, "deadline",
				 "closed %u connection%s that sent no complete request within %d s",
				 cut, cut == 1 ? "" : "s", HTTPD_HEAD_DEADLINE_S);
	agentlog_limiter_flush(&h->lim, false);
}

void httpd_counts(struct httpd *h, struct httpd_counts *c)
{
	pthread_mutex_lock(&h->mu);
	*c = h->counts;
	c->waiting = h->waiting;
	pthread_mutex_unlock(&h->mu);
}

void httpd_stop(struct httpd *h, double wait_s)
{
	struct timespec ts;
	if (!h)
		return;
	/* No new connections first. */
	if (h->acceptor_up) {
		ssize_t w = write(h->wake[1], "x", 1);
		(void)w; /* a full pipe wakes it as well */
		pthread_join(h->acceptor, NULL);
	}
	close(h->lfd);
	close(h->wake[0]);
	close(h->wake[1]);
	if (h->reserve >= 0)
		close(h->reserve);
	pthread_mutex_lock(&h->mu);
	h->stopping = true;
	struct httpd_req *r = h->incoming;
	h->incoming = NULL;
	pthread_mutex_unlock(&h->mu);
	while (r) {
		struct httpd_req *next = r->next;
		char *msg = strdup("the agent is exiting\n");
		httpd_reply(h, r, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", msg,
			    msg ? strlen(msg) : 0);
		r = next;
	}
	/* Let the answers go out before the connections are closed. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)wait_s;
	ts.tv_nsec += (long)((wait_s - (double)(time_t)wait_s) * 1e9);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&h->mu);
	while (h->in_flight)
		if (pthread_cond_timedwait(&h->cv, &h->mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&h->mu);
	mhd.stop_daemon(h->d);
	/* What libmicrohttpd never took. */
	while (h->conns) {
		struct conn *cn = h->conns;
		unlist(h, cn);
		free(cn);
	}
	remove_socket(h);
	agentlog_limiter_destroy(&h->lim);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
}
