/* out_otlp.c - OpenTelemetry profiles: an ExportProfilesServiceRequest of
 * opentelemetry.proto.profiles.v1development (src/output/opentelemetry/),
 * binary protobuf, as a Collector, Pyroscope or Parca takes it.
 *
 * The dictionary is dict.c's, as pprof's is: the same strings (escaped, so
 * valid UTF-8), functions, mappings and locations, at the same positions
 * (OTLP's tables start with a zero entry where pprof's ids start at 1).
 * To it this adds the attribute table and the stack table, both
 * deduplicated.
 *
 * Each process is one ResourceProfiles (process.pid, service.name, ...). Its
 * samples go out once per sample type, because an OTLP profile has one:
 * samples (count), cpu (nanoseconds), and in wall and off-cpu modes wall
 * (nanoseconds), as pprof's values. Locations say what kind of code they
 * are in profile.frame.type, with the OpenTelemetry eBPF profiler's values
 * (libpf/interpretertype.go: "cpython", "ruby", "native", "kernel"), so a
 * backend shows them as it shows that profiler's.
 *
 * A profile that kept its events (profile_keep_events: record and the
 * agent keep them when they write OTLP) gives each sample the spec's
 * "per-timestamp value" shape: a value and a timestamp per event (a
 * cpu-clock sample, a stretch off the CPU, a wait of a task), in the order
 * they were added. Otherwise each sample is one aggregated value without
 * timestamps, and the profile's time and duration say when they were taken.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(ent) ((ent)->oom = true)
#include <uthash.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "output/dict.h"
#include "output/output.h"
#include "util/hashfree.h"

typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary OtDictionary;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles OtResourceProfiles;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles OtScopeProfiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile OtProfile;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType OtValueType;
typedef Opentelemetry__Proto__Profiles__V1development__Sample OtSample;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping OtMapping;
typedef Opentelemetry__Proto__Profiles__V1development__Location OtLocation;
typedef Opentelemetry__Proto__Profiles__V1development__Line OtLine;
typedef Opentelemetry__Proto__Profiles__V1development__Function OtFunction;
typedef Opentelemetry__Proto__Profiles__V1development__Stack OtStack;
typedef Opentelemetry__Proto__Profiles__V1development__Link OtLink;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit OtAttr;
typedef Opentelemetry__Proto__Common__V1__AnyValue OtAnyValue;
typedef Opentelemetry__Proto__Common__V1__KeyValue OtKeyValue;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope OtScope;
typedef Opentelemetry__Proto__Resource__V1__Resource OtResource;
typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
    OtRequest;

/* Attributes of a sample (thread.name, thread.id, taipan.state,
 * taipan.<lock>, taipan.task) and of a resource (process.pid,
 * service.name, process.executable.path, host.name, container.id,
 * process.runtime.name and .version), at most. */
#define MAX_SAMPLE_ATTRS 5
#define MAX_RESOURCE_ATTRS 7
/* Sample types: samples, cpu and (wall, off-cpu) wall. */
#define MAX_TYPES 3

/* Every message of the request is allocated here and freed at once. */
struct blk {
	struct blk *next;
	max_align_t data[];
};

/* An attribute's key: string indexes of its key and (is_int false) value,
 * or the integer value. */
struct attr_key {
	int64_t key, sval, ival;
	int is_int;
};

struct attr_ent {
	UT_hash_handle hh;
	bool oom;
	struct attr_key key;
	int32_t index;
};

struct stack_ent {
	UT_hash_handle hh;
	bool oom;
	int32_t index;
	size_t len;
	int32_t *locs; /* key: len location indexes, leaf first */
};

struct otlp {
	struct dict d;
	struct blk *blocks;
	struct attr_ent *attr_index;
	OtAttr **attrs;
	size_t nattrs, attrs_cap;
	struct stack_ent *stack_index;
	OtStack **stacks;
	size_t nstacks, stacks_cap;
};

/* n zeroed bytes that live as long as o, or NULL. */
static void *alloc(struct otlp *o, size_t n)
{
	if (n > SIZE_MAX - sizeof(struct blk))
		return NULL;
	struct blk *b = calloc(1, sizeof(*b) + n);
	if (!b)
		return NULL;
	b->next = o->blocks;
	o->blocks = b;
	return b->data;
}

