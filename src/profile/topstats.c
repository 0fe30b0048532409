/* topstats.c - own and total samples per function over a window of the
 * profile, for `taipan top`.
 *
 * Functions are keyed by their interned name and file pointers: the profile
 * interns every string once, so equal strings are the same pointer and a
 * function's frames on different lines fold into one row. Native code is
 * keyed by name and module, so that a native function's frames at each of
 * its addresses fold into one row too.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* An insert that cannot grow its table sets the entry's oom flag instead
 * of uthash's default of calling exit(). */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(ent) ((ent)->oom = true)
#include <uthash.h>

#include "profile/topstats.h"
#include "util/hashfree.h"

struct func {
	UT_hash_handle hh;
	bool oom;
	struct {
		const char *name, *file, *module;
	} key;
	struct top_row row;
	size_t index; /* in flist */
	size_t stamp; /* the last sample (index + 1) counted in row.total */
};

struct snap {
	uint64_t *counts;
	size_t n;
};

struct thread_ent {
	UT_hash_handle hh;
	bool oom;
	struct top_thread t;
};

struct topstats {
	unsigned int window;
	struct snap *ring; /* snapshots, oldest at ring[head] */
	unsigned int cap, head, len;
	struct func *funcs;   /* by key */
	int32_t *frame_func;  /* frame id -> index in flist, -1 unknown, -2 kernel */
	uint32_t nframe_func; /* entries in frame_func */
	struct func **flist;  /* every function, by index */
	size_t nfuncs, funcs_cap;
	const struct top_row **rows; /* in view, sorted */
	size_t nrows;
	struct thread_ent *thread_index;
	struct top_thread *threads;
	size_t nthreads;
	uint64_t view, in_window;
};

static void snap_clear(struct snap *s)
{
	free(s->counts);
	s->counts = NULL;
	s->n = 0;
}

static int snap_take(struct snap *s, const struct profile *p)
{
	size_t n = profile_sample_count(p);
	uint64_t *c = n ? malloc(n * sizeof(*c)) : NULL;
	if (n && !c)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		c[i] = prof_value(p, profile_sample(p, i));
	free(s->counts);
	s->counts = c;
	s->n = n;
	return 0;
}

struct topstats *topstats_new(unsigned int window)
{
	struct topstats *ts = calloc(1, sizeof(*ts));
	if (!ts)
		return NULL;
	ts->window = window;
	/* window ticks back needs window + 1 snapshots: now's and window
	 * older ones. The first is empty: counts from the start. */
	ts->cap = window ? window + 1 : 1;
	ts->ring = calloc(ts->cap, sizeof(*ts->ring));
	if (!ts->ring) {
		free(ts);
		return NULL;
	}
	ts->len = 1;
	return ts;
}

static void clear_threads(struct topstats *ts)
{
	HASH_FREE_ALL(ts->thread_index, e, (void)0);
	free(ts->threads);
	ts->threads = NULL;
	ts->nthreads = 0;
}

void topstats_free(struct topstats *ts)
{
	if (!ts)
		return;
	for (unsigned int i = 0; i < ts->cap; i++)
		snap_clear(&ts->ring[i]);
	free(ts->ring);
	HASH_CLEAR(hh, ts->funcs);
	for (size_t i = 0; i < ts->nfuncs; i++)
		free(ts->flist[i]);
	free(ts->flist);
	free(ts->frame_func);
	free(ts->rows);
	clear_threads(ts);
	free(ts);
}

int topstats_tick(struct topstats *ts, const struct profile *p)
{
	if (!ts->window)
		return 0;
	struct snap s = {0};
	int ret = snap_take(&s, p);
	if (ret)
		return ret;
	if (ts->len == ts->cap) {
		snap_clear(&ts->ring[ts->head]);
		ts->head = (ts->head + 1) % ts->cap;
		ts->len--;
	}
	ts->ring[(ts->head + ts->len) % ts->cap] = s;
	ts->len++;
	return 0;
}

