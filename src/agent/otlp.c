/* otlp.c - the agent's windows to an OpenTelemetry profiles receiver
 * (OTLP/HTTP): each window an ExportProfilesServiceRequest
 * (output/out_otlp.c), binary protobuf, gzipped, POSTed to
 * URL/v1development/profiles.
 *
 * HTTP and not gRPC: libcurl, which the Pyroscope push already opens, is
 * all it needs, where gRPC would bring HTTP/2 framing and a library of its
 * own into a root daemon. A receiver that takes only gRPC sits behind an
 * OpenTelemetry Collector, whose otlp receiver takes both and whose
 * exporter speaks gRPC onwards.
 *
 * The queue, the backlog and the retries are push.c's (PUSH_BODY): a slow
 * or absent receiver never holds up sampling, and a receiver that fails for
 * a while gets the windows it missed afterwards, oldest first, as far as
 * the backlog holds them.
 */
#define ZLIB_CONST
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "agent/agentlog.h"
#include "agent/otlp.h"
#include "agent/push.h"
#include "output/output.h"

#define FLUSH_S 4.0 /* exiting: for the last windows to be pushed */

/* Headers taipan sets on every request, and a file may not. */
static const char *const own_headers[] = {
    "Content-Type", "Content-Encoding", "Content-Length", "Host", "Expect", "Transfer-Encoding",
};

int otlp_endpoint(char *buf, size_t len, const char *url)
{
	if (push_check_url(url))
		return -EINVAL;
	size_t n = strlen(url);
	while (n && url[n - 1] == '/')
		n--;
	if (n > INT_MAX)
		return -ENOSPC;
	int w = snprintf(buf, len, "%.*s%s", (int)n, url, OTLP_PROFILES_PATH);
	if (w < 0 || (size_t)w >= len)
		return -ENOSPC;
	return 0;
}

