/* symbolize.c - reading code objects out of the target, once each.
 *
 * Lines are computed here rather than in BPF: decoding a line table is a
 * loop over variable-length entries that the verifier would make expensive,
 * while user space can cache the table per code object and decode any offset
 * (doc/design/naming.md, decision 6).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "cpython/constants.h"
#include "cpython/linetable.h"
#include "cpython/pystr.h"
#include "cpython/symbolize.h"
#include "proc/memread.h"
#include "util/budget.h"
#include "util/hashfree.h"

#define MAX_STR 1024		/* longest name or file name kept */
#define MAX_LINETABLE (1 << 20) /* longest line table read */
/* Bytes one symbolizer keeps (names, files, line tables, entries), and
 * under it what the session's budget has left. A target can make every
 * frame a distinct code object with a 1 MiB line table, so without a bound
 * it could grow taipan without end. Past it, new code objects are not read
 * (and count as failed) and methods keep their bare names. Line tables are
 * kept once per table, however many code objects share it (struct lt). */
#define MAX_CACHE_BYTES ((size_t)256 << 20)

enum first_arg { ARG_OTHER = 0, ARG_SELF, ARG_CLS };

/* The fields of a code object that taipan reads, and its identity
 * (tp_code_ident(), which BPF records with each frame): when the recorded one
 * differs from the cached one, another code object took this address. */
struct code_id {
	uint64_t ident;				 /* as BPF computes it: see struct tp_frame */
	uint64_t co_name, name, file, linetable; /* name: co_qualname on 3.11+, else co_name */
	int32_t firstlineno;
	int32_t units; /* TP_LF_TLBC: ob_size, the bytecode's length in code units */
};

/* A line table (a bytes object of the target), kept once for every code
 * object that points to it. Bytes objects never change, so the copy stays
 * right while the object lives at addr: it is used again without a read
 * while owner, a code object that pointed to it when it was last read or
 * checked, still lives with the same identity (owner_ident) and points to
 * it still; else it is read again, and a copy that differs makes a new
 * entry. */
struct lt {
	UT_hash_handle hh;
	uint64_t addr;
	uint64_t owner, owner_ident;
	uint32_t refs; /* code_infos that use it */
	bool in_hash;  /* false: replaced by a newer copy, alive for its refs */
	size_t len;
	uint8_t bytes[];
};

struct code_info {
	UT_hash_handle hh;
	uint64_t addr;
	struct code_id id;
	int ok;
	char *name;
	char *file;
	int firstlineno;
	int shim;  /* a frame CPython runs on its own behalf: left out of stacks */
	int freed; /* not ok: the object had been freed when it was read */
	enum first_arg first_arg;
	const uint8_t *linetable; /* lt's bytes, or its own copy (lt NULL) */
	size_t ltlen;
	struct lt *lt;
};

struct class_name {
	UT_hash_handle hh;
	uint64_t addr;
	char *name;
};

/* One "Class.method" string per (code, class). */
struct qual_name {
	UT_hash_handle hh;
	struct {
		uint64_t code, name,
		    cls; /* name: the code's name object, so a reused address misses */
	} key;
	char *name;
};

/* BPF's first look at a code object (struct tp_code_ev): the copies of its
 * parts, read in place of the target's memory when the object itself is gone
 * by the time a frame needs it. */
struct snap_key {
	uint64_t code, ident;
};

struct code_snap {
	UT_hash_handle hh;
	struct snap_key key;
	struct tp_code_part part[TP_CP__COUNT];
	const uint8_t *bytes[TP_CP__COUNT];
	size_t slot; /* in symbolizer.snap_ring */
	uint8_t data[];
};

/* Snapshots kept a process at most, the oldest dropped first. Most are
 * dropped much sooner: when the first frame of their code object is named. */
#define MAX_SNAPS 1024

struct symbolizer {
	struct pyproc pp;
	struct code_info *codes;
	struct class_name *classes;
	struct qual_name *quals;
	struct code_snap *snaps;
	struct code_snap *snap_ring[MAX_SNAPS];
	size_t snap_next;
	const struct code_snap *reading; /* set: rd() reads this snapshot only */
	struct lt *lts;			 /* line tables, by address */
	uint64_t ncodes, nfailed, nreplaced, nsnapped, nlt_shared;
	size_t bytes; /* held, against MAX_CACHE_BYTES, and taken from budget */
	struct budget *budget;
};