static void *alloc_array(struct otlp *o, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return alloc(o, (n ? n : 1) * size);
}

static void otlp_free(struct otlp *o)
{
	HASH_FREE_ALL(o->attr_index, a, (void)0);
	HASH_FREE_ALL(o->stack_index, s, (void)0);
	while (o->blocks) {
		struct blk *next = o->blocks->next;
		free(o->blocks);
		o->blocks = next;
	}
	free(o->attrs);
	free(o->stacks);
	dict_free(&o->d);
}

/* Grows *arr (of pointers) to hold one more; 0 or -ENOMEM. Indexes are
 * int32 in OTLP: -EOVERFLOW past that. */
static int grow(void ***arr, size_t *cap, size_t n)
{
	if (n >= INT32_MAX)
		return -EOVERFLOW;
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 256;
	void **a = realloc(*arr, ncap * sizeof(*a));
	if (!a)
		return -ENOMEM;
	*arr = a;
	*cap = ncap;
	return 0;
}

/* The string of index i: the dictionary's, escaped. */
static char *str_at(struct otlp *o, int64_t i)
{
	return o->d.strings[i];
}

/* The attribute-table index of key = value (a string index, or ival when
 * is_int), added when new; or a negative errno. key and sval may be the
 * negative errno of a failed dict_str, which is returned. */
static int64_t attr_index(struct otlp *o, int64_t key, int64_t sval, int64_t ival, bool is_int)
{
	if (key < 0)
		return key;
	if (!is_int && sval < 0)
		return sval;
	struct attr_key k;
	memset(&k, 0, sizeof(k)); /* padding is part of the hash key */
	k.key = key;
	k.sval = is_int ? 0 : sval;
	k.ival = is_int ? ival : 0;
	k.is_int = is_int;
	struct attr_ent *ent;
	HASH_FIND(hh, o->attr_index, &k, sizeof(k), ent);
	if (ent)
		return ent->index;
	int err = grow((void ***)&o->attrs, &o->attrs_cap, o->nattrs);
	if (err)
		return err;
	OtAttr *a = alloc(o, sizeof(*a));
	OtAnyValue *v = alloc(o, sizeof(*v));
	ent = calloc(1, sizeof(*ent));
	if (!a || !v || !ent) {
		free(ent);
		return -ENOMEM;
	}
	opentelemetry__proto__profiles__v1development__key_value_and_unit__init(a);
	opentelemetry__proto__common__v1__any_value__init(v);
	a->key_strindex = (int32_t)key;
	a->value = v;
	if (is_int) {
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		v->int_value = ival;
	} else {
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
		v->string_value = str_at(o, sval);
	}
	ent->key = k;
	ent->index = (int32_t)o->nattrs;
	HASH_ADD(hh, o->attr_index, key, sizeof(ent->key), ent);
	if (ent->oom) {
		free(ent);
		return -ENOMEM;
	}
	o->attrs[o->nattrs++] = a;
	return ent->index;
}

static int64_t attr_str(struct otlp *o, const char *key, const char *value)
{
	return attr_index(o, dict_str(&o->d, key), dict_str(&o->d, value), 0, false);
}

/* The stack-table index of locs[0..n) (location indexes, leaf first), added
 * when new; or a negative errno. */
static int64_t stack_index(struct otlp *o, const int32_t *locs, size_t n)
{
	struct stack_ent *ent;
	size_t len = n * sizeof(*locs);
	HASH_FIND(hh, o->stack_index, locs, len, ent);
	if (ent)
		return ent->index;
	int err = grow((void ***)&o->stacks, &o->stacks_cap, o->nstacks);
	if (err)
		return err;
	OtStack *s = alloc(o, sizeof(*s));
	int32_t *copy = alloc_array(o, n, sizeof(*copy));
	ent = calloc(1, sizeof(*ent));
	if (!s || !copy || !ent) {
		free(ent);
		return -ENOMEM;
	}
	opentelemetry__proto__profiles__v1development__stack__init(s);
	memcpy(copy, locs, len);
	s->n_location_indices = n;
	s->location_indices = copy;
	ent->locs = copy;
	ent->len = len;
	ent->index = (int32_t)o->nstacks;
	HASH_ADD_KEYPTR(hh, o->stack_index, ent->locs, ent->len, ent);
	if (ent->oom) {
		free(ent);
		return -ENOMEM;
	}
	o->stacks[o->nstacks++] = s;
	return ent->index;
}

