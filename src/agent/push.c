/* push.c - the agent's windows to a server: Pyroscope's ingest API (POST
 * /ingest), or any URL that takes a window as the body of a POST (the OTLP
 * sink, otlp.c, which shares the queue and the retries).
 *
 * One worker thread sends, so a slow or absent server never holds up
 * sampling: the main loop only queues. The request follows Pyroscope's
 * documented pprof ingestion ("Pyroscope Server HTTP API Reference", pprof
 * format): name, from, until, spyName, sampleRate and format=pprof in the
 * query, and a multipart/form-data body whose "profile" file part is the
 * pprof and whose "sample_type_config" part says how to read its sample
 * types. The profile is shaped like Go's CPU profiles (samples/count then
 * cpu/nanoseconds), which Pyroscope reads as the "cpu" profile type.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agentlog.h"
#include "agent/push.h"
#include "output/output.h"
#include "util/clock.h"
#include "util/dynlib.h"

#ifndef CURL_SONAME
#define CURL_SONAME "libcurl.so.4"
#endif

/* libcurl, opened by the first push_new() (util/dynlib.h). */
#define CURL_FNS(X)                                                                                \
	X(curl_, global_init)                                                                      \
	X(curl_, global_cleanup)                                                                   \
	X(curl_, easy_init)                                                                        \
	X(curl_, easy_cleanup)                                                                     \
	X(curl_, easy_setopt)                                                                      \
	X(curl_, easy_perform)                                                                     \
	X(curl_, easy_getinfo)                                                                     \
	X(curl_, easy_strerror)                                                                    \
	X(curl_, mime_init)                                                                        \
	X(curl_, mime_free)                                                                        \
	X(curl_, mime_addpart)                                                                     \
	X(curl_, mime_name)                                                                        \
	X(curl_, mime_filename)                                                                    \
	X(curl_, mime_type)                                                                        \
	X(curl_, mime_data)                                                                        \
	X(curl_, slist_append)                                                                     \
	X(curl_, slist_free_all)

DYNLIB_TABLE(cu, CURL_FNS);

/* How the server should read the samples: counts of CPU samples, summed
 * over time, scaled by the sampling period. */
static const char sample_type_config[] =
    "{\"samples\":{\"units\":\"samples\",\"aggregation\":\"sum\","
    "\"display-name\":\"cpu\",\"sampled\":true}}";

struct job {
	void *data;
	size_t len;
	uint64_t from, until;
};

struct pusher {
	enum push_kind kind;
	char *url, *name, *what;
	char *user, *password;	    /* NULL: no authentication */
	struct curl_slist *headers; /* PUSH_BODY's */
	unsigned int rate_hz, max_attempts;

	pthread_mutex_t mu;
	pthread_cond_t cv; /* on CLOCK_MONOTONIC */
	struct job *q;	   /* ring of waiting windows */
	unsigned int cap, head, n;
	bool holding; /* the worker has one in hand, besides the ring */
	bool stopping;
	double deadline;     /* stopping: when to give up */
	atomic_llong cut_ms; /* a transfer is cut after this monotonic ms (0: never) */
	struct push_stats st;

	pthread_t thread;
	CURL *curl; /* the worker's */
	unsigned int seed;
};

/* --- pieces ------------------------------------------------------------------ */