int topstats_reset(struct topstats *ts, const struct profile *p)
{
	struct snap s = {0};
	int ret = snap_take(&s, p);
	if (ret)
		return ret;
	for (unsigned int i = 0; i < ts->cap; i++)
		snap_clear(&ts->ring[i]);
	ts->head = 0;
	ts->ring[0] = s;
	ts->len = 1;
	return 0;
}

/* The function of frame id, or -1 for kernel frames (the system call or
 * fault that a function of the program made), or -ENOMEM. */
static int func_of(struct topstats *ts, const struct profile *p, uint32_t id)
{
	if (id >= ts->nframe_func) {
		uint32_t n = profile_frame_count(p);
		if (id >= n)
			return -1;
		int32_t *m = realloc(ts->frame_func, n * sizeof(*m));
		if (!m)
			return -ENOMEM;
		for (uint32_t i = ts->nframe_func; i < n; i++)
			m[i] = -2;
		ts->frame_func = m;
		ts->nframe_func = n;
	}
	if (ts->frame_func[id] != -2)
		return ts->frame_func[id];
	const struct prof_frame *f = profile_frame(p, id);
	if (f->kind == PROF_FRAME_KERNEL) {
		ts->frame_func[id] = -1;
		return -1;
	}
	bool native = f->kind == PROF_FRAME_NATIVE;
	struct func probe, *fn;
	memset(&probe, 0, sizeof(probe));
	/* Unnamed native code: one row per module, not one per address. */
	probe.key.name = native && prof_frame_unnamed(f) ? NULL : f->name;
	probe.key.file = native ? NULL : f->file;
	probe.key.module = native ? f->module : NULL;
	HASH_FIND(hh, ts->funcs, &probe.key, sizeof(probe.key), fn);
	if (!fn) {
		if (ts->nfuncs == ts->funcs_cap) {
			size_t cap = ts->funcs_cap ? 2 * ts->funcs_cap : 64;
			struct func **l = realloc(ts->flist, cap * sizeof(*l));
			if (!l)
				return -ENOMEM;
			ts->flist = l;
			ts->funcs_cap = cap;
		}
		fn = calloc(1, sizeof(*fn));
		if (!fn)
			return -ENOMEM;
		fn->key = probe.key;
		fn->row.name = probe.key.name ? probe.key.name : "[unnamed]";
		fn->row.file = probe.key.file;
		fn->row.module = probe.key.module;
		fn->row.first_line = native ? 0 : f->first_line;
		fn->index = ts->nfuncs;
		HASH_ADD(hh, ts->funcs, key, sizeof(fn->key), fn);
		if (fn->oom) {
			free(fn);
			return -ENOMEM;
		}
		ts->flist[ts->nfuncs++] = fn;
	}
	/* Every frame of a function (one per line) maps to its one row. */
	ts->frame_func[id] = (int32_t)fn->index;
	return ts->frame_func[id];
}

static int count_thread(struct topstats *ts, const struct prof_labels *lb, uint64_t n)
{
	struct thread_ent *e;
	HASH_FIND(hh, ts->thread_index, &lb->tid, sizeof(lb->tid), e);
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return -ENOMEM;
		e->t.tid = lb->tid;
		e->t.name = lb->thread_name;
		HASH_ADD(hh, ts->thread_index, t.tid, sizeof(e->t.tid), e);
		if (e->oom) {
			free(e);
			return -ENOMEM;
		}
		ts->nthreads++;
	}
	e->t.samples += n;
	return 0;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a > b ? -1 : a < b;
}

