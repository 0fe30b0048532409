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

#include "cpython/pyobj.h"
#include "cpython/pythreads.h"
#include "cpython/constants.h"

/* Entries read from a dict at once. */
#define CHUNK 64
/* Interpreters looked at: each has its own threading module. */
#define MAX_INTERPS 16
/* Whether the str at obj is one of names. */
static bool str_is(struct pyobj_rd *r, uint64_t obj, const char *const *names)
{
	char buf[64];
	bool cut;
	if (pyobj_str(r, obj, buf, sizeof(buf), &cut) < 0 || cut)
		return false;
	for (; *names; names++)
		if (!strcmp(buf, *names))
			return true;
	return false;
}

/* Called per live entry of a dict; returns true to stop. */
typedef bool (*entry_fn)(struct pyobj_rd *r, uint64_t key, uint64_t value, void *ctx);

/* The entries of a PyDictKeysObject (3.6+): values is the split table's
 * values array (PyObject *[]) or 0, with room for vcap of them. */
static int keys_each(struct pyobj_rd *r, uint64_t keys, uint64_t values, uint64_t vcap, entry_fn fn,
		     void *ctx)
{
	const struct py_layout *l = r->l;
	uint8_t h[PYOBJ_HDR];
	if (l->dk_indices <= 0 || l->dk_indices > PYOBJ_HDR ||
	    pyobj_read(r, keys, h, (size_t)l->dk_indices))
		return -EFAULT;
	size_t hl = (size_t)l->dk_indices;
	uint64_t index_bytes, size;
	bool general = true;
	if (l->dk_log2_size >= 0) { /* 3.11+ */
		unsigned int lg = (unsigned int)pyobj_get(h, hl, l->dk_log2_size, 1),
			     lgi = (unsigned int)pyobj_get(h, hl, l->dk_log2_index_bytes, 1);
		if (lg > 30 || lgi > 33 || l->dk_kind < 0)
			return -EFAULT;
		size = 1ULL << lg;
		index_bytes = 1ULL << lgi;
		general = pyobj_get(h, hl, l->dk_kind, 1) == PY_DICT_KEYS_GENERAL;
	} else { /* 3.6-3.10: dk_size slots of the narrowest index that fits */
		size = pyobj_get(h, hl, l->dk_size, 8);
		if (!size || size > (1ULL << 30) || (size & (size - 1)))
			return -EFAULT;
		index_bytes = size * (size <= 0xff ? 1 : size <= 0xffff ? 2 : 4);
	}
	int64_t n = (int64_t)pyobj_get(h, hl, l->dk_nentries, 8);
	if (n < 0 || (uint64_t)n > size)
		return -EFAULT;
	if (n > PYTHREADS_DICT_MAX)
		n = PYTHREADS_DICT_MAX;
	if ((uint64_t)n > vcap && values)
		n = (int64_t)vcap;
	int32_t esize = general ? l->entry_size : l->uentry_size,
		koff = general ? l->entry_key : l->uentry_key,
		voff = general ? l->entry_value : l->uentry_value;
	if (esize <= 0 || esize > 64 || koff < 0 || voff < 0)
		return -ENOTSUP;
	uint64_t entries = keys + (uint64_t)l->dk_indices + index_bytes;
	uint8_t eb[CHUNK * 64];
	uint64_t vb[CHUNK];
	for (int64_t i = 0; i < n; i += CHUNK) {
		size_t k = (size_t)(n - i < CHUNK ? n - i : CHUNK);
		if (pyobj_read(r, entries + (uint64_t)i * (uint64_t)esize, eb, k * (size_t)esize))
			return -EFAULT;
		if (values && pyobj_read(r, values + (uint64_t)i * 8, vb, k * 8))
			return -EFAULT;
		for (size_t j = 0; j < k; j++) {
			const uint8_t *e = eb + j * (size_t)esize;
			uint64_t key = pyobj_get(e, (size_t)esize, koff, 8);
			uint64_t val = values ? vb[j] : pyobj_get(e, (size_t)esize, voff, 8);
			if (key && val && fn(r, key, val, ctx))
				return 0;
		}
	}
	return 0;
}

/* The entries of the PyDictObject at dict. */
static int dict_each(struct pyobj_rd *r, uint64_t dict, entry_fn fn, void *ctx)
{
	const struct py_layout *l = r->l;
	uint8_t h[PYOBJ_HDR];
	if (l->dict_keys >= 0) {
		int32_t end = (l->dict_keys > l->dict_values ? l->dict_keys : l->dict_values) + 8;
		if (l->dict_values < 0 || end > PYOBJ_HDR || pyobj_read(r, dict, h, (size_t)end))
			return -EFAULT;
		uint64_t keys = pyobj_get(h, (size_t)end, l->dict_keys, 8),
			 values = pyobj_get(h, (size_t)end, l->dict_values, 8);
		if (!keys)
			return -EFAULT;
		/* Before 3.11 ma_values is the array itself. */
		if (values && l->values_values > 0)
			values += (uint64_t)l->values_values;
		return keys_each(r, keys, values, UINT64_MAX, fn, ctx);
	}
	/* 2.7: ma_mask + 1 slots, each {hash, key, value}; a dummy key has no
	 * value. */
	int32_t end = (l->dict_mask > l->dict_table ? l->dict_mask : l->dict_table) + 8;
	if (l->dict_mask < 0 || l->dict_table < 0 || end > PYOBJ_HDR ||
	    pyobj_read(r, dict, h, (size_t)end))
		return -ENOTSUP;
	uint64_t mask = pyobj_get(h, (size_t)end, l->dict_mask, 8),
		 table = pyobj_get(h, (size_t)end, l->dict_table, 8);
	int32_t esize = l->entry_size;
	if (!table || mask >= PYTHREADS_DICT_MAX || ((mask + 1) & mask) || esize <= 0 || esize > 64)
		return -EFAULT;
	uint8_t eb[CHUNK * 64];
	for (uint64_t i = 0; i <= mask; i += CHUNK) {
		size_t k = (size_t)(mask + 1 - i < CHUNK ? mask + 1 - i : CHUNK);
		if (pyobj_read(r, table + i * (uint64_t)esize, eb, k * (size_t)esize))
			return -EFAULT;
		for (size_t j = 0; j < k; j++) {
			const uint8_t *e = eb + j * (size_t)esize;
			uint64_t key = pyobj_get(e, (size_t)esize, l->entry_key, 8),
				 val = pyobj_get(e, (size_t)esize, l->entry_value, 8);
			if (key && val && fn(r, key, val, ctx))
				return 0;
		}
	}
	return 0;
}

