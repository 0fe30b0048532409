/* out_html.c - the interactive flame graph: one self-contained HTML page
 * (src/output/html/, embedded at build time) with the profile inlined as JSON.
 *
 * The page does all the work in the browser (merging stacks into a tree,
 * per-thread views, zoom, search), so the data is the profile nearly as it
 * is, kept small because a long recording has 100,000 distinct stacks:
 *
 *   {"version":1, "period_ns":N, "start_ms":N, "duration_ns":N, "total":N,
 *    "strings":["", ...],                  every name and file, once
 *    "frames":[name,file,line,kind, ...],  4 numbers per frame id, flat
 *    "threads":[[pid,tid,name,comm], ...], names as string indexes
 *    "stacks":[[thread,count,frame...], ...]}  root first
 *
 * Numbers cannot break out of a <script>; every string goes through
 * out_json_put_html_string, which escapes '<', '>', '&' and all non-ASCII,
 * after escaping the text itself (str_escape), so that a name drawn in the
 * page shows a control character or a bidi override as "\u202e", never
 * reordered or hidden.
 * The data is written straight to the file as it is produced, so a large
 * profile never exists twice in memory.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A failed hash insert must be an error we return, not uthash's exit(). */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(ent) ((ent)->oom = true)
#include <uthash.h>

#include "output/out_json.h"
#include "output/output.h"
#include "util/hashfree.h"

/* The page's parts, generated from src/output/html/ into build/gen/html_assets.c. */
extern const unsigned char taipan_html_page[], taipan_html_css[], taipan_html_js[];
extern const size_t taipan_html_page_len, taipan_html_css_len, taipan_html_js_len;

struct str_ent {
	UT_hash_handle hh;
	bool oom;
	uint32_t index;
	char s[]; /* key */
};

struct thread_ent {
	uint32_t pid, tid;
	const struct prof_labels *labels; /* of its first sample: names it */
};

struct html {
	FILE *out;
	int err; /* first write error; later writes are skipped */
	struct str_ent *str_index;
	struct str_ent **strings; /* by index */
	uint32_t nstrings, strings_cap;
	uint32_t *frame_name, *frame_file; /* string indexes per frame id */
	struct thread_ent *threads;	   /* sorted by pid, tid */
	size_t nthreads, threads_cap;
};

static void put(struct html *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct html *h, const char *fmt, ...)
{
	if (h->err)
		return;
	va_list ap;
	va_start(ap, fmt);
	errno = 0;
	if (vfprintf(h->out, fmt, ap) < 0)
		h->err = errno ? -errno : -EIO;
	va_end(ap);
}

static void put_bytes(struct html *h, const void *data, size_t len)
{
	if (h->err || !len)
		return;
	errno = 0;
	if (fwrite(data, 1, len, h->out) != len)
		h->err = errno ? -errno : -EIO;
}

/* The string-table index of s (NULL and "" are 0), adding a copy when new;
 * a negative errno on failure. */