static int by_sort(const void *x, const void *y, void *arg)
{
	const struct top_row *a = *(const struct top_row *const *)x;
	const struct top_row *b = *(const struct top_row *const *)y;
	enum top_sort sort_key = *(const enum top_sort *)arg;
	int c = sort_key == TOP_SORT_OWN ? cmp_u64(a->own, b->own) : cmp_u64(a->total, b->total);
	if (!c)
		c = sort_key == TOP_SORT_OWN ? cmp_u64(a->total, b->total)
					     : cmp_u64(a->own, b->own);
	if (!c)
		c = strcmp(a->name ? a->name : "", b->name ? b->name : "");
	return c;
}

static int by_tid(const void *x, const void *y)
{
	const struct top_thread *a = x, *b = y;
	return a->tid < b->tid ? -1 : a->tid > b->tid;
}

int topstats_compute(struct topstats *ts, const struct profile *p, uint32_t tid, enum top_sort sort)
{
	const struct snap *base = &ts->ring[ts->head];
	size_t n = profile_sample_count(p);
	int ret;

	for (size_t i = 0; i < ts->nfuncs; i++) {
		ts->flist[i]->row.own = ts->flist[i]->row.total = 0;
		memset(ts->flist[i]->row.own_state, 0, sizeof(ts->flist[i]->row.own_state));
		ts->flist[i]->stamp = 0;
	}
	clear_threads(ts);
	ts->view = ts->in_window = 0;
	for (size_t i = 0; i < n; i++) {
		const struct prof_sample *s = profile_sample(p, i);
		uint64_t d = prof_value(p, s) - (i < base->n ? base->counts[i] : 0);
		if (!d)
			continue;
		ts->in_window += d;
		ret = count_thread(ts, &s->labels, d);
		if (ret)
			return ret;
		if (tid && s->labels.tid != tid)
			continue;
		ts->view += d;
		bool leaf = true;
		uint8_t state = s->labels.state < PROF_STATE__COUNT ? s->labels.state : 0;
		/* Root first: the innermost non-kernel frame is the last one,
		 * below the state leaf of a thread off the CPU. */
		uint32_t top = s->nframes - (state > PROF_STATE_RUNNING && s->nframes);
		for (uint32_t k = top; k-- > 0;) {
			int fi = func_of(ts, p, s->frames[k]);
			if (fi == -ENOMEM)
				return fi;
			if (fi < 0)
				continue;
			struct func *fn = ts->flist[fi];
			if (leaf) {
				fn->row.own += d;
				fn->row.own_state[state] += d;
			}
			leaf = false;
			/* Recursion: a function counts once per sample. */
			if (fn->stamp != i + 1) {
				fn->row.total += d;
				fn->stamp = i + 1;
			}
		}
	}

	const struct top_row **rows =
	    realloc(ts->rows, (ts->nfuncs ? ts->nfuncs : 1) * sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	ts->rows = rows;
	ts->nrows = 0;
	for (size_t i = 0; i < ts->nfuncs; i++)
		if (ts->flist[i]->row.total)
			rows[ts->nrows++] = &ts->flist[i]->row;
	qsort_r(rows, ts->nrows, sizeof(*rows), by_sort, &sort);

	if (ts->nthreads) {
		ts->threads = malloc(ts->nthreads * sizeof(*ts->threads));
		if (!ts->threads) {
			clear_threads(ts);
			return -ENOMEM;
		}
		size_t k = 0;
		struct thread_ent *e, *tmp;
		HASH_ITER(hh, ts->thread_index, e, tmp)
		ts->threads[k++] = e->t;
		qsort(ts->threads, ts->nthreads, sizeof(*ts->threads), by_tid);
	}
	return 0;
}

size_t topstats_rows(const struct topstats *ts, const struct top_row *const **rows)
{
	*rows = ts->rows;
	return ts->nrows;
}

size_t topstats_threads(const struct topstats *ts, const struct top_thread **threads)
{
	*threads = ts->threads;
	return ts->nthreads;
}

uint64_t topstats_view_samples(const struct topstats *ts)
{
	return ts->view;
}

uint64_t topstats_window_samples(const struct topstats *ts)
{
	return ts->in_window;
}