/* The attributes of the object at obj: its __dict__, managed dict or values. */
static int attrs_each(struct pyobj_rd *r, uint64_t obj, entry_fn fn, void *ctx)
{
	const struct py_layout *l = r->l;
	uint64_t type, flags = 0, dict = 0;
	uint8_t t[1024];
	int32_t end = 0, offs[] = {l->type_flags, l->type_dictoffset, l->type_basicsize,
				   l->heaptype_cached_keys};
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		if (offs[i] + 8 > end)
			end = offs[i] + 8;
	if (l->type_flags < 0 || l->type_dictoffset < 0 || (size_t)end > sizeof(t))
		return -ENOTSUP;
	if (pyobj_u64(r, obj + (uint64_t)l->obj_type, &type) || pyobj_read(r, type, t, (size_t)end))
		return -EFAULT;
	flags = pyobj_get(t, (size_t)end, l->type_flags, 8);
	if (r->pp->objdict != PY_OD_DICTOFFSET && (flags & PY_TPFLAGS_MANAGED_DICT)) {
		uint64_t keys = pyobj_get(t, (size_t)end, l->heaptype_cached_keys, 8), values = 0,
			 vcap = UINT64_MAX;
		int64_t at =
		    r->pp->free_threaded ? PY_FT_MANAGED_DICT_OFFSET : PY_MANAGED_DICT_OFFSET;
		if (pyobj_u64(r, obj + (uint64_t)at, &dict))
			return -EFAULT;
		switch (r->pp->objdict) {
		case PY_OD_MANAGED_VALUES_PTR:
			if (pyobj_u64(r, obj + (uint64_t)PY_MANAGED_VALUES_OFFSET_311, &values))
				return -EFAULT;
			break;
		case PY_OD_MANAGED_TAGGED:
			if (dict & 1) { /* values, tagged: _PyDictOrValues_GetValues */
				values = dict + 1;
				dict = 0;
			}
			break;
		case PY_OD_MANAGED_INLINE:
			if (!dict && (flags & PY_TPFLAGS_INLINE_VALUES)) {
				int64_t basic =
				    (int64_t)pyobj_get(t, (size_t)end, l->type_basicsize, 8);
				uint8_t cap = 0, valid = 0;
				if (basic <= 0 || basic > (1 << 20) || l->values_capacity < 0 ||
				    l->values_valid < 0)
					return -EFAULT;
				values = obj + (uint64_t)basic;
				if (pyobj_read(r, values + (uint64_t)l->values_capacity, &cap, 1) ||
				    pyobj_read(r, values + (uint64_t)l->values_valid, &valid, 1))
					return -EFAULT;
				if (!valid)
					return 0;
				vcap = cap;
			}
			break;
		case PY_OD_DICTOFFSET:
			break;
		}
		if (dict)
			return dict_each(r, dict, fn, ctx);
		if (!values || !keys)
			return 0;
		if (l->values_values > 0)
			values += (uint64_t)l->values_values;
		return keys_each(r, keys, values, vcap, fn, ctx);
	}
	int64_t off = (int64_t)pyobj_get(t, (size_t)end, l->type_dictoffset, 8);
	if (off <= 0 || off > (1 << 20)) /* none, or at the end of a variable-size object */
		return 0;
	if (pyobj_u64(r, obj + (uint64_t)off, &dict) || !dict)
		return 0;
	return dict_each(r, dict, fn, ctx);
}

struct find {
	const char *const *names;
	uint64_t value;
};

static bool find_fn(struct pyobj_rd *r, uint64_t key, uint64_t value, void *ctx)
{
	struct find *f = ctx;
	if (!str_is(r, key, f->names))
		return false;
	f->value = value;
	return true;
}

/* The value of the first key of dict that is one of names, or 0. */
static uint64_t dict_get(struct pyobj_rd *r, uint64_t dict, const char *const *names)
{
	struct find f = {.names = names};
	if (!dict || dict_each(r, dict, find_fn, &f))
		return 0;
	return f.value;
}

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
	struct find f = {.names = name_keys};
	if (attrs_each(r, thread, find_fn, &f) || !(name = f.value) || !pyobj_is_str(r, name))
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
		if ((mod = dict_get(&r, modules, threading)) &&
		    !pyobj_u64(&r, mod + (uint64_t)l->module_dict, &md) &&
		    (act = dict_get(&r, md, active))) {
			found = true;
			dict_each(&r, act, active_fn, &c);
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
	struct tident *e, *tmp;
	HASH_ITER(hh, t->tids, e, tmp)
	{
		HASH_DEL(t->tids, e);
		free(e);
	}
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
	if (!t || !tstate || pp->layout.ts_thread_id < 0)
		return NULL;
	struct tident *e;
	HASH_FIND(hh, t->tids, &tid, sizeof(tid), e);
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