static int64_t str_index(struct html *h, const char *s)
{
	if (!s)
		s = "";
	size_t len = strlen(s);
	struct str_ent *ent;
	HASH_FIND(hh, h->str_index, s, len, ent);
	if (ent)
		return ent->index;
	if (h->nstrings == h->strings_cap) {
		uint32_t ncap = h->strings_cap ? h->strings_cap * 2 : 256;
		struct str_ent **n = realloc(h->strings, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		h->strings = n;
		h->strings_cap = ncap;
	}
	ent = calloc(1, sizeof(*ent) + len + 1);
	if (!ent)
		return -ENOMEM;
	memcpy(ent->s, s, len + 1);
	ent->index = h->nstrings;
	HASH_ADD_KEYPTR(hh, h->str_index, ent->s, len, ent);
	if (ent->oom) {
		free(ent);
		return -ENOMEM;
	}
	h->strings[h->nstrings++] = ent;
	return ent->index;
}

static void html_free(struct html *h)
{
	HASH_FREE_ALL(h->str_index, s, (void)0);
	free(h->strings);
	free(h->frame_name);
	free(h->frame_file);
	free(h->threads);
}

static int cmp_thread(const struct thread_ent *x, uint32_t pid, uint32_t tid)
{
	if (x->pid != pid)
		return x->pid < pid ? -1 : 1;
	if (x->tid != tid)
		return x->tid < tid ? -1 : 1;
	return 0;
}

/* The index of (pid, tid) in the sorted thread table, or where it would go
 * (*found false). */
static size_t thread_slot(const struct html *h, uint32_t pid, uint32_t tid, bool *found)
{
	size_t lo = 0, hi = h->nthreads;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = cmp_thread(&h->threads[mid], pid, tid);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static int collect_threads(struct html *h, const struct profile *p)
{
	size_t n = profile_sample_count(p);
	for (size_t i = 0; i < n; i++) {
		const struct prof_sample *s = profile_sample(p, i);
		bool found;
		if (!s->count)
			continue;
		size_t at = thread_slot(h, s->labels.pid, s->labels.tid, &found);
		if (found)
			continue;
		if (h->nthreads == h->threads_cap) {
			size_t ncap = h->threads_cap ? h->threads_cap * 2 : 16;
			struct thread_ent *v = realloc(h->threads, ncap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			h->threads = v;
			h->threads_cap = ncap;
		}
		memmove(&h->threads[at + 1], &h->threads[at],
			(h->nthreads - at) * sizeof(*h->threads));
		h->threads[at] = (struct thread_ent){
		    .pid = s->labels.pid, .tid = s->labels.tid, .labels = &s->labels};
		h->nthreads++;
	}
	return 0;
}

/* Interns every string the data refers to, so the string table can be
 * written before anything that points into it. */
static int intern_all(struct html *h, const struct profile *p)
{
	uint32_t nframes = profile_frame_count(p);
	h->frame_name = calloc(nframes ? nframes : 1, sizeof(*h->frame_name));
	h->frame_file = calloc(nframes ? nframes : 1, sizeof(*h->frame_file));
	if (!h->frame_name || !h->frame_file)
		return -ENOMEM;
	int64_t idx = str_index(h, ""); /* index 0, for "none" */
	if (idx < 0)
		return (int)idx;

	for (uint32_t i = 0; i < nframes; i++) {
		const struct prof_frame *f = profile_frame(p, i);
		bool native = f->kind == PROF_FRAME_KERNEL || f->kind == PROF_FRAME_NATIVE;
		const char *name = f->name && *f->name ? f->name : NULL;
		char hex[24];
		if (!name && native) {
			/* Unsymbolized code: the address is its name. */
			snprintf(hex, sizeof(hex), "0x%" PRIx64, f->addr);
			name = hex;
		}
		if ((idx = str_index(h, name ? name : "[unknown]")) < 0)
			return (int)idx;
		h->frame_name[i] = (uint32_t)idx;
		/* Machine code has no source file; its module says where it is. */
		if ((idx = str_index(h, native ? f->module : f->file)) < 0)
			return (int)idx;
		h->frame_file[i] = (uint32_t)idx;
	}
	for (size_t i = 0; i < h->nthreads; i++) {
		const struct prof_labels *l = h->threads[i].labels;
		if ((idx = str_index(h, l->thread_name)) < 0 || (idx = str_index(h, l->comm)) < 0)
			return (int)idx;
	}
	return 0;
}

static uint32_t str_of(struct html *h, const char *s)
{
	/* Interned by intern_all, so the lookup cannot fail. */
	int64_t idx = str_index(h, s);
	return idx < 0 ? 0 : (uint32_t)idx;
}

static void write_data(struct html *h, const struct profile *p)
{
	uint32_t nframes = profile_frame_count(p);
	size_t nsamples = profile_sample_count(p);

	/* The start is a wall-clock time for people: milliseconds fit a
	 * JavaScript number exactly, nanoseconds since 1970 do not. */
	bool weighted = profile_weighted(p);
	put(h,
	    "{\"version\":1,\"period_ns\":%" PRIu64 ",\"start_ms\":%" PRIu64
	    ",\"duration_ns\":%" PRIu64 ",\"total\":%" PRIu64 ",\"unit\":\"%s\",\"mode\":\"%s\","
	    "\"strings\":[",
	    profile_period_ns(p), profile_start_ns(p) / 1000000, profile_duration_ns(p),
	    weighted ? prof_ns_to_us(profile_total_value(p)) : profile_total(p),
	    weighted ? "us" : "samples", prof_mode_name(profile_mode(p)));
	for (uint32_t i = 0; i < h->nstrings && !h->err; i++) {
		if (i)
			put(h, ",");
		if (!h->err)
			h->err = out_json_put_html_string(h->out, h->strings[i]->s);
	}

	put(h, "],\"frames\":[");
	for (uint32_t i = 0; i < nframes; i++) {
		const struct prof_frame *f = profile_frame(p, i);
		put(h, "%s%" PRIu32 ",%" PRIu32 ",%d,%d", i ? "," : "", h->frame_name[i],
		    h->frame_file[i], f->line > 0 ? f->line : 0, (int)f->kind);
	}

	put(h, "],\"threads\":[");
	for (size_t i = 0; i < h->nthreads; i++) {
		const struct thread_ent *t = &h->threads[i];
		put(h, "%s[%" PRIu32 ",%" PRIu32 ",%" PRIu32 ",%" PRIu32 "]", i ? "," : "", t->pid,
		    t->tid, str_of(h, t->labels->thread_name), str_of(h, t->labels->comm));
	}

	put(h, "],\"stacks\":[");
	bool first = true;
	for (size_t i = 0; i < nsamples && !h->err; i++) {
		const struct prof_sample *s = profile_sample(p, i);
		bool found;
		/* Microseconds: a JavaScript number holds every sum of them
		 * exactly. */
		uint64_t v = weighted ? prof_ns_to_us(prof_value(p, s)) : s->count;
		if (!s->count || !v)
			continue;
		size_t t = thread_slot(h, s->labels.pid, s->labels.tid, &found);
		put(h, "%s[%zu,%" PRIu64, first ? "" : ",", t, v);
		for (uint32_t k = 0; k < s->nframes; k++)
			put(h, ",%" PRIu32, s->frames[k]);
		put(h, "]");
		first = false;
	}
	put(h, "]}");
}

/* The markers in flamegraph.html, in the order they appear there. */
enum part { PART_CSS, PART_DATA, PART_JS, NPARTS };
static const char *const markers[NPARTS] = {
    [PART_CSS] = "/*TAIPAN:CSS*/",
    [PART_DATA] = "/*TAIPAN:DATA*/",
    [PART_JS] = "/*TAIPAN:JS*/",
};

int output_write_html(const struct profile *p, FILE *out, const struct output_opts *o)
{
	(void)o; /* no options */
	if (!p || !out)
		return -EINVAL;
	struct html h = {.out = out};
	int err = collect_threads(&h, p);
	if (!err)
		err = intern_all(&h, p);
	if (err)
		goto cleanup;

	const char *page = (const char *)taipan_html_page;
	size_t left = taipan_html_page_len;
	for (int i = 0; i < NPARTS && !h.err; i++) {
		size_t mlen = strlen(markers[i]);
		const char *m = memmem(page, left, markers[i], mlen);
		if (!m) {
			/* The build embeds a page without it: a bug, not a
			 * condition to survive. */
			err = -EINVAL;
			goto cleanup;
		}
		put_bytes(&h, page, (size_t)(m - page));
		if (i == PART_CSS)
			put_bytes(&h, taipan_html_css, taipan_html_css_len);
		else if (i == PART_JS)
			put_bytes(&h, taipan_html_js, taipan_html_js_len);
		else
			write_data(&h, p);
		left -= (size_t)(m - page) + mlen;
		page = m + mlen;
	}
	put_bytes(&h, page, left);
	err = h.err;

cleanup:
	html_free(&h);
	return err;
}
