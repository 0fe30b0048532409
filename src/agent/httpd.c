/* httpd.c - the agent's HTTP endpoints, on libmicrohttpd's own thread.
 *
 * A profile request waits for the seconds it asked for, so its connection
 * is suspended: it costs a socket and a small struct, no thread. The main
 * loop takes the new requests (httpd_take), cuts the session's profile at
 * their start and end, and answers (httpd_reply), which resumes the
 * connection. Everything a client controls is bounded: connections in all
 * and per address, the memory of a connection (and so the request line and
 * headers), idle time, and how many profile requests may wait at once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agentlog.h"
#include "agent/httpd.h"

#define CONN_LIMIT 32
#define CONN_PER_IP 16
#define CONN_MEMORY (16 * 1024) /* request line and headers must fit */
#define CONN_TIMEOUT_S 10	/* idle; waiting requests are exempt */

#define PROFILE_PATH "/debug/pprof/profile"

struct httpd_req {
	struct httpd_req *next;
	struct MHD_Connection *conn;
	unsigned int seconds;
	unsigned int status;
	const char *ctype;
	void *body; /* until handed to a response */
	size_t len;
};

struct httpd {
	struct MHD_Daemon *d;
	struct httpd_opts o;
	char addr[INET6_ADDRSTRLEN + 16];

	pthread_mutex_t mu;
	pthread_cond_t cv;	    /* in_flight went down; CLOCK_MONOTONIC */
	struct httpd_req *incoming; /* arrived, not taken yet (oldest first) */
	unsigned int waiting;	    /* profile requests not answered yet */
	unsigned int in_flight;	    /* profile requests whose connection is open */
	unsigned long served, refused;
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

/* --- responses --------------------------------------------------------------- */

/* Queues body (freed by the response when must_free) with the usual
 * headers. */
static enum MHD_Result respond(struct MHD_Connection *c, unsigned int status, const char *ctype,
			       void *body, size_t len, bool must_free)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
	    len, body, must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_MUST_COPY);
	if (!r) {
		if (must_free)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET");
	if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "5");
	if (!strcmp(ctype, "application/octet-stream"))
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_DISPOSITION,
					"attachment; filename=\"profile\"");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
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
	h->refused++;
	pthread_mutex_unlock(&h->mu);
	return respond_text(c, status, text);
}

/* GET /debug/pprof/profile: suspended until the main loop answers. */
static enum MHD_Result start_profile(struct httpd *h, struct MHD_Connection *c, void **con_cls)
{
	unsigned int seconds;
	const char *arg = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seconds");
	if (httpd_parse_seconds(arg, &seconds))
		return refuse(h, c, MHD_HTTP_BAD_REQUEST,
			      "seconds must be a whole number from 1 to 300\n");
	/* A GET has no body; one that comes with a body is not ours. */
	if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH) ||
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return refuse(h, c, MHD_HTTP_BAD_REQUEST, "a profile request has no body\n");
	struct httpd_req *r = calloc(1, sizeof(*r));
	if (!r)
		return refuse(h, c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
	r->conn = c;
	r->seconds = seconds;

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
	MHD_suspend_connection(c);
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
	bool known =
	    !strcmp(url, PROFILE_PATH) || !strcmp(url, "/stats") || !strcmp(url, "/healthz");
	if (!known)
		return respond_text(c, MHD_HTTP_NOT_FOUND,
				    "not found; try /debug/pprof/profile?seconds=N, /stats or "
				    "/healthz\n");
	if (strcmp(method, MHD_HTTP_METHOD_GET))
		return respond_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n");
	if (!strcmp(url, "/healthz"))
		return respond_text(c, MHD_HTTP_OK, "ok\n");
	if (!strcmp(url, "/stats")) {
		unsigned long served, refused;
		httpd_counts(h, &served, &refused);
		char *json = h->o.stats_json ? h->o.stats_json(h->o.ctx, served, refused) : NULL;
		if (!json)
			return respond_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "no stats\n");
		return respond(c, MHD_HTTP_OK, "application/json", json, strlen(json), true);
	}
	return start_profile(h, c, con_cls);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct httpd *h = cls;
	struct httpd_req *r = *con_cls;
	(void)c, (void)toe;
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

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = 0;
	agentlog("http: %s", msg);
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
		snprintf(h->addr, sizeof(h->addr), "[%s]:%u", host, port);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
		snprintf(h->addr, sizeof(h->addr), "%s:%u", host, port);
	}
}

int httpd_start(const struct httpd_opts *o, struct httpd **out, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	pthread_condattr_t ca;
	int fd = -1, ret;

	if (httpd_parse_listen(o->listen, &ss, &sslen)) {
		snprintf(err, errlen,
			 "--listen wants ADDR:PORT or [ADDR6]:PORT with a numeric address, not "
			 "'%s'",
			 o->listen);
		return -EINVAL;
	}
	struct httpd *h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	h->o = *o;
	if (!h->o.max_waiting)
		h->o.max_waiting = 1;
	pthread_mutex_init(&h->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cv, &ca);
	pthread_condattr_destroy(&ca);

	fd = listen_on(&ss, sslen, err, errlen, o->listen);
	if (fd < 0) {
		ret = fd;
		goto fail;
	}
	name_address(h, fd);
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
			     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	h->d = MHD_start_daemon(
	    flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
	    MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CONN_LIMIT,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)CONN_PER_IP,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned int)CONN_TIMEOUT_S, MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
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
		h->served++;
	else
		h->refused++;
	pthread_mutex_unlock(&h->mu);
	/* Outside the lock: the handler takes it inside libmicrohttpd's. */
	MHD_resume_connection(r->conn);
}

void httpd_counts(struct httpd *h, unsigned long *served, unsigned long *refused)
{
	pthread_mutex_lock(&h->mu);
	*served = h->served;
	*refused = h->refused;
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
	MHD_stop_daemon(h->d);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	free(h);
}