static void sz_add(struct symbolizer *sz, size_t n)
{
	sz->bytes += n;
	budget_charge(sz->budget, n);
}

static void sz_sub(struct symbolizer *sz, size_t n)
{
	sz->bytes -= n;
	budget_give(sz->budget, n);
}

/* What may still be read: nothing once MAX_CACHE_BYTES or the budget is
 * spent (each read is bounded, so either is passed by one read at most). */
static size_t sz_room(const struct symbolizer *sz)
{
	size_t room = sz->bytes < MAX_CACHE_BYTES ? MAX_CACHE_BYTES - sz->bytes : 0;
	size_t left = budget_left(sz->budget);
	return room < left ? room : left;
}

static void lt_put(struct symbolizer *sz, struct lt *t)
{
	if (!t || --t->refs)
		return;
	if (t->in_hash)
		HASH_DEL(sz->lts, t);
	sz_sub(sz, sizeof(*t) + t->len);
	free(t);
}

static void code_info_clear(struct symbolizer *sz, struct code_info *c)
{
	free(c->name);
	free(c->file);
	if (c->lt)
		lt_put(sz, c->lt);
	else
		free((void *)c->linetable);
	c->name = c->file = NULL;
	c->linetable = NULL;
	c->lt = NULL;
	c->ltlen = 0;
	c->ok = 0;
	c->first_arg = ARG_OTHER;
}

struct symbolizer *symbolizer_new(const struct pyproc *pp)
{
	struct symbolizer *sz = calloc(1, sizeof(*sz));
	if (sz)
		sz->pp = *pp;
	return sz;
}

void symbolizer_set_budget(struct symbolizer *sz, struct budget *b)
{
	budget_charge(b, sz->bytes);
	budget_give(sz->budget, sz->bytes);
	sz->budget = b;
}

size_t symbolizer_bytes(const struct symbolizer *sz)
{
	return sz->bytes;
}

uint64_t symbolizer_lines_shared(const struct symbolizer *sz)
{
	return sz->nlt_shared;
}

void symbolizer_free(struct symbolizer *sz)
{
	if (!sz)
		return;
	HASH_FREE_ALL(sz->codes, c, code_info_clear(sz, c));
	HASH_FREE_ALL(sz->classes, k, free(k->name));
	HASH_FREE_ALL(sz->quals, q, free(q->name));
	HASH_FREE_ALL(sz->snaps, n, (void)0);
	/* Every line table went with its last code object. */
	budget_give(sz->budget, sz->bytes);
	free(sz);
}

void symbolizer_counts(const struct symbolizer *sz, uint64_t *codes, uint64_t *failed)
{
	*codes = sz->ncodes;
	*failed = sz->nfailed;
}

/* How many bytes of snapshot n hold the target's memory from addr on. */
static size_t snap_avail(const struct code_snap *n, uint64_t addr, const uint8_t **from)
{
	for (int i = 0; i < TP_CP__COUNT; i++) {
		const struct tp_code_part *p = &n->part[i];
		if (p->len && addr >= p->addr && addr - p->addr < p->len) {
			*from = n->bytes[i] + (addr - p->addr);
			return p->len - (size_t)(addr - p->addr);
		}
	}
	return 0;
}

static int rd(const struct symbolizer *sz, uint64_t addr, void *buf, size_t len)
{
	if (sz->reading) {
		const uint8_t *from = NULL;
		if (snap_avail(sz->reading, addr, &from) < len)
			return -EFAULT;
		memcpy(buf, from, len);
		return 0;
	}
	return pyproc_read(&sz->pp, addr, buf, len);
}

static int sz_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return rd(ctx, addr, buf, len);
}

/* Reads a str (a bytes str on 2.7) as a new UTF-8 string of MAX_STR
 * characters at most, or NULL (cpython/pystr.h). */
static char *read_str(const struct symbolizer *sz, uint64_t obj)
{
	char buf[MAX_STR * 4 + 1];
	bool cut;
	if (pystr_read(&sz->pp, sz_read, (void *)sz, obj, MAX_STR, buf, sizeof(buf), &cut) < 0)
		return NULL;
	return strdup(buf);
}