/* The OpenTelemetry eBPF profiler's name for the kind of code of l. */
static const char *frame_type(const struct dict_location *l)
{
	switch (l->kind) {
	case PROF_FRAME_INTERP:
		if (!l->runtime || !strcmp(l->runtime, "python"))
			return "cpython";
		return l->runtime; /* "ruby" */
	case PROF_FRAME_KERNEL:
		return "kernel";
	case PROF_FRAME_NATIVE:
		return "native";
	case PROF_FRAME_MARKER:
	default:
		return "unknown"; /* taipan's own: "[truncated]", "[unknown]" */
	}
}

/* The dictionary's mappings, locations and functions as OTLP's tables, each
 * with its zero entry first. map_at maps a mapping id to its index. */
static int build_tables(struct otlp *o, OtDictionary *dict)
{
	struct dict *d = &o->d;
	if (d->nmaps >= INT32_MAX || d->nlocs >= INT32_MAX || d->nfns >= INT32_MAX)
		return -EOVERFLOW;
	int32_t *map_at = alloc_array(o, d->next_native_id, sizeof(*map_at));
	OtMapping **maps = alloc_array(o, d->nmaps + 1, sizeof(*maps));
	OtMapping *mapv = alloc_array(o, d->nmaps + 1, sizeof(*mapv));
	OtLocation **locs = alloc_array(o, d->nlocs + 1, sizeof(*locs));
	OtLocation *locv = alloc_array(o, d->nlocs + 1, sizeof(*locv));
	OtLine *linev = alloc_array(o, d->nlocs, sizeof(*linev));
	OtLine **linep = alloc_array(o, d->nlocs, sizeof(*linep));
	int32_t *loc_attrs = alloc_array(o, d->nlocs, sizeof(*loc_attrs));
	int32_t *map_attrs = alloc_array(o, d->nmaps, sizeof(*map_attrs));
	OtFunction **fns = alloc_array(o, d->nfns + 1, sizeof(*fns));
	OtFunction *fnv = alloc_array(o, d->nfns + 1, sizeof(*fnv));
	if (!map_at || !maps || !mapv || !locs || !locv || !linev || !linep || !loc_attrs ||
	    !map_attrs || !fns || !fnv)
		return -ENOMEM;

	opentelemetry__proto__profiles__v1development__mapping__init(&mapv[0]);
	maps[0] = &mapv[0];
	for (size_t i = 0; i < d->nmaps; i++) {
		const struct dict_mapping *dm = &d->maps[i];
		OtMapping *m = &mapv[i + 1];
		opentelemetry__proto__profiles__v1development__mapping__init(m);
		m->memory_start = dm->memory_start;
		m->memory_limit = dm->memory_limit;
		m->file_offset = dm->file_offset;
		m->filename_strindex = (int32_t)dm->filename;
		if (dm->build_id) {
			int64_t a = attr_index(o, dict_str(d, "process.executable.build_id.gnu"),
					       dm->build_id, 0, false);
			if (a < 0)
				return (int)a;
			map_attrs[i] = (int32_t)a;
			m->n_attribute_indices = 1;
			m->attribute_indices = &map_attrs[i];
		}
		if (dm->id < d->next_native_id)
			map_at[dm->id] = (int32_t)(i + 1);
		maps[i + 1] = m;
	}

	opentelemetry__proto__profiles__v1development__location__init(&locv[0]);
	locs[0] = &locv[0];
	for (size_t i = 0; i < d->nlocs; i++) {
		const struct dict_location *dl = &d->locs[i];
		OtLocation *l = &locv[i + 1];
		opentelemetry__proto__profiles__v1development__location__init(l);
		l->mapping_index = dl->mapping_id < d->next_native_id ? map_at[dl->mapping_id] : 0;
		l->address = dl->address;
		if (dl->function_id) {
			opentelemetry__proto__profiles__v1development__line__init(&linev[i]);
			/* Function ids count from 1, as their table's index does. */
			linev[i].function_index = (int32_t)dl->function_id;
			linev[i].line = dl->line;
			linep[i] = &linev[i];
			l->n_lines = 1;
			l->lines = &linep[i];
		}
		int64_t a = attr_str(o, "profile.frame.type", frame_type(dl));
		if (a < 0)
			return (int)a;
		loc_attrs[i] = (int32_t)a;
		l->n_attribute_indices = 1;
		l->attribute_indices = &loc_attrs[i];
		locs[i + 1] = l;
	}

	opentelemetry__proto__profiles__v1development__function__init(&fnv[0]);
	fns[0] = &fnv[0];
	for (size_t i = 0; i < d->nfns; i++) {
		const struct dict_function *df = &d->fns[i];
		OtFunction *f = &fnv[i + 1];
		opentelemetry__proto__profiles__v1development__function__init(f);
		f->name_strindex = (int32_t)df->name;
		f->system_name_strindex = (int32_t)df->system_name;
		f->filename_strindex = (int32_t)df->filename;
		f->start_line = df->start_line;
		fns[i + 1] = f;
	}
	dict->n_mapping_table = d->nmaps + 1;
	dict->mapping_table = maps;
	dict->n_location_table = d->nlocs + 1;
	dict->location_table = locs;
	dict->n_function_table = d->nfns + 1;
	dict->function_table = fns;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int64_t sat_i64(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* A KeyValue of the resource; value is escaped through the dictionary. */
static int resource_str(struct otlp *o, OtResource *r, const char *key, const char *value)
{
	if (!value || !*value)
		return 0;
	int64_t v = dict_str(&o->d, value);
	OtKeyValue *kv = alloc(o, sizeof(*kv));
	OtAnyValue *av = alloc(o, sizeof(*av));
	if (v < 0)
		return (int)v;
	if (!kv || !av)
		return -ENOMEM;
	opentelemetry__proto__common__v1__key_value__init(kv);
	opentelemetry__proto__common__v1__any_value__init(av);
	kv->key = (char *)key;
	kv->value = av;
	av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	av->string_value = str_at(o, v);
	r->attributes[r->n_attributes++] = kv;
	return 0;
}

static int resource_int(struct otlp *o, OtResource *r, const char *key, int64_t value)
{
	OtKeyValue *kv = alloc(o, sizeof(*kv));
	OtAnyValue *av = alloc(o, sizeof(*av));
	if (!kv || !av)
		return -ENOMEM;
	opentelemetry__proto__common__v1__key_value__init(kv);
	opentelemetry__proto__common__v1__any_value__init(av);
	kv->key = (char *)key;
	kv->value = av;
	av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
	av->int_value = value;
	r->attributes[r->n_attributes++] = kv;
	return 0;
}

/* The attributes of sample ps into attrs (MAX_SAMPLE_ATTRS); their count,
 * or a negative errno. */
static int sample_attrs(struct otlp *o, const struct prof_sample *ps, int32_t *attrs)
{
	const struct prof_labels *pl = &ps->labels;
	int64_t a[MAX_SAMPLE_ATTRS];
	int n = 0;
	if (pl->thread_name && *pl->thread_name)
		a[n++] = attr_str(o, "thread.name", pl->thread_name);
	a[n++] = attr_index(o, dict_str(&o->d, "thread.id"), 0, pl->tid, true);
	if (prof_state_name(pl->state))
		a[n++] = attr_str(o, "taipan.state", prof_state_name(pl->state));
	if (pl->lock_name && prof_lock_name(pl->lock)) {
		char key[64];
		snprintf(key, sizeof(key), "taipan.%s", pl->lock_name);
		a[n++] = attr_str(o, key, prof_lock_name(pl->lock));
	}
	if (pl->task && *pl->task)
		a[n++] = attr_str(o, "taipan.task", pl->task);
	for (int i = 0; i < n; i++) {
		if (a[i] < 0)
			return (int)a[i];
		attrs[i] = (int32_t)a[i];
	}
	return n;
}

/* One process's ResourceProfiles: its samples (those of pid, at indexes
 * idx[0..n)) once per sample type. */
static int build_resource(struct otlp *o, const struct profile *p, const struct output_opts *opts,
			  uint32_t pid, const size_t *idx, size_t n, const char *host,
			  OtResourceProfiles **out)
{
	bool wall = profile_weighted(p);
	size_t ntypes = wall ? 3 : 2;
	const struct prof_labels *first = &profile_sample(p, idx[0])->labels;

	OtResourceProfiles *rp = alloc(o, sizeof(*rp));
	OtResource *res = alloc(o, sizeof(*res));
	OtKeyValue **rattrs = alloc_array(o, MAX_RESOURCE_ATTRS, sizeof(*rattrs));
	OtScopeProfiles *sp = alloc(o, sizeof(*sp));
	OtScopeProfiles **sps = alloc(o, sizeof(*sps));
	OtScope *scope = alloc(o, sizeof(*scope));
	OtProfile **profs = alloc_array(o, ntypes, sizeof(*profs));
	OtProfile *profv = alloc_array(o, ntypes, sizeof(*profv));
	OtValueType *vts = alloc_array(o, ntypes + 1, sizeof(*vts));
	int32_t *stacks = alloc_array(o, n, sizeof(*stacks));
	int32_t *attrs = alloc_array(o, n * MAX_SAMPLE_ATTRS, sizeof(*attrs));
	int *nattrs = alloc_array(o, n, sizeof(*nattrs));
	if (!rp || !res || !rattrs || !sp || !sps || !scope || !profs || !profv || !vts ||
	    !stacks || !attrs || !nattrs)
		return -ENOMEM;

	/* Stacks and attributes first: the samples of every type share them. */
	size_t maxlen = 1;
	for (size_t i = 0; i < n; i++) {
		uint32_t nf = profile_sample(p, idx[i])->nframes;
		if (nf > maxlen)
			maxlen = nf;
	}
	int32_t *locs = calloc(maxlen, sizeof(*locs));
	if (!locs)
		return -ENOMEM;
	int err = 0;
	for (size_t i = 0; i < n && !err; i++) {
		const struct prof_sample *ps = profile_sample(p, idx[i]);
		size_t nl = 0;
		if (ps->nframes == 0) {
			int64_t unk = dict_unknown_location(&o->d);
			if (unk < 0) {
				err = (int)unk;
				break;
			}
			locs[nl++] = (int32_t)unk; /* location id = index */
		} else {
			/* The profile is root first; OTLP wants the leaf first.
			 * Location ids are frame ids + 1: their table's index. */
			for (uint32_t k = ps->nframes; k-- > 0;)
				locs[nl++] = (int32_t)(ps->frames[k] + 1);
		}
		int64_t si = stack_index(o, locs, nl);
		if (si < 0) {
			err = (int)si;
			break;
		}
		stacks[i] = (int32_t)si;
		int na = sample_attrs(o, ps, &attrs[i * MAX_SAMPLE_ATTRS]);
		if (na < 0)
			err = na;
		else
			nattrs[i] = na;
	}
	free(locs);
	if (err)
		return err;

	static const int64_t types[MAX_TYPES][2] = {
	    {DICT_S_SAMPLES, DICT_S_COUNT},
	    {DICT_S_CPU, DICT_S_NS},
	    {DICT_S_WALL, DICT_S_NS},
	};
	OtValueType *period_type = &vts[ntypes];
	opentelemetry__proto__profiles__v1development__value_type__init(period_type);
	period_type->type_strindex = DICT_S_CPU;
	period_type->unit_strindex = DICT_S_NS;
	/* With events, a value per event (a sample that kept none is one, at
	 * the start), and their times, which every type shares. */
	bool timed = profile_keeps_events(p);
	size_t nvalues = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t ne = profile_sample(p, idx[i])->nevents;
		nvalues += timed && ne ? ne : 1;
	}
	uint64_t *times = timed ? alloc_array(o, nvalues, sizeof(*times)) : NULL;
	if (timed && !times)
		return -ENOMEM;
	for (size_t i = 0, v = 0; timed && i < n; i++) {
		const struct prof_sample *ps = profile_sample(p, idx[i]);
		for (uint32_t k = 0; k < ps->nevents; k++)
			times[v++] =
			    ps->events[k].at_ns ? ps->events[k].at_ns : profile_start_ns(p);
		if (!ps->nevents)
			times[v++] = profile_start_ns(p);
	}
	for (size_t t = 0; t < ntypes; t++) {
		OtProfile *pr = &profv[t];
		OtSample **samples = alloc_array(o, n, sizeof(*samples));
		OtSample *sv = alloc_array(o, n, sizeof(*sv));
		int64_t *values = alloc_array(o, nvalues, sizeof(*values));
		if (!samples || !sv || !values)
			return -ENOMEM;
		opentelemetry__proto__profiles__v1development__profile__init(pr);
		opentelemetry__proto__profiles__v1development__value_type__init(&vts[t]);
		vts[t].type_strindex = (int32_t)types[t][0];
		vts[t].unit_strindex = (int32_t)types[t][1];
		pr->sample_type = &vts[t];
		pr->period_type = period_type;
		pr->period = sat_i64(profile_period_ns(p));
		pr->time_unix_nano = profile_start_ns(p);
		pr->duration_nano = profile_duration_ns(p);
		for (size_t i = 0, v = 0; i < n; i++) {
			const struct prof_sample *ps = profile_sample(p, idx[i]);
			OtSample *s = &sv[i];
			opentelemetry__proto__profiles__v1development__sample__init(s);
			s->stack_index = stacks[i];
			s->n_attribute_indices = (size_t)nattrs[i];
			s->attribute_indices = &attrs[i * MAX_SAMPLE_ATTRS];
			s->values = &values[v];
			if (timed)
				s->timestamps_unix_nano = &times[v];
			/* Each event read as a sample of its own count and time. */
			struct prof_sample one = *ps;
			uint32_t ne = timed && ps->nevents ? ps->nevents : 1;
			for (uint32_t k = 0; k < ne; k++) {
				if (timed && ps->nevents) {
					one.count = ps->events[k].count;
					one.off_ns = ps->events[k].off_ns;
				}
				values[v++] = t == 0   ? sat_i64(one.count)
					      : t == 1 ? sat_i64(prof_sample_cpu_ns(p, &one))
						       : sat_i64(prof_sample_wall_ns(p, &one));
			}
			s->n_values = ne;
			s->n_timestamps_unix_nano = timed ? ne : 0;
			samples[i] = s;
		}
		pr->n_samples = n;
		pr->samples = samples;
		profs[t] = pr;
	}

	opentelemetry__proto__resource__v1__resource__init(res);
	res->attributes = rattrs;
	err = resource_int(o, res, "process.pid", pid);
	if (!err)
		err = resource_str(o, res, "service.name",
				   opts && opts->service && *opts->service ? opts->service
									   : first->comm);
	if (!err)
		err = resource_str(o, res, "process.executable.path", first->exe);
	if (!err)
		err = resource_str(o, res, "host.name", host);
	if (!err)
		err = resource_str(o, res, "container.id", first->container_id);
	if (!err)
		err = resource_str(o, res, "process.runtime.name", first->runtime);
	if (!err)
		err = resource_str(o, res, "process.runtime.version", first->runtime_version);
	if (err)
		return err;

	opentelemetry__proto__common__v1__instrumentation_scope__init(scope);
	scope->name = "taipan";
	opentelemetry__proto__profiles__v1development__scope_profiles__init(sp);
	sp->scope = scope;
	sp->n_profiles = ntypes;
	sp->profiles = profs;
	sps[0] = sp;
	opentelemetry__proto__profiles__v1development__resource_profiles__init(rp);
	rp->resource = res;
	rp->n_scope_profiles = 1;
	rp->scope_profiles = sps;
	*out = rp;
	return 0;
}

/* A ProtobufCBuffer that writes to a FILE. */
struct file_buf {
	ProtobufCBuffer base; /* first: protobuf-c hands back a pointer to it */
	FILE *out;
	int err;
};

static void file_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
	struct file_buf *f = (struct file_buf *)buffer;
	if (!f->err && len && fwrite(data, 1, len, f->out) != len)
		f->err = errno ? -errno : -EIO;
}

