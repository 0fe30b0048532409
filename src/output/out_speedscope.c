/* out_speedscope.c - speedscope's JSON file format
 * (https://www.speedscope.app/file-format-schema.json), written with jansson.
 *
 * The profile's frames become shared.frames one to one (index = frame id),
 * plus an "[unknown]" frame for samples without frames, as in pprof. Each
 * thread (pid, tid) is one "sampled" profile, so speedscope's profile picker
 * is a thread picker; the busiest thread is the one it opens with. Weights
 * are CPU time in nanoseconds (count x period) when the period is known and
 * sample counts ("none") otherwise; startValue is 0 and endValue the sum of
 * the weights, so the range and the weights always agree.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/out_json.h"
#include "output/output.h"

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

struct thread_prof {
	uint32_t pid, tid;
	const struct prof_labels *labels; /* of its first sample: names it */
	json_t *samples, *weights;	  /* borrowed from the profile object */
	uint64_t total;			  /* sum of weights */
};

struct threads {
	struct thread_prof *v;
	size_t n, cap;
};

static int cmp_thread(const void *a, const void *b)
{
	const struct thread_prof *x = a, *y = b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return 0;
}

/* Threads are few (tens, rarely thousands): a sorted array, bsearch for the
 * samples and insertion for new threads is all it takes. */
static struct thread_prof *find_thread(struct threads *t, uint32_t pid, uint32_t tid)
{
	struct thread_prof key = {.pid = pid, .tid = tid};
	if (!t->n)
		return NULL; /* t->v may be NULL, which bsearch must not get */
	return bsearch(&key, t->v, t->n, sizeof(*t->v), cmp_thread);
}