/* Reads a bytes object's contents (a str on 2.7: the same layout), if it
 * holds at most max bytes. */
static uint8_t *read_bytes(const struct symbolizer *sz, uint64_t obj, size_t *len, size_t max)
{
	const struct py_layout *l = &sz->pp.layout;
	int64_t n = 0;
	if (!obj || rd(sz, obj + (uint64_t)l->var_size, &n, 8) || n < 0 || (uint64_t)n > max)
		return NULL;
	if (sz->reading) {
		/* A snapshot holds the start of a long table: the lines of the
		 * instructions it covers. */
		const uint8_t *from = NULL;
		size_t avail = snap_avail(sz->reading, obj + (uint64_t)l->bytes_sval, &from);
		if ((uint64_t)n > avail)
			n = (int64_t)avail;
	}
	uint8_t *b = malloc((size_t)n + 1);
	if (!b || rd(sz, obj + (uint64_t)l->bytes_sval, b, (size_t)n)) {
		free(b);
		return NULL;
	}
	*len = (size_t)n;
	return b;
}

static uint64_t field_ptr(const uint8_t *obj, size_t objlen, int32_t off)
{
	uint64_t v = 0;
	if (off >= 0 && (size_t)off + 8 <= objlen)
		memcpy(&v, obj + off, 8);
	return v;
}

#define CODE_HEAD 512

/* Whether the object at addr, whose head is obj (through ob_type), is a
 * block the allocator freed. The rest of such a block still holds the freed
 * object's fields, so its identity would match while the strs it points to
 * may already hold other text. (glibc's free overwrites ob_type as well,
 * which the type check after this sees.) */
static bool block_freed(const struct symbolizer *sz, uint64_t addr, const uint8_t *obj)
{
	const struct py_layout *l = &sz->pp.layout;
	if (sz->pp.free_threaded) {
		/* mimalloc links free blocks through their first word (ob_tid)
		 * and leaves the counts as they were when the object died: no
		 * local reference and a shared count of 0 (flags aside). A
		 * live object has a reference in one or the other, or is
		 * immortal (a local count of UINT32_MAX). */
		uint32_t local;
		int64_t shared;
		if (l->obj_type < PY_FT_REF_LOCAL_BEFORE_TYPE)
			return false;
		memcpy(&local, obj + l->obj_type - PY_FT_REF_LOCAL_BEFORE_TYPE, 4);
		memcpy(&shared, obj + l->obj_type - PY_FT_REF_SHARED_BEFORE_TYPE, 8);
		return !local && (shared >> PY_FT_REF_SHARED_SHIFT) == 0;
	}
	/* pymalloc: the reference count (the word before ob_type) now links
	 * the pool's free blocks, a pointer near the block itself, or 0 at the
	 * end of the list. No live object has a count of 0 or one within 1 MiB
	 * of its own address (3.14+ keep flags in the upper half, far above
	 * any address). */
	uint64_t refcnt = 0;
	if (l->obj_type < 8)
		return false;
	memcpy(&refcnt, obj + l->obj_type - 8, 8);
	return !refcnt || !((refcnt ^ addr) >> 20);
}

/* Reads the head of the code object at addr into obj and its identity into
 * id. Returns the number of bytes read, or a negative errno; -EINVAL when
 * the object is not a code object. */
