/* pythreads.c - the Python names of a process's threads, from threading._active.
 *
 * Every read goes through the struct pyproc (process_vm_readv on a live
 * process, or a captured image), every loop has a bound, and the reads of
 * one pythreads_read() share a budget (PYTHREADS_READ_BUDGET): a dict being
 * resized under us, or memory that is not what the layout says, ends in
 * fewer names, never in a hang.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "cpython/constants.h"
#include "cpython/pyobj.h"
#include "cpython/pythreads.h"
#include "util/hashfree.h"

/* Interpreters looked at: each has its own threading module. */
#define MAX_INTERPS 16

/* The int at obj, which must be non-negative and fit 64 bits. */
static int read_ident(struct pyobj_rd *r, uint64_t obj, uint64_t *out)
{
	int64_t v;
	if (pyobj_int(r, obj, r->l->int_ival >= 0, &v) || v < 0)
		return -EFAULT;
	*out = (uint64_t)v;
	return 0;
}

struct collect {
	struct pythread_name *out;
	size_t max, n;
};

/* 3.x Thread.__init__ sets self._name; 2.7's sets self.__name, which the
 * class mangles to _Thread__name. */
static const char *const name_keys[] = {"_name", "_Thread__name", NULL};

static bool active_fn(struct pyobj_rd *r, uint64_t key, uint64_t thread, void *ctx)
{
	struct collect *c = ctx;
	uint64_t ident, name;
	bool cut;
	if (c->n >= c->max)
		return true;
	if (read_ident(r, key, &ident))
		return false;
	if (!(name = pyobj_attr_get(r, thread, name_keys)) || !pyobj_is_str(r, name))
		return false;
	struct pythread_name *t = &c->out[c->n];
	if (pyobj_str(r, name, t->name, sizeof(t->name), &cut) <= 0)
		return false;
	for (size_t i = 0; i < c->n; i++)
		if (c->out[i].ident == ident)
			return false; /* the same thread in two interpreters: the first */
	t->ident = ident;
	c->n++;
	return false;
}

static int by_ident(const void *a, const void *b)
{
	uint64_t x = ((const struct pythread_name *)a)->ident,
		 y = ((const struct pythread_name *)b)->ident;
	return x < y ? -1 : x > y;
}

int pythreads_read(const struct pyproc *pp, struct pythread_name *out, size_t max)
{
	const struct py_layout *l = &pp->layout;
	struct pyobj_rd r = {.pp = pp, .l = l, .budget = PYTHREADS_READ_BUDGET};
	struct collect c = {.out = out, .max = max};
	static const char *const threading[] = {"threading", NULL}, *const active[] = {"_active",
										       NULL};
	bool found = false;
	if (l->interp_modules < 0 || l->module_dict < 0 || l->interp_next < 0 ||
	    (l->dict_keys < 0 && l->dict_table < 0) || l->obj_type < 0)
		return -ENOTSUP;
	uint64_t interp;
	if (pyobj_u64(&r, pp->tp.interp_head_addr, &interp))
		return r.gone ? r.gone : -EFAULT;
	for (int i = 0; i < MAX_INTERPS && interp; i++) {
		uint64_t modules, mod, md, act;
		if (pyobj_u64(&r, interp + (uint64_t)l->interp_modules, &modules))
			break;
		if ((mod = pyobj_dict_get(&r, modules, threading)) &&
		    !pyobj_u64(&r, mod + (uint64_t)l->module_dict, &md) &&
		    (act = pyobj_dict_get(&r, md, active))) {
			found = true;
			pyobj_dict_each(&r, act, active_fn, &c);
		}
		if (pyobj_u64(&r, interp + (uint64_t)l->interp_next, &interp))
			break;
	}
	if (r.gone)
		return r.gone;
	if (!found)
		return -ENOENT;
	qsort(out, c.n, sizeof(*out), by_ident);
	return (int)c.n;
}

const char *pythreads_find(const struct pythread_name *names, size_t n, uint64_t ident)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (names[mid].ident == ident)
			return names[mid].name;
		if (names[mid].ident < ident)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* An OS thread: the ident its thread state holds. */
struct tident {
	uint32_t tid;
	uint64_t tstate;
	uint64_t ident;
	bool ok;	    /* ident was read */
	unsigned int tries; /* reads made because it had no name */
	UT_hash_handle hh;
};

/* Threads remembered per process; past this, forgotten all at once. */
#define MAX_TIDS 65536
/* Reads for a thread without a name before only staleness causes more. */
#define MAX_TRIES 3

struct pythreads {
	struct tident *tids;
	unsigned int ntids;
	struct pythread_name *names;
	size_t nnames;
	uint64_t read_ns;
	bool have_read;
};

struct pythreads *pythreads_new(void)
{
	return calloc(1, sizeof(struct pythreads));
}

static void forget_tids(struct pythreads *t)
{
	HASH_FREE_ALL(t->tids, e, (void)0);
	t->ntids = 0;
}

void pythreads_free(struct pythreads *t)
{
	if (!t)
		return;
	forget_tids(t);
	free(t->names);
	free(t);
}

static void refresh(struct pythreads *t, const struct pyproc *pp, uint64_t now_ns)
{
	t->have_read = true;
	t->read_ns = now_ns;
	struct pythread_name *buf = malloc(PYTHREADS_MAX * sizeof(*buf));
	if (!buf)
		return;
	int n = pythreads_read(pp, buf, PYTHREADS_MAX);
	if (n < 0) {
		/* Names already known stay: a read that failed half-way (a
		 * dict resized under it) is no news about them. Only a
		 * module that is not (or no longer) there empties the list. */
		if (n == -ENOENT)
			t->nnames = 0;
		free(buf);
		return;
	}
	struct pythread_name *shrunk = realloc(buf, (size_t)(n ? n : 1) * sizeof(*buf));
	free(t->names);
	t->names = shrunk ? shrunk : buf;
	t->nnames = (size_t)n;
}

const char *pythreads_name(struct pythreads *t, const struct pyproc *pp, uint32_t tid,
			   uint64_t tstate, uint64_t now_ns)
{
	if (!t || pp->layout.ts_thread_id < 0)
		return NULL;
	struct tident *e;
	HASH_FIND(hh, t->tids, &tid, sizeof(tid), e);
	if (!tstate && (!e || !e->ok))
		return NULL;
	if (!tstate)
		tstate = e->tstate;
	if (!e) {
		if (t->ntids >= MAX_TIDS)
			forget_tids(t);
		if (!(e = calloc(1, sizeof(*e))))
			return NULL;
		e->tid = tid;
		HASH_ADD(hh, t->tids, tid, sizeof(e->tid), e);
		t->ntids++;
	}
	if (!e->ok || e->tstate != tstate) {
		e->tstate = tstate;
		e->tries = 0;
		e->ok = !pyproc_read(pp, tstate + (uint64_t)pp->layout.ts_thread_id, &e->ident,
				     sizeof(e->ident));
		if (!e->ok)
			return NULL;
	}
	const char *name = t->have_read ? pythreads_find(t->names, t->nnames, e->ident) : NULL;
	uint64_t age = now_ns - t->read_ns;
	bool due = !t->have_read || age >= PYTHREADS_STALE_NS ||
		   (!name && e->tries < MAX_TRIES && age >= PYTHREADS_RETRY_NS);
	if (due) {
		if (!name)
			e->tries++;
		refresh(t, pp, now_ns);
		name = pythreads_find(t->names, t->nnames, e->ident);
	}
	return name;
}