/* One entry per distinct (pid, tid) with samples, sorted. */
static int collect_threads(const struct profile *p, struct threads *t)
{
	size_t n = profile_sample_count(p);
	for (size_t i = 0; i < n; i++) {
		const struct prof_sample *s = profile_sample(p, i);
		if (!s->count || find_thread(t, s->labels.pid, s->labels.tid))
			continue;
		/* Where it goes in the sorted array. */
		struct thread_prof key = {.pid = s->labels.pid, .tid = s->labels.tid};
		size_t at = t->n;
		while (at > 0 && cmp_thread(&t->v[at - 1], &key) > 0)
			at--;
		if (t->n == t->cap) {
			size_t ncap = t->cap ? t->cap * 2 : 16;
			struct thread_prof *v = realloc(t->v, ncap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			t->v = v;
			t->cap = ncap;
		}
		memmove(&t->v[at + 1], &t->v[at], (t->n - at) * sizeof(*t->v));
		key.labels = &s->labels;
		t->v[at] = key;
		t->n++;
	}
	return 0;
}

/* Adds key = value to obj, taking the reference; -ENOMEM when value is NULL
 * (a failed constructor) or the set fails. */
static int set_new(json_t *obj, const char *key, json_t *value)
{
	if (!value)
		return -ENOMEM;
	return json_object_set_new(obj, key, value) ? -ENOMEM : 0;
}

static int append_new(json_t *arr, json_t *value)
{
	if (!value)
		return -ENOMEM;
	return json_array_append_new(arr, value) ? -ENOMEM : 0;
}

static json_t *frame_json(const struct prof_frame *f)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	char hex[24];
	const char *name = f->name && *f->name ? f->name : NULL;
	if (!name && (f->kind == PROF_FRAME_KERNEL || f->kind == PROF_FRAME_NATIVE)) {
		snprintf(hex, sizeof(hex), "0x%" PRIx64, f->addr);
		name = hex;
	}
	/* Kernel and native code have no source file; their module takes its
	 * place, which also keeps a kernel symbol apart from a Python function
	 * of the same name. */
	const char *file = f->kind == PROF_FRAME_INTERP ? f->file : f->module;
	int err = set_new(o, "name", out_json_string(name ? name : "[unknown]"));
	if (!err && file && *file)
		err = set_new(o, "file", out_json_string(file));
	if (!err && f->kind == PROF_FRAME_INTERP && f->line > 0)
		err = set_new(o, "line", json_integer(f->line));
	if (err) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* "worker (tid 101), python3 (pid 100)". A thread that was never given a
 * name of its own carries the process's, which would only repeat it:
 * "tid 101, python3 (pid 100)". Returns a string to free, or NULL. */
static char *thread_title(const struct thread_prof *t)
{
	const char *tname = t->labels->thread_name;
	const char *comm = t->labels->comm;
	bool named = tname && *tname && !(comm && strcmp(tname, comm) == 0);
	char *s;
	int rc;
	if (named)
		rc = asprintf(&s, "%s (tid %" PRIu32 "), %s (pid %" PRIu32 ")", tname, t->tid,
			      comm && *comm ? comm : "?", t->pid);
	else
		rc = asprintf(&s, "tid %" PRIu32 ", %s (pid %" PRIu32 ")", t->tid,
			      comm && *comm ? comm : "?", t->pid);
	return rc < 0 ? NULL : s;
}

static void sat_add(uint64_t *acc, uint64_t v)
{
	if (__builtin_add_overflow(*acc, v, acc))
		*acc = UINT64_MAX;
}

/* Fills root; everything it allocates hangs off root, so the caller frees it
 * all with one json_decref. */
static int build(const struct profile *p, json_t *root, struct threads *t)
{
	uint32_t nframes = profile_frame_count(p);
	size_t nsamples = profile_sample_count(p);
	uint64_t period = profile_period_ns(p);
	bool weighted = profile_weighted(p);
	bool ns = period > 0 || weighted;
	int64_t unknown = -1; /* frame index of "[unknown]", once needed */
	int err;

	/* Each object is attached as soon as it exists, so root owns everything
	 * and an error anywhere leaks nothing. */
	json_t *shared, *frames, *profiles;
	if ((err = set_new(root, "$schema", json_string(SPEEDSCOPE_SCHEMA))) ||
	    (err = set_new(root, "shared", shared = json_object())) ||
	    (err = set_new(shared, "frames", frames = json_array())) ||
	    (err = set_new(root, "profiles", profiles = json_array())) ||
	    (err = set_new(root, "name", json_string("taipan profile"))) ||
	    (err = set_new(root, "exporter", json_string("taipan"))))
		return err;

	for (uint32_t i = 0; i < nframes; i++)
		if ((err = append_new(frames, frame_json(profile_frame(p, i)))))
			return err;

	if ((err = collect_threads(p, t)))
		return err;
	for (size_t i = 0; i < t->n; i++) {
		json_t *prof = json_object();
		if ((err = append_new(profiles, prof)))
			return err;
		char *title = thread_title(&t->v[i]);
		err = set_new(prof, "type", json_string("sampled"));
		if (!err)
			err = set_new(prof, "name", title ? out_json_string(title) : NULL);
		if (!err)
			err = set_new(prof, "unit", json_string(ns ? "nanoseconds" : "none"));
		if (!err)
			err = set_new(prof, "samples", t->v[i].samples = json_array());
		if (!err)
			err = set_new(prof, "weights", t->v[i].weights = json_array());
		free(title);
		if (err)
			return err;
	}

	for (size_t i = 0; i < nsamples; i++) {
		const struct prof_sample *s = profile_sample(p, i);
		if (!s->count || !prof_value(p, s))
			continue;
		struct thread_prof *th = find_thread(t, s->labels.pid, s->labels.tid);
		json_t *stack = json_array();
		if ((err = append_new(th->samples, stack)))
			return err;
		for (uint32_t k = 0; k < s->nframes; k++)
			if ((err = append_new(stack, json_integer(s->frames[k]))))
				return err;
		if (!s->nframes) {
			if (unknown < 0) {
				struct prof_frame unk = {.name = "[unknown]",
							 .kind = PROF_FRAME_MARKER};
				unknown = nframes;
				if ((err = append_new(frames, frame_json(&unk))))
					return err;
			}
			if ((err = append_new(stack, json_integer(unknown))))
				return err;
		}
		uint64_t w = s->count;
		if (weighted)
			w = prof_value(p, s);
		else if (ns && __builtin_mul_overflow(s->count, period, &w))
			w = UINT64_MAX;
		/* JSON numbers are doubles to most readers; jansson's are
		 * int64. Neither limit is near a real profile's weights. */
		if (w > INT64_MAX)
			w = INT64_MAX;
		if ((err = append_new(th->weights, json_integer((json_int_t)w))))
			return err;
		sat_add(&th->total, w);
	}

	size_t busiest = 0;
	for (size_t i = 0; i < t->n; i++) {
		json_t *prof = json_array_get(profiles, i);
		uint64_t total = t->v[i].total > INT64_MAX ? INT64_MAX : t->v[i].total;
		if ((err = set_new(prof, "startValue", json_integer(0))) ||
		    (err = set_new(prof, "endValue", json_integer((json_int_t)total))))
			return err;
		if (t->v[i].total > t->v[busiest].total)
			busiest = i;
	}
	if (t->n && (err = set_new(root, "activeProfileIndex", json_integer((json_int_t)busiest))))
		return err;
	return 0;
}

int output_write_speedscope(const struct profile *p, FILE *out, const struct output_opts *o)
{
	(void)o; /* no options */
	if (!p || !out)
		return -EINVAL;
	struct threads t = {0};
	json_t *root = json_object();
	int err = root ? build(p, root, &t) : -ENOMEM;
	if (!err) {
		errno = 0;
		/* Compact: a large profile is megabytes of stack arrays. */
		if (json_dumpf(root, out, JSON_COMPACT) != 0 || fputc('\n', out) == EOF)
			err = errno ? -errno : -EIO;
	}
	json_decref(root);
	free(t.v);
	return err;
}