static int read_code_head(struct symbolizer *sz, uint64_t addr, uint8_t *obj, struct code_id *id)
{
	const struct py_layout *l = &sz->pp.layout;
	int32_t hi = 0, offs[] = {l->code_filename,  l->code_name,	  l->code_qualname,
				  l->code_linetable, l->code_firstlineno, l->code_varnames,
				  l->code_argcount,  l->obj_type};
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		if (offs[i] + 8 > hi)
			hi = offs[i] + 8;
	memset(id, 0, sizeof(*id));
	if (hi > CODE_HEAD)
		return -EINVAL;
	int err = rd(sz, addr, obj, (size_t)hi);
	if (err)
		return err;
	if (block_freed(sz, addr, obj))
		return -ESTALE;
	/* A code object's type is PyCode_Type: anything else is a stale or
	 * corrupt pointer, and its "names" would be garbage. */
	if (sz->pp.code_type_addr &&
	    field_ptr(obj, (size_t)hi, l->obj_type) != sz->pp.code_type_addr)
		return -EINVAL;
	id->co_name = field_ptr(obj, (size_t)hi, l->code_name);
	id->name =
	    field_ptr(obj, (size_t)hi, l->code_qualname >= 0 ? l->code_qualname : l->code_name);
	id->file = field_ptr(obj, (size_t)hi, l->code_filename);
	id->linetable = field_ptr(obj, (size_t)hi, l->code_linetable);
	/* A layout that lacks co_firstlineno says -1 (the loop above only
	 * bounds offsets from above): the line stays 0 rather than being read
	 * from before obj. */
	if (l->code_firstlineno >= 0)
		memcpy(&id->firstlineno, obj + l->code_firstlineno, 4);
	if ((sz->pp.tp.off.flags & TP_LF_TLBC) && l->var_size >= 0 && l->var_size + 8 <= hi) {
		int64_t units = 0;
		memcpy(&units, obj + l->var_size, 8);
		id->units = units > 0 && units < INT32_MAX ? (int32_t)units : 0;
	}
	uint64_t chars = 0;
	if (id->co_name)
		rd(sz, id->co_name + sz->pp.tp.off.name_data, &chars, 8);
	id->ident = tp_code_ident(id->co_name, chars, id->file);
	return hi;
}

/* The bytes c holds, as charged to sz->bytes (a shared line table is
 * charged once, with its entry). */
static size_t code_bytes(const struct code_info *c)
{
	return (c->name ? strlen(c->name) + 1 : 0) + (c->file ? strlen(c->file) + 1 : 0) +
	       (c->lt ? 0 : c->ltlen);
}

/* Whether code object owner still lives with identity ident and points to
 * the line table at addr. */
static bool lt_owner_holds(struct symbolizer *sz, uint64_t owner, uint64_t ident, uint64_t addr)
{
	uint8_t obj[CODE_HEAD];
	struct code_id id;
	return read_code_head(sz, owner, obj, &id) >= 0 && id.ident == ident &&
	       id.linetable == addr;
}

/* c's line table (c->id.linetable), shared with the other code objects
 * that point to it; read at most room bytes when it must be read. */
static void lt_get(struct symbolizer *sz, struct code_info *c, size_t room)
{
	uint64_t addr = c->id.linetable;
	size_t len = 0;
	struct lt *t;
	if (!addr)
		return;
	HASH_FIND(hh, sz->lts, &addr, sizeof(addr), t);
	if (t && (t->owner == c->addr ? t->owner_ident == c->id.ident
				      : lt_owner_holds(sz, t->owner, t->owner_ident, addr))) {
		t->refs++;
		sz->nlt_shared++;
		goto use;
	}
	uint8_t *b = read_bytes(sz, addr, &len, room < MAX_LINETABLE ? room : MAX_LINETABLE);
	if (!b)
		return;
	if (t && t->len == len && !memcmp(t->bytes, b, len)) {
		/* The same table: c owns it from now on. */
		free(b);
		t->refs++;
		sz->nlt_shared++;
	} else {
		if (t) {
			/* Another table now lives at addr; the old copy stays
			 * with the code objects that hold it. */
			HASH_DEL(sz->lts, t);
			t->in_hash = false;
		}
		t = malloc(sizeof(*t) + len);
		if (!t) {
			free(b);
			return;
		}
		memset(t, 0, sizeof(*t));
		memcpy(t->bytes, b, len);
		free(b);
		t->addr = addr;
		t->len = len;
		t->refs = 1;
		t->in_hash = true;
		HASH_ADD(hh, sz->lts, addr, sizeof(t->addr), t);
		sz_add(sz, sizeof(*t) + len);
	}
	t->owner = c->addr;
	t->owner_ident = c->id.ident;
use:
	c->lt = t;
	c->linetable = t->bytes;
	c->ltlen = t->len;
}