static bool name_char(char c)
{
	return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

int push_app_name(char *buf, size_t len, const char *app, const char *host)
{
	size_t alen = app ? strlen(app) : 0;
	if (!alen || alen > 100)
		return -EINVAL;
	for (size_t i = 0; i < alen; i++)
		if (!name_char(app[i]))
			return -EINVAL;
	/* Room for APP{hostname=HOST}, cut nowhere. */
	size_t hlen = host ? strlen(host) : 0;
	size_t need = alen + 2 + (hlen ? strlen("hostname=") + hlen : 0) + 1;
	if (need > len)
		return -ENOSPC;
	char *o = buf;
	memcpy(o, app, alen);
	o += alen;
	*o++ = '{';
	if (hlen) {
		memcpy(o, "hostname=", 9);
		o += 9;
		/* Braces, commas and equals signs would end the label early. */
		for (size_t i = 0; i < hlen; i++)
			*o++ = name_char(host[i]) ? host[i] : '_';
	}
	*o++ = '}';
	*o = 0;
	return 0;
}

/* Where url's user name and password would be: from after "scheme://" to
 * the last '@' (the host's), or NULL. Not only up to the first '/': a
 * password with a '/' in it, not percent-encoded, must be found too. */
static const char *userinfo_end(const char *url, const char **start)
{
	const char *a = strstr(url, "://");
	if (!a)
		return NULL;
	*start = a + 3;
	return strrchr(*start, '@');
}

int push_check_url(const char *url)
{
	const char *rest, *start;
	if (!strncmp(url, "http://", 7))
		rest = url + 7;
	else if (!strncmp(url, "https://", 8))
		rest = url + 8;
	else
		return -EINVAL;
	if (!*rest || *rest == '/' || strpbrk(url, "?# \t\r\n"))
		return -EINVAL;
	if (userinfo_end(url, &start))
		return -EPERM;
	return 0;
}

void push_redact_url(char *buf, size_t len, const char *url)
{
	const char *start = NULL;
	const char *at = userinfo_end(url, &start);
	if (!len)
		return;
	if (!at)
		snprintf(buf, len, "%s", url);
	else
		snprintf(buf, len, "%.*s***%s", (int)(start - url), url, at);
}

int push_parse_credentials(char *text, char **user, char **password)
{
	size_t n = strlen(text);
	while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
		text[--n] = 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)text[i] < ' ' || text[i] == 0x7f)
			return -EINVAL;
	char *colon = strchr(text, ':');
	if (!colon || colon == text)
		return -EINVAL;
	*colon = 0;
	*user = text;
	*password = colon + 1;
	return 0;
}

/* Percent-encodes s into o (which has room for 3 * strlen(s) + 1). */
static size_t url_encode(char *o, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
			o[n++] = (char)c;
		} else {
			o[n++] = '%';
			o[n++] = hex[c >> 4];
			o[n++] = hex[c & 15];
		}
	}
	o[n] = 0;
	return n;
}

int push_ingest_url(char *buf, size_t len, const char *base, const char *name, uint64_t from,
		    uint64_t until, unsigned int rate_hz)
{
	size_t blen = strlen(base);
	while (blen && base[blen - 1] == '/')
		blen--;
	char *enc = malloc(strlen(name) * 3 + 1);
	if (!enc)
		return -ENOMEM;
	url_encode(enc, name);
	int n = snprintf(buf, len,
			 "%.*s/ingest?name=%s&from=%" PRIu64 "&until=%" PRIu64
			 "&spyName=taipan&sampleRate=%u&format=pprof",
			 (int)blen, base, enc, from, until, rate_hz);
	free(enc);
	if (n < 0 || (size_t)n >= len)
		return -ENOSPC;
	return 0;
}

double push_backoff(unsigned int failures, double jitter)
{
	double d = 1.0;
	for (unsigned int i = 1; i < failures && d < PUSH_MAX_BACKOFF; i++)
		d *= 2;
	if (d > PUSH_MAX_BACKOFF)
		d = PUSH_MAX_BACKOFF;
	if (!(jitter >= 0))
		jitter = 0;
	if (jitter >= 1)
		jitter = 0.999;
	return d * (0.75 + jitter / 2);
}

/* --- sending ----------------------------------------------------------------- */

struct reply {
	char text[160]; /* the start of the server's answer, for the log */
	size_t len;
};

static size_t on_reply(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct reply *r = ctx;
	size_t n = size * nmemb;
	for (size_t i = 0; i < n && r->len + 1 < sizeof(r->text); i++) {
		unsigned char c = (unsigned char)data[i];
		r->text[r->len++] = isprint(c) ? (char)c : ' ';
	}
	r->text[r->len] = 0;
	return n;
}

/* Cuts a transfer that runs past the exit deadline. */
static int on_progress(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct pusher *p = ctx;
	(void)dt, (void)dn, (void)ut, (void)un;
	long long cut = atomic_load(&p->cut_ms);
	return cut && (long long)(mono_seconds() * 1000) > cut;
}

