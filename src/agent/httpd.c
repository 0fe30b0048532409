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
 * Connections come from the acceptor (accept.c), a thread of ours that
 * accepts each one, decides whether it gets a slot before a byte is read,
 * and hands it to libmicrohttpd (httpd_hand_over), which has no listening
 * socket of its own.
 */
#include <arpa/inet.h>
#include <errno.h>
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
#include <time.h>
#include <unistd.h>

#include "agent/agentlog.h"
#include "agent/httpd_int.h"
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

#define PROFILE_PATH "/debug/pprof/profile"
#define WALL_PATH "/debug/pprof/wall"

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

bool httpd_uid_allowed(const struct httpd *h, uid_t uid)
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
	if (h->is_unix && (!cn || !httpd_uid_allowed(h, cn->peer.uid))) {
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
		char *json = h->o.stats_json ? h->o.stats_json(h->o.ctx) : NULL;
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
		accept_unlist(h, cn);
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

	h->path = h->is_unix ? strdup(o->socket_path) : NULL;
	if (h->is_unix && !h->path) {
		fd = -ENOMEM;
		snprintf(err, errlen, "out of memory");
	} else {
		fd = accept_listen(h, &ss, sslen, err, errlen);
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
	ret = -pthread_create(&h->acceptor, NULL, accept_run, h);
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
	accept_remove_socket(h);
	agentlog_limiter_destroy(&h->lim);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
	return ret;
}

bool httpd_hand_over(struct httpd *h, int fd, const struct sockaddr_storage *ss, socklen_t len)
{
	return mhd.add_connection(h->d, fd, (const struct sockaddr *)ss, len) == MHD_YES;
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
				accept_unlist(h, cn);
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
		accept_unlist(h, cn);
		free(cn);
	}
	accept_remove_socket(h);
	agentlog_limiter_destroy(&h->lim);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
}