/* (Re)reads everything about the code object c->addr into c. */
static void fill_code(struct symbolizer *sz, struct code_info *c)
{
	const struct py_layout *l = &sz->pp.layout;
	uint8_t obj[CODE_HEAD];
	if (!sz_room(sz))
		goto bad;
	int hi = read_code_head(sz, c->addr, obj, &c->id);
	c->freed = hi == -ESTALE;
	if (hi < 0)
		goto bad;
	c->name = read_str(sz, c->id.name);
	c->file = read_str(sz, c->id.file);
	if (!c->name)
		goto bad;
	c->firstlineno = c->id.firstlineno;
	size_t room = sz_room(sz);
	if (sz->reading) {
		/* A snapshot's table may be the start of one: its own copy. */
		c->linetable = read_bytes(sz, c->id.linetable, &c->ltlen,
					  room < MAX_LINETABLE ? room : MAX_LINETABLE);
	} else {
		lt_get(sz, c, room);
	}

	if ((sz->pp.tp.off.flags & TP_LF_SELF_CLASS) && l->code_argcount >= 0 &&
	    l->code_varnames >= 0) {
		int32_t argc = 0;
		memcpy(&argc, obj + l->code_argcount, 4);
		uint64_t names = field_ptr(obj, (size_t)hi, l->code_varnames), n0 = 0;
		if (argc > 0 && names && !rd(sz, names + (uint64_t)l->tuple_item, &n0, 8)) {
			char *a = read_str(sz, n0);
			if (a && !strcmp(a, "self"))
				c->first_arg = ARG_SELF;
			else if (a && !strcmp(a, "cls"))
				c->first_arg = ARG_CLS;
			free(a);
		}
	}
	/* 3.13+ runs __init__ under a frame of its own static code object
	 * (_Py_InitCleanup, which checks that __init__ returned None): named
	 * "__init__" in file "__init__" and on no line, as no compiled code
	 * object is. It stands for type.__call__, like the shims BPF skips. */
	c->shim = c->firstlineno == 0 && c->file && !strcmp(c->name, "__init__") &&
		  !strcmp(c->file, "__init__");
	c->ok = 1;
	sz_add(sz, code_bytes(c));
	return;
bad:
	sz_add(sz, code_bytes(c)); /* a file name read before the name failed */
	sz->nfailed++;
}

static struct code_info *load_code(struct symbolizer *sz, uint64_t addr)
{
	struct code_info *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->addr = addr;
	HASH_ADD(hh, sz->codes, addr, sizeof(c->addr), c);
	sz->ncodes++;
	sz_add(sz, sizeof(*c));
	fill_code(sz, c);
	return c;
}

/* Another code object now lives at c->addr: read it instead. */
static void replace_code(struct symbolizer *sz, struct code_info *c)
{
	sz_sub(sz, code_bytes(c));
	code_info_clear(sz, c);
	sz->nreplaced++;
	fill_code(sz, c);
}

static void snap_drop(struct symbolizer *sz, struct code_snap *n)
{
	HASH_DEL(sz->snaps, n);
	sz->snap_ring[n->slot] = NULL;
	free(n);
}

int symbolizer_describe(struct symbolizer *sz, const struct tp_code_ev *ev)
{
	struct code_snap *n;
	const uint8_t *src[TP_CP__COUNT] = {ev->head, ev->name, ev->qualname, ev->file,
					    ev->linetable};
	const size_t room[TP_CP__COUNT] = {TP_CODE_HEAD, TP_CODE_STR, TP_CODE_STR, TP_CODE_STR,
					   TP_CODE_LT};
	size_t total = 0;
	for (int i = 0; i < TP_CP__COUNT; i++)
		total += ev->part[i].len <= room[i] ? ev->part[i].len : room[i];
	struct snap_key key = {ev->code, ev->ident};
	HASH_FIND(hh, sz->snaps, &key, sizeof(key), n);
	if (n)
		snap_drop(sz, n); /* described again: the newer copy wins */
	if (!(n = malloc(sizeof(*n) + total)))
		return -ENOMEM;
	memset(n, 0, sizeof(*n));
	n->key = key;
	size_t at = 0;
	for (int i = 0; i < TP_CP__COUNT; i++) {
		n->part[i] = ev->part[i];
		if (n->part[i].len > room[i])
			n->part[i].len = (uint32_t)room[i];
		memcpy(n->data + at, src[i], n->part[i].len);
		n->bytes[i] = n->data + at;
		at += n->part[i].len;
	}
	if (sz->snap_ring[sz->snap_next])
		snap_drop(sz, sz->snap_ring[sz->snap_next]);
	n->slot = sz->snap_next;
	sz->snap_ring[n->slot] = n;
	sz->snap_next = (sz->snap_next + 1) % MAX_SNAPS;
	HASH_ADD(hh, sz->snaps, key, sizeof(n->key), n);
	return 0;
}