/* Runs the request set up on p's handle. Returns 0 when the server took
 * it (2xx), else a negative errno with why filled. */
static int perform(struct pusher *p, char *why, size_t whylen)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct reply reply = {.len = 0};
	long code = 0;
	int err = 0;

	cu.easy_setopt(p->curl, CURLOPT_WRITEDATA, &reply);
	cu.easy_setopt(p->curl, CURLOPT_ERRORBUFFER, errbuf);
	CURLcode rc = cu.easy_perform(p->curl);
	cu.easy_setopt(p->curl, CURLOPT_ERRORBUFFER, NULL);
	cu.easy_setopt(p->curl, CURLOPT_WRITEDATA, NULL);
	if (rc != CURLE_OK) {
		snprintf(why, whylen, "%s%s%s", cu.easy_strerror(rc), *errbuf ? ": " : "", errbuf);
		return -EIO;
	}
	cu.easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &code);
	if (code < 200 || code > 299) {
		while (reply.len && reply.text[reply.len - 1] == ' ')
			reply.text[--reply.len] = 0;
		err = -EIO;
		snprintf(why, whylen, "HTTP %ld%s%s", code, reply.len ? ": " : "", reply.text);
	}
	return err;
}

/* Sends one window as its bytes in a POST to p->url. */
static int send_body(struct pusher *p, const struct job *j, char *why, size_t whylen)
{
	cu.easy_setopt(p->curl, CURLOPT_URL, p->url);
	cu.easy_setopt(p->curl, CURLOPT_HTTPHEADER, p->headers);
	cu.easy_setopt(p->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->len);
	cu.easy_setopt(p->curl, CURLOPT_POSTFIELDS, j->data);
	int err = perform(p, why, whylen);
	/* The handle must not point at what is freed now. */
	cu.easy_setopt(p->curl, CURLOPT_POSTFIELDS, NULL);
	return err;
}

/* Sends one window. Returns 0 when the server took it, else a negative
 * errno with why filled. */
