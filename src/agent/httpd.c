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
 * allowed (SO_PEERCRED, checked on every request); on TCP, whoever has the
 * bearer token.
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

#define CONN_LIMIT 32
#define CONN_PER_IP 16
#define CONN_MEMORY (16 * 1024) /* request line and headers must fit */
#define CONN_TIMEOUT_S 10	/* idle; waiting requests are exempt */
#define LOG_EVERY_S 5		/* a refusal of a kind is logged once per this */

#define PROFILE_PATH "/debug/pprof/profile"
#define WALL_PATH "/debug/pprof/wall"

/* A connection, from accept to close (libmicrohttpd's socket context). */
struct conn {
	struct conn *prev, *next;
	int fd;
	double head_start;  /* CLOCK_MONOTONIC s: accepted, or the last request ended */
	bool head_done;	    /* the current request's head is in */
	bool cut;	    /* shut down at the head deadline */
	bool too_many_args; /* its request line had more than HTTPD_MAX_ARGS */
	bool peer_known;
	uid_t uid; /* Unix socket: the peer's */
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
	uid_t allow[HTTPD_MAX_ALLOW_UIDS + 2];
	unsigned int nallow;
	struct agentlog_limiter lim;

	pthread_mutex_t mu;
	pthread_cond_t cv;	    /* in_flight went down; CLOCK_MONOTONIC */
	struct httpd_req *incoming; /* arrived, not taken yet (oldest first) */
	unsigned int waiting;	    /* profile requests not answered yet */
	unsigned int in_flight;	    /* profile requests whose connection is open */
	struct httpd_counts counts;
	struct conn *conns; /* every open connection */
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

/* Whether the request may be served; if not, queues its 401 or 403. */
static bool admitted(struct httpd *h, struct MHD_Connection *c, struct conn *cn,
		     enum MHD_Result *ret)
{
	unsigned int status;
	const char *body;
	bool ok = !h->is_unix;
	for (unsigned int i = 0; !ok && cn && cn->peer_known && i < h->nallow; i++)
		ok = cn->uid == h->allow[i];
	if (!ok) {
		agentlog_limited(&h->lim, "uid",
				 "refused a request from uid %ld: not allowed "
				 "(--allow-uid)",
				 cn && cn->peer_known ? (long)cn->uid : -1L);
		status = MHD_HTTP_FORBIDDEN;
		body = "this user may not use the agent; see --allow-uid\n";
	} else if (h->o.token &&
		   !httpd_bearer_ok(mhd.lookup_connection_value(c, MHD_HEADER_KIND,
								MHD_HTTP_HEADER_AUTHORIZATION),
				    h->o.token)) {
		agentlog_limited(&h->lim, "token",
				 "refused a request without the bearer token (--auth-token-file)");
		status = MHD_HTTP_UNAUTHORIZED;
		body = "send Authorization: Bearer TOKEN (--auth-token-file)\n";
	} else {
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
		/* Before libmicrohttpd closes the fd: httpd_tick, which shuts
		 * fds down under the lock, never sees it reused. */
		if (!cn)
			return;
		pthread_mutex_lock(&h->mu);
		if (cn->prev)
			cn->prev->next = cn->next;
		else
			h->conns = cn->next;
		if (cn->next)
			cn->next->prev = cn->prev;
		pthread_mutex_unlock(&h->mu);
		free(cn);
		*socket_context = NULL;
		return;
	}
	const union MHD_ConnectionInfo *ci =
	    mhd.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return;
	cn = calloc(1, sizeof(*cn));
	if (!cn) {
		/* Without its deadline it is not served. */
		shutdown(ci->connect_fd, SHUT_RDWR);
		return;
	}
	cn->fd = ci->connect_fd;
	cn->head_start = mono_seconds();
	if (h->is_unix) {
		struct ucred uc;
		socklen_t len = sizeof(uc);
		if (!getsockopt(cn->fd, SOL_SOCKET, SO_PEERCRED, &uc, &len)) {
			cn->uid = uc.uid;
			cn->peer_known = true;
		}
	}
	pthread_mutex_lock(&h->mu);
	cn->next = h->conns;
	if (h->conns)
		h->conns->prev = cn;
	h->conns = cn;
	pthread_mutex_unlock(&h->mu);
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
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", what, strerror(errno));
		return -errno;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss->ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, len) || listen(fd, 32)) {
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
 * allowed: the uid is checked per request), replacing a stale one. */
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
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
		return -e;
	}
	/* Created with its mode, never a moment more open. */
	mode_t old = umask(0177);
	int b = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (b || (h->nallow > 2 && chmod(path, 0666)) || lstat(path, &st) || listen(fd, 32)) {
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
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
			     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	if (!h->is_unix && ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	h->d = mhd.start_daemon(
	    flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
	    MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CONN_LIMIT,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)CONN_PER_IP,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned int)CONN_TIMEOUT_S, MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION,
	    on_connection, h, MHD_OPTION_URI_LOG_CALLBACK, uri_seen, h, MHD_OPTION_END);
	if (!h->d) {
		snprintf(err, errlen, "cannot start the HTTP server on %s", h->addr);
		ret = -EIO;
		goto fail;
	}
	*out = h;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
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
	for (struct conn *cn = h->conns; cn; cn = cn->next) {
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
	remove_socket(h);
	agentlog_limiter_destroy(&h->lim);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
}