/* A frame's code object (identity ident) could not be read, or another now
 * lives at its address: if BPF described it, c is read from that copy. The
 * copy is dropped once a frame of its object was named either way. */
static void use_snapshot(struct symbolizer *sz, struct code_info *c, uint64_t ident)
{
	struct code_snap *n;
	struct snap_key key = {c->addr, ident};
	HASH_FIND(hh, sz->snaps, &key, sizeof(key), n);
	if (!n)
		return;
	if (!c->ok || c->id.ident != ident) {
		sz_sub(sz, code_bytes(c));
		code_info_clear(sz, c);
		sz->reading = n;
		fill_code(sz, c);
		sz->reading = NULL;
		if (c->ok && c->id.ident == ident)
			sz->nsnapped++;
	}
	snap_drop(sz, n);
}

uint64_t symbolizer_snapshots_used(const struct symbolizer *sz)
{
	return sz->nsnapped;
}

/* The short name of a class (tp_name without its module). */
static const char *class_name(struct symbolizer *sz, uint64_t cls)
{
	struct class_name *k;
	HASH_FIND(hh, sz->classes, &cls, sizeof(cls), k);
	if (k)
		return k->name;
	uint64_t tp_name = 0;
	char buf[256];
	if (!sz_room(sz) || rd(sz, cls + (uint64_t)sz->pp.layout.type_name, &tp_name, 8) ||
	    pyproc_read_cstr(&sz->pp, tp_name, buf, sizeof(buf)) <= 0)
		return NULL;
	k = calloc(1, sizeof(*k));
	const char *dot = strrchr(buf, '.');
	if (!k || !(k->name = strdup(dot ? dot + 1 : buf))) {
		free(k);
		return NULL;
	}
	k->addr = cls;
	HASH_ADD(hh, sz->classes, addr, sizeof(k->addr), k);
	sz_add(sz, sizeof(*k) + strlen(k->name) + 1);
	return k->name;
}

static const char *qualified(struct symbolizer *sz, struct code_info *c, uint64_t cls)
{
	struct qual_name *q;
	struct qual_name probe;
	memset(&probe, 0, sizeof(probe));
	probe.key.code = c->addr;
	probe.key.name = c->id.name;
	probe.key.cls = cls;
	HASH_FIND(hh, sz->quals, &probe.key, sizeof(probe.key), q);
	if (q)
		return q->name;
	const char *cn = class_name(sz, cls);
	if (!cn || !sz_room(sz))
		return c->name;
	q = calloc(1, sizeof(*q));
	if (!q)
		return c->name;
	q->key = probe.key;
	if (asprintf(&q->name, "%s.%s", cn, c->name) < 0) {
		free(q);
		return c->name;
	}
	HASH_ADD(hh, sz->quals, key, sizeof(q->key), q);
	sz_add(sz, sizeof(*q) + strlen(q->name) + 1);
	return q->name;
}

/* Most copies of one code object's bytecode looked through: one per
 * thread that ran it, in a process of at most this many threads. */
#define MAX_TLBC_COPIES 4096
#define NO_COPY INT64_MIN

/* 3.14t+: where instruction pointer ip lies in code object c's bytecode,
 * in bytes, whichever copy it runs: the main one, co_code_adaptive, or a
 * thread's own, co_tlbc->entries[i]. A frame's tlbc_index is not needed:
 * the copy is the one whose bytes hold ip, which also covers a frame
 * caught between the interpreter's two stores of a switch (the index
 * first, then the pointer). NO_COPY when no copy holds it (one freed
 * since, when its thread exited): no line rather than a wrong one. */