static bool token_char(char c)
{
	return isalnum((unsigned char)c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

int otlp_parse_headers(char *text, char **lines, size_t max, size_t *n, char *why, size_t whylen)
{
	*n = 0;
	unsigned int lineno = 0;
	for (char *line = text; line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		size_t len = strlen(line);
		if (len && line[len - 1] == '\r')
			line[--len] = '\0';
		if (!len || line[0] == '#') {
			line = next;
			continue;
		}
		char *colon = strchr(line, ':');
		size_t klen = colon ? (size_t)(colon - line) : 0;
		for (size_t i = 0; i < klen; i++)
			if (!token_char(line[i]))
				klen = 0;
		if (!klen) {
			snprintf(why, whylen, "line %u: want 'Key: Value', Key a header name",
				 lineno);
			return -EINVAL;
		}
		for (size_t i = 0; i < sizeof(own_headers) / sizeof(own_headers[0]); i++)
			if (strlen(own_headers[i]) == klen &&
			    !strncasecmp(line, own_headers[i], klen)) {
				snprintf(why, whylen, "line %u: %s is taipan's to set", lineno,
					 own_headers[i]);
				return -EINVAL;
			}
		char *v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		size_t vlen = strlen(v);
		while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
			v[--vlen] = '\0';
		for (size_t i = 0; i < vlen; i++)
			if ((unsigned char)v[i] < ' ' || v[i] == 0x7f) {
				if (v[i] != '\t') {
					snprintf(why, whylen,
						 "line %u: a control character in the value",
						 lineno);
					return -EINVAL;
				}
			}
		if (*n == max) {
			snprintf(why, whylen, "more than %zu headers", max);
			return -EINVAL;
		}
		/* "Key: Value", in place: the value moves up to one space after
		 * the colon; "Key:Value" (no space to move into) stays, as valid. */
		if (v > colon + 1) {
			colon[1] = ' ';
			memmove(colon + 2, v, vlen + 1);
		}
		lines[(*n)++] = line;
		line = next;
	}
	return 0;
}

/* data[0..len) gzipped into *out (from malloc) and *outlen. */
static int gzip_memory(const char *data, size_t len, char **out, size_t *outlen)
{
	z_stream zs = {0};
	/* 15 + 16: the largest window, with a gzip header and trailer. */
	int rc =
	    deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
	if (rc != Z_OK)
		return rc == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
	if (len > UINT_MAX) {
		deflateEnd(&zs);
		return -E2BIG;
	}
	size_t cap = deflateBound(&zs, (uLong)len);
	char *buf = malloc(cap);
	if (!buf) {
		deflateEnd(&zs);
		return -ENOMEM;
	}
	zs.next_in = (const Bytef *)data;
	zs.avail_in = (uInt)len;
	zs.next_out = (Bytef *)buf;
	zs.avail_out = (uInt)cap;
	rc = deflate(&zs, Z_FINISH);
	size_t n = zs.total_out;
	deflateEnd(&zs);
	if (rc != Z_STREAM_END) {
		free(buf);
		return -EIO;
	}
	*out = buf;
	*outlen = n;
	return 0;
}

struct otlp_sink {
	struct pusher *p; /* NULL once stopped */
	struct push_stats final;
	/* Events past a window's limit that went into the latest of their
	 * sample's (profile_events_merged): written by the sampling thread,
	 * read by the server's (atomic). */
	uint64_t events_merged;
};

/* A window with samples: encoded, gzipped and queued. */
static void sink_window(void *impl, const struct profile *w)
{
	struct otlp_sink *os = impl;
	char *raw = NULL, *gz = NULL;
	size_t rawlen = 0, gzlen = 0;
	if (!os->p)
		return;
	uint64_t merged = profile_events_merged(w);
	if (merged && !__atomic_fetch_add(&os->events_merged, merged, __ATOMIC_RELAXED))
		agentlog("warning: more events in a window than the %u kept with their times: "
			 "the rest went into the latest of their stack's (coarser timestamps, "
			 "whole values; /stats otlp_events_merged); said once",
			 PROFILE_EVENTS_MAX);
	uint64_t from = profile_start_ns(w) / 1000000000ULL;
	uint64_t until = (profile_start_ns(w) + profile_duration_ns(w)) / 1000000000ULL;
	if (until <= from)
		until = from + 1;
	/* OTLP has a type for each value, wall time included: the window as
	 * it is. */
	int err = output_encode_memory(w, output_write_otlp, NULL, &raw, &rawlen);
	if (!err)
		err = gzip_memory(raw, rawlen, &gz, &gzlen);
	free(raw);
	if (err) {
		agentlog("cannot encode window %" PRIu64 "-%" PRIu64 " for OTLP: %s; not pushed",
			 from, until, strerror(-err));
		return;
	}
	push_submit(os->p, gz, gzlen, from, until);
}

/* On the server's thread: the pusher's counters are under its lock, and
 * it is stopped only once the server is. */
static int sink_stats(void *impl, json_t *o)
{
	struct otlp_sink *os = impl;
	struct push_stats st = os->final;
	int bad = 0;
	if (os->p)
		push_get_stats(os->p, &st);
	bad |= json_object_set_new(o, "otlp_windows_pushed", json_integer((json_int_t)st.pushed));
	bad |= json_object_set_new(o, "otlp_push_failures", json_integer((json_int_t)st.failures));
	bad |= json_object_set_new(o, "otlp_dropped_windows", json_integer((json_int_t)st.dropped));
	bad |= json_object_set_new(o, "otlp_backlog", json_integer(st.waiting));
	bad |= json_object_set_new(
	    o, "otlp_events_merged",
	    json_integer((json_int_t)__atomic_load_n(&os->events_merged, __ATOMIC_RELAXED)));
	return bad ? -1 : 0;
}

static void sink_totals(void *impl, char *words, size_t wlen, char *line, size_t llen)
{
	struct otlp_sink *os = impl;
	snprintf(words, wlen,
		 ", %" PRIu64 " pushed to OTLP, %" PRIu64 " OTLP push failures, %" PRIu64
		 " dropped for OTLP",
		 os->final.pushed, os->final.failures, os->final.dropped);
	if (llen)
		line[0] = '\0';
}

static void sink_stop(void *impl, bool drain)
{
	struct otlp_sink *os = impl;
	if (!os->p)
		return;
	push_free(os->p, drain ? FLUSH_S : 0, &os->final);
	os->p = NULL;
}

static void sink_free(void *impl)
{
	sink_stop(impl, false);
	free(impl);
}

static const struct sink_ops otlp_ops = {
    .window = sink_window,
    .stats = sink_stats,
    .totals = sink_totals,
    .stop = sink_stop,
    .free = sink_free,
};

int otlp_sink_new(const struct otlp_opts *o, struct sink *out, char *err, size_t errlen)
{
	char url[4096];
	const char *headers[OTLP_MAX_HEADERS + 2];
	if (o->nheaders > OTLP_MAX_HEADERS) {
		snprintf(err, errlen, "at most %d OTLP headers", OTLP_MAX_HEADERS);
		return -EINVAL;
	}
	int ret = otlp_endpoint(url, sizeof(url), o->url);
	if (ret) {
		char shown[512];
		push_redact_url(shown, sizeof(shown), o->url);
		snprintf(err, errlen,
			 ret == -EINVAL ? "--otlp wants an http:// or https:// URL without a query "
					  "or credentials, not '%s'"
					: "--otlp URL too long: '%s'",
			 shown);
		return ret;
	}
	headers[0] = "Content-Type: application/x-protobuf";
	headers[1] = "Content-Encoding: gzip";
	for (size_t i = 0; i < o->nheaders; i++)
		headers[i + 2] = o->headers[i];
	struct push_opts po = {
	    .kind = PUSH_BODY,
	    .url = url,
	    .backlog = o->backlog,
	    .max_attempts = o->max_attempts,
	    .headers = headers,
	    .nheaders = o->nheaders + 2,
	    .what = "OTLP push",
	};
	struct otlp_sink *os = calloc(1, sizeof(*os));
	if (!os) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = push_new(&po, &os->p, err, errlen);
	if (ret) {
		free(os);
		return ret;
	}
	*out = (struct sink){.ops = &otlp_ops, .impl = os};
	return 0;
}