static int send_job(struct pusher *p, const struct job *j, char *why, size_t whylen)
{
	char url[4096];
	curl_mime *mime = NULL;
	curl_mimepart *part;
	int err = 0;

	if (p->kind == PUSH_BODY)
		return send_body(p, j, why, whylen);
	err = push_ingest_url(url, sizeof(url), p->url, p->name, j->from, j->until, p->rate_hz);
	if (err) {
		snprintf(why, whylen, "cannot build the ingest URL: %s", strerror(-err));
		goto out;
	}
	mime = cu.mime_init(p->curl);
	if (!mime) {
		err = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	if (!(part = cu.mime_addpart(mime)) || cu.mime_name(part, "profile") ||
	    cu.mime_filename(part, "profile.pprof") ||
	    cu.mime_type(part, "application/octet-stream") || cu.mime_data(part, j->data, j->len) ||
	    !(part = cu.mime_addpart(mime)) || cu.mime_name(part, "sample_type_config") ||
	    cu.mime_filename(part, "sample_type_config.json") ||
	    cu.mime_type(part, "application/json") ||
	    cu.mime_data(part, sample_type_config, CURL_ZERO_TERMINATED)) {
		err = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	cu.easy_setopt(p->curl, CURLOPT_URL, url);
	cu.easy_setopt(p->curl, CURLOPT_MIMEPOST, mime);
	err = perform(p, why, whylen);
out:
	/* The handle must not point at what is freed now. */
	cu.easy_setopt(p->curl, CURLOPT_MIMEPOST, NULL);
	cu.mime_free(mime);
	return err;
}

/* --- the queue and the worker -------------------------------------------------- */

static void wait_until(struct pusher *p, double when)
{
	struct timespec ts;
	ts.tv_sec = (time_t)when;
	ts.tv_nsec = (long)((when - (double)ts.tv_sec) * 1e9);
	pthread_cond_timedwait(&p->cv, &p->mu, &ts);
}

static struct job pop(struct pusher *p)
{
	struct job j = p->q[p->head];
	p->head = (p->head + 1) % p->cap;
	p->n--;
	return j;
}

static void *worker(void *arg)
{
	struct pusher *p = arg;
	struct job job = {0};
	unsigned int failures = 0;
	double next_try = 0;
	char why[512];

	pthread_mutex_lock(&p->mu);
	for (;;) {
		if (!p->holding) {
			while (!p->n && !p->stopping)
				pthread_cond_wait(&p->cv, &p->mu);
			if (!p->n)
				break;
			job = pop(p);
			p->holding = true;
			failures = 0;
			next_try = 0;
		}
		double now = mono_seconds();
		if (p->stopping && now >= p->deadline)
			break;
		if (!p->stopping && now < next_try) {
			wait_until(p, next_try);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		int err = send_job(p, &job, why, sizeof(why));
		pthread_mutex_lock(&p->mu);
		if (!err) {
			p->st.pushed++;
		} else {
			failures++;
			p->st.failures++;
			if (!p->stopping && failures < p->max_attempts) {
				double d =
				    push_backoff(failures, rand_r(&p->seed) / (RAND_MAX + 1.0));
				next_try = mono_seconds() + d;
				agentlog("%s of window %" PRIu64 "-%" PRIu64
					 " failed (try %u of %u): %s; retrying in %.1f s",
					 p->what, job.from, job.until, failures, p->max_attempts,
					 why, d);
				continue;
			}
			p->st.dropped++;
			agentlog("%s of window %" PRIu64 "-%" PRIu64
				 " failed (try %u of %u): %s; dropped the window (%" PRIu64
				 " dropped so far)",
				 p->what, job.from, job.until, failures, p->max_attempts, why,
				 p->st.dropped);
		}
		free(job.data);
		p->holding = false;
	}
	/* Exiting past the deadline: what is left is lost. */
	unsigned int left = p->n + p->holding;
	if (p->holding)
		free(job.data);
	p->holding = false;
	while (p->n)
		free(pop(p).data);
	if (left) {
		p->st.dropped += left;
		agentlog("exiting: dropped %u window%s that could not be pushed in time (%s)", left,
			 left == 1 ? "" : "s", p->what);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Frees p and what it holds; its lock and condition only when set up. */
static void release(struct pusher *p, bool sync_up)
{
	if (sync_up) {
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
	}
	cu.easy_cleanup(p->curl);
	for (struct curl_slist *h = p->headers; h; h = h->next)
		explicit_bzero(h->data, strlen(h->data));
	if (p->headers)
		cu.slist_free_all(p->headers);
	free(p->q);
	free(p->url);
	free(p->name);
	free(p->what);
	if (p->user)
		explicit_bzero(p->user, strlen(p->user));
	if (p->password)
		explicit_bzero(p->password, strlen(p->password));
	free(p->user);
	free(p->password);
	free(p);
}

int push_new(const struct push_opts *o, struct pusher **out, char *err, size_t errlen)
{
	struct pusher *p = NULL;
	pthread_condattr_t ca;
	bool curl_up = false, sync_up = false;
	int ret;

	if (push_check_url(o->url)) {
		char shown[512];
		push_redact_url(shown, sizeof(shown), o->url);
		snprintf(err, errlen,
			 "--push wants an http:// or https:// URL without a query or "
			 "credentials, not '%s'",
			 shown);
		return -EINVAL;
	}
	if (!o->user != !o->password) {
		snprintf(err, errlen, "push credentials want a user name and a password");
		return -EINVAL;
	}
	if (!o->backlog) {
		snprintf(err, errlen, "the push backlog must hold at least one window");
		return -EINVAL;
	}
	if (o->kind == PUSH_PYROSCOPE ? !o->name : o->kind != PUSH_BODY) {
		snprintf(err, errlen, "a push to Pyroscope needs its application name");
		return -EINVAL;
	}
	ret = DYNLIB_OPEN(cu, CURL_SONAME, err, errlen);
	if (ret)
		return ret;
	ret = -ENOMEM;
	snprintf(err, errlen, "out of memory");
	if (cu.global_init(CURL_GLOBAL_DEFAULT)) {
		snprintf(err, errlen, "cannot initialise libcurl");
		goto fail;
	}
	curl_up = true;
	p = calloc(1, sizeof(*p));
	if (!p)
		goto fail;
	p->rate_hz = o->rate_hz;
	p->max_attempts = o->max_attempts ? o->max_attempts : PUSH_MAX_ATTEMPTS;
	p->cap = o->backlog;
	p->seed = (unsigned int)getpid() ^ (unsigned int)time(NULL);
	p->kind = o->kind;
	p->url = strdup(o->url);
	p->name = strdup(o->name ? o->name : "");
	p->what = strdup(o->what ? o->what : "push");
	p->q = calloc(p->cap, sizeof(*p->q));
	p->curl = cu.easy_init();
	if (o->user) {
		p->user = strdup(o->user);
		p->password = strdup(o->password);
		if (!p->user || !p->password)
			goto fail;
	}
	if (!p->url || !p->name || !p->what || !p->q || !p->curl)
		goto fail;
	for (size_t i = 0; i < o->nheaders && o->kind == PUSH_BODY; i++) {
		struct curl_slist *h = cu.slist_append(p->headers, o->headers[i]);
		if (!h)
			goto fail;
		p->headers = h;
	}
	if (o->kind == PUSH_BODY) {
		/* No "Expect: 100-continue" wait before the body: one round trip
		 * less, and servers that do not answer it cost a second. */
		struct curl_slist *h = cu.slist_append(p->headers, "Expect:");
		if (!h)
			goto fail;
		p->headers = h;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	sync_up = true;

	/* What every request shares. No signals: the worker is not the main
	 * thread. Only HTTP(S); redirects are not followed. */
	cu.easy_setopt(p->curl, CURLOPT_NOSIGNAL, 1L);
	cu.easy_setopt(p->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	cu.easy_setopt(p->curl, CURLOPT_CONNECTTIMEOUT, 5L);
	cu.easy_setopt(p->curl, CURLOPT_TIMEOUT, 30L);
	cu.easy_setopt(p->curl, CURLOPT_USERAGENT, "taipan-agent");
	cu.easy_setopt(p->curl, CURLOPT_WRITEFUNCTION, on_reply);
	cu.easy_setopt(p->curl, CURLOPT_NOPROGRESS, 0L);
	cu.easy_setopt(p->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	cu.easy_setopt(p->curl, CURLOPT_XFERINFODATA, p);
	if (p->user) {
		/* Basic, to this server only: redirects are not followed. */
		cu.easy_setopt(p->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		cu.easy_setopt(p->curl, CURLOPT_USERNAME, p->user);
		cu.easy_setopt(p->curl, CURLOPT_PASSWORD, p->password);
	}

	ret = -pthread_create(&p->thread, NULL, worker, p);
	if (ret) {
		snprintf(err, errlen, "cannot start the push thread: %s", strerror(-ret));
		goto fail;
	}
	*out = p;
	return 0;
fail:
	if (p)
		release(p, sync_up);
	if (curl_up)
		cu.global_cleanup();
	return ret;
}

int push_submit(struct pusher *p, void *data, size_t len, uint64_t from, uint64_t until)
{
	pthread_mutex_lock(&p->mu);
	if (p->stopping) {
		pthread_mutex_unlock(&p->mu);
		free(data);
		return -ESHUTDOWN;
	}
	if (p->n == p->cap) {
		struct job old = pop(p);
		free(old.data);
		p->st.dropped++;
		agentlog("%s backlog full (%u window%s): dropped window %" PRIu64 "-%" PRIu64
			 " (%" PRIu64 " dropped so far)",
			 p->what, p->cap, p->cap == 1 ? "" : "s", old.from, old.until,
			 p->st.dropped);
	}
	p->q[(p->head + p->n) % p->cap] = (struct job){data, len, from, until};
	p->n++;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

void push_get_stats(struct pusher *p, struct push_stats *st)
{
	pthread_mutex_lock(&p->mu);
	*st = p->st;
	st->waiting = p->n + p->holding;
	pthread_mutex_unlock(&p->mu);
}

void push_free(struct pusher *p, double flush_s, struct push_stats *final)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	p->deadline = mono_seconds() + flush_s;
	atomic_store(&p->cut_ms, (long long)(p->deadline * 1000));
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	if (final)
		push_get_stats(p, final);
	release(p, true);
	cu.global_cleanup();
}

/* --- the agent's sink ----------------------------------------------------------- */

#define FLUSH_S 4.0 /* exiting: for the last windows to be pushed */

struct push_sink {
	struct pusher *p;	 /* NULL: no --push, or stopped */
	bool enabled;		 /* --push */
	struct push_stats final; /* once stopped */
};

/* A window with samples, queued as the unix seconds it covers. */
static void sink_window(void *impl, const struct profile *w)
{
	struct push_sink *ps = impl;
	char *data;
	size_t len;
	if (!ps->p)
		return;
	uint64_t from = profile_start_ns(w) / 1000000000ULL;
	uint64_t until = (profile_start_ns(w) + profile_duration_ns(w)) / 1000000000ULL;
	if (until <= from)
		until = from + 1;
	/* Pyroscope reads the window as a "cpu" profile (see the top): of a
	 * wall-clock window, the samples on the CPU. */
	struct profile *cpu = profile_weighted(w) ? profile_cpu_view(w) : NULL;
	int err = profile_weighted(w) && !cpu
		      ? -ENOMEM
		      : output_encode_memory(cpu ? cpu : w, output_write_pprof, NULL, &data, &len);
	profile_free(cpu);
	if (err) {
		agentlog("cannot encode window %" PRIu64 "-%" PRIu64 ": %s; not pushed", from,
			 until, strerror(-err));
		return;
	}
	push_submit(ps->p, data, len, from, until);
}

/* On the server's thread: the pusher's counters are under its lock, and
 * it is stopped only once the server is. */
static int sink_stats(void *impl, json_t *o)
{
	struct push_sink *ps = impl;
	struct push_stats st = ps->final;
	int bad = 0;
	if (ps->p)
		push_get_stats(ps->p, &st);
	bad |= json_object_set_new(o, "push_enabled", json_boolean(ps->enabled));
	bad |= json_object_set_new(o, "windows_pushed", json_integer((json_int_t)st.pushed));
	bad |= json_object_set_new(o, "push_failures", json_integer((json_int_t)st.failures));
	bad |= json_object_set_new(o, "dropped_windows", json_integer((json_int_t)st.dropped));
	bad |= json_object_set_new(o, "push_backlog", json_integer(st.waiting));
	return bad ? -1 : 0;
}

static void sink_totals(void *impl, char *words, size_t wlen, char *line, size_t llen)
{
	struct push_sink *ps = impl;
	snprintf(words, wlen,
		 ", %" PRIu64 " pushed, %" PRIu64 " push failures, %" PRIu64 " dropped",
		 ps->final.pushed, ps->final.failures, ps->final.dropped);
	if (llen)
		line[0] = '\0';
}

static void sink_stop(void *impl, bool drain)
{
	struct push_sink *ps = impl;
	if (!ps->p)
		return;
	push_free(ps->p, drain ? FLUSH_S : 0, &ps->final);
	ps->p = NULL;
}

static void sink_free(void *impl)
{
	sink_stop(impl, false);
	free(impl);
}

static const struct sink_ops push_ops = {
    .window = sink_window,
    .stats = sink_stats,
    .totals = sink_totals,
    .stop = sink_stop,
    .free = sink_free,
};

/* Without --push: no windows, only push_enabled false and zeros. */
static const struct sink_ops push_off_ops = {
    .stats = sink_stats,
    .totals = sink_totals,
    .free = sink_free,
};

int push_sink_new(const struct push_opts *o, struct sink *out, char *err, size_t errlen)
{
	struct push_sink *ps = calloc(1, sizeof(*ps));
	if (!ps) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (o) {
		int ret = push_new(o, &ps->p, err, errlen);
		if (ret) {
			free(ps);
			return ret;
		}
		ps->enabled = true;
	}
	*out = (struct sink){.ops = o ? &push_ops : &push_off_ops, .impl = ps};
	return 0;
}