static int64_t tlbc_offset(const struct symbolizer *sz, const struct code_info *c, uint64_t ip)
{
	const struct py_layout *l = &sz->pp.layout;
	int64_t len = 2 * (int64_t)c->id.units;
	int64_t off = (int64_t)(ip - (c->addr + (uint64_t)l->code_adaptive));
	uint64_t arr = 0, size = 0, entries[64];
	/* Before its first instruction a frame points one unit before it. */
	if (!len || (off >= -2 && off < len))
		return off;
	if (l->code_tlbc < 0 || rd(sz, c->addr + (uint64_t)l->code_tlbc, &arr, 8) || !arr ||
	    rd(sz, arr, &size, 8))
		return NO_COPY;
	size = size < MAX_TLBC_COPIES ? size : MAX_TLBC_COPIES;
	for (uint64_t i = 1; i < size; i += 64) {
		uint64_t n = size - i < 64 ? size - i : 64;
		if (rd(sz, arr + 8 + 8 * i, entries, n * 8))
			return NO_COPY;
		for (uint64_t k = 0; k < n; k++) {
			off = (int64_t)(ip - entries[k]);
			if (entries[k] && off >= -2 && off < len)
				return off;
		}
	}
	return NO_COPY;
}

/* The line of frame f of code object c, from its position as BPF
 * recorded it. */
static int current_line(const struct symbolizer *sz, const struct code_info *c,
			const struct tp_frame *f)
{
	const struct pyproc *pp = &sz->pp;
	uint32_t pos = f->pos;
	int64_t byte_off;
	if (pp->tp.off.flags & TP_LF_LASTI_PTR) {
		/* pos = instruction pointer - code object; the bytecode starts at
		 * co_code_adaptive. Before the first instruction runs, the
		 * pointer sits one unit before it. */
		int64_t rel = (int64_t)pos - pp->layout.code_adaptive;
		if (pp->tp.off.flags & TP_LF_TLBC) {
			rel = f->aux ? tlbc_offset(sz, c, f->aux) : NO_COPY;
			if (rel == NO_COPY)
				return 0;
			pos = 1; /* not "before the first instruction" by itself */
		}
		if (pos == 0 || rel < 0)
			return c->firstlineno;
		byte_off = rel & ~1LL;
	} else {
		int32_t lasti = (int32_t)pos;
		if (lasti < 0)
			return c->firstlineno;
		byte_off = pp->lasti_in_units ? 2LL * lasti : lasti;
	}
	if (!c->linetable || byte_off > UINT32_MAX)
		return c->firstlineno;
	int line = py_linetable_line_near(pp->linetable, c->linetable, c->ltlen, c->firstlineno,
					  (uint32_t)byte_off);
	return line < 0 ? 0 : line;
}

int symbolizer_frame(struct symbolizer *sz, const struct tp_frame *f, struct prof_frame *out)
{
	struct code_info *c;
	memset(out, 0, sizeof(*out));
	HASH_FIND(hh, sz->codes, &f->code, sizeof(f->code), c);
	if (!c)
		c = load_code(sz, f->code);
	else if (f->ident && f->ident != c->id.ident)
		replace_code(sz, c);
	if (c && f->ident && sz->snaps)
		use_snapshot(sz, c, f->ident);
	if (c && !c->ok && c->freed) {
		/* Read now, the object was freed after the sample, and BPF
		 * made no copy of it. */
		out->kind = PROF_FRAME_MARKER;
		out->name = "[code object freed]";
		return -ESTALE;
	}
	if (!c || !c->ok) {
		out->kind = PROF_FRAME_MARKER;
		out->name = "[unknown]";
		return c ? -EFAULT : -ENOMEM;
	}
	/* Read now, the object at this address is another than the one the
	 * sample ran: that one was freed in between, and this one's name
	 * would be a wrong one. */
	if (f->ident && f->ident != c->id.ident) {
		out->kind = PROF_FRAME_MARKER;
		out->name = "[code object freed]";
		return -ESTALE;
	}
	if (c->shim) {
		out->kind = PROF_FRAME_MARKER;
		out->name = "[shim]";
		return SYMBOLIZER_SKIP;
	}
	out->kind = PROF_FRAME_INTERP;
	out->name = c->name;
	if (c->first_arg != ARG_OTHER && f->aux)
		out->name = qualified(sz, c, f->aux);
	out->file = c->file ? c->file : "<unknown>";
	out->first_line = c->firstlineno;
	out->line = current_line(sz, c, f);
	return 0;
}