int output_write_otlp(const struct profile *p, FILE *out, const struct output_opts *opts)
{
	if (!p || !out)
		return -EINVAL;
	struct otlp o = {0};
	size_t nsamples = profile_sample_count(p);
	uint32_t *pids = NULL;
	size_t *idx = NULL;
	int err = dict_build(&o.d, p);
	if (err)
		goto cleanup;

	/* Index 0 of each table is its zero value, as the protocol asks. */
	int64_t zero = attr_index(&o, 0, 0, 0, false);
	int32_t no_stack = 0;
	int64_t zero_stack = stack_index(&o, &no_stack, 0);
	if (zero < 0 || zero_stack < 0) {
		err = zero < 0 ? (int)zero : (int)zero_stack;
		goto cleanup;
	}
	/* The zero attribute keeps no value: a KeyValueAndUnit{}. */
	o.attrs[0]->value = NULL;

	/* The "[unknown]" location of frameless samples, before the tables. */
	for (size_t i = 0; i < nsamples; i++) {
		const struct prof_sample *ps = profile_sample(p, i);
		if (!ps->nframes && ps->count && prof_value(p, ps)) {
			int64_t unk = dict_unknown_location(&o.d);
			if (unk < 0) {
				err = (int)unk;
				goto cleanup;
			}
			break;
		}
	}
	OtDictionary dict =
	    OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
	err = build_tables(&o, &dict);
	if (err)
		goto cleanup;

	/* The processes, in pid order, and the samples that count. */
	pids = calloc(nsamples ? nsamples : 1, sizeof(*pids));
	idx = calloc(nsamples ? nsamples : 1, sizeof(*idx));
	if (!pids || !idx) {
		err = -ENOMEM;
		goto cleanup;
	}
	size_t npids = 0;
	for (size_t i = 0; i < nsamples; i++) {
		const struct prof_sample *ps = profile_sample(p, i);
		if (ps->count && prof_value(p, ps))
			pids[npids++] = ps->labels.pid;
	}
	qsort(pids, npids, sizeof(*pids), cmp_u32);
	size_t nuniq = 0;
	for (size_t i = 0; i < npids; i++)
		if (!nuniq || pids[nuniq - 1] != pids[i])
			pids[nuniq++] = pids[i];

	char host[256] = "";
	if (gethostname(host, sizeof(host)) < 0)
		host[0] = '\0';
	host[sizeof(host) - 1] = '\0';

	OtResourceProfiles **rps = alloc_array(&o, nuniq, sizeof(*rps));
	if (!rps) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (size_t k = 0; k < nuniq; k++) {
		size_t n = 0;
		for (size_t i = 0; i < nsamples; i++) {
			const struct prof_sample *ps = profile_sample(p, i);
			if (ps->labels.pid == pids[k] && ps->count && prof_value(p, ps))
				idx[n++] = i;
		}
		err = build_resource(&o, p, opts, pids[k], idx, n, host, &rps[k]);
		if (err)
			goto cleanup;
	}

	OtLink link0 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINK__INIT;
	static uint8_t zeros[16];
	link0.trace_id = (ProtobufCBinaryData){.len = 16, .data = zeros};
	link0.span_id = (ProtobufCBinaryData){.len = 8, .data = zeros};
	OtLink *links[] = {&link0};
	dict.n_link_table = 1;
	dict.link_table = links;
	if (o.d.nstrings >= INT32_MAX) {
		err = -EOVERFLOW;
		goto cleanup;
	}
	dict.n_string_table = o.d.nstrings;
	dict.string_table = o.d.strings;
	dict.n_attribute_table = o.nattrs;
	dict.attribute_table = o.attrs;
	dict.n_stack_table = o.nstacks;
	dict.stack_table = o.stacks;

	OtRequest req =
	    OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
	req.n_resource_profiles = nuniq;
	req.resource_profiles = rps;
	req.dictionary = &dict;

	struct file_buf fb = {.base = {.append = file_append}, .out = out};
	errno = 0;
	protobuf_c_message_pack_to_buffer(&req.base, &fb.base);
	err = fb.err;

cleanup:
	free(pids);
	free(idx);
	otlp_free(&o);
	return err;
}
