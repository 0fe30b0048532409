/* out_pprof.c - the pprof format: a gzipped perftools.profiles.Profile
 * protobuf, as read by go tool pprof, Pyroscope, Parca and Grafana.
 *
 * The profile's frames map one to one onto pprof locations (id = frame id
 * + 1). Functions are shared by every frame of the same function, so pprof
 * can aggregate by function while -lines still separates the lines. Mappings
 * say what kind of code a location is: Python, kernel, a native library, or
 * taipan's own markers.
 *
 * A native library's mapping carries its path and build-id and spans the
 * whole address space from file offset 0, and its locations' addresses are
 * link-time addresses: a symbolizer's address - memory_start + file_offset is
 * then what addr2line -e FILE takes, whatever the process's load address.
 * So a frame that no symbol named goes out with no function at all, and
 * pprof, Parca or Pyroscope can name it later from the file or its build-id.
 *
 * Every string is escaped as folded stacks are (str_escape): `go tool pprof
 * -top` prints names a target chose to the terminal of whoever reads it.
 */
#define ZLIB_CONST
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A failed hash insert must be an error we return, not uthash's exit(). The
 * entry is then left out of the table, and its oom flag says so. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(ent) ((ent)->oom = true)
#include <uthash.h>
#include <zlib.h>

#include "output/output.h"
#include "profile.pb-c.h"
#include "util/strutil.h"

/* Fixed ids, so a reader can tell the kind of a location from its mapping:
 * interpreted frames of the first runtime ("[python]"), kernel, markers;
 * those of another runtime get a mapping of their own, as native files do. */
enum {
	MAP_INTERP = 1,
	MAP_KERNEL = 2,
	MAP_MARKER = 3,
	MAP_FIRST_NATIVE = 4,
};

/* The strings every profile has, at fixed string-table indexes. */
enum fixed_string {
	S_EMPTY,
	S_SAMPLES,
	S_COUNT,
	S_CPU,
	S_NS,
	S_PID,
	S_TID,
	S_NSPID,
	S_TNAME,
	S_COMM,
	S_RUNTIME,
	S_RTVER,
	S_CGROUP,
	S_CONTAINER,
	S_WALL,
	S_STATE,
	S_TASK,
	S_NFIXED,
};

static const char *const fixed_strings[S_NFIXED] = {
    [S_EMPTY] = "",
    [S_SAMPLES] = "samples",
    [S_COUNT] = "count",
    [S_CPU] = "cpu",
    [S_NS] = "nanoseconds",
    [S_PID] = "pid",
    [S_TID] = "tid",
    [S_NSPID] = "ns_pid",
    [S_TNAME] = "thread_name",
    [S_COMM] = "comm",
    [S_RUNTIME] = "runtime",
    [S_RTVER] = "runtime_version",
    [S_CGROUP] = "cgroup",
    [S_CONTAINER] = "container_id",
    [S_WALL] = "wall",
    [S_STATE] = "state",
    [S_TASK] = "task",
};

/* At most this many labels per sample: pid, tid, ns_pid, thread_name, comm,
 * runtime, runtime_version and its alias (python_version), cgroup,
 * container_id, state, the lock (gil), the asyncio task. */
#define MAX_LABELS 13
/* Values per sample: samples/count and cpu/nanoseconds; with off-CPU time
 * (--mode wall, off-cpu), wall/nanoseconds too. */
#define MAX_VALUES 3

struct str_ent {
	UT_hash_handle hh;
	bool oom;
	int64_t index;
	char s[]; /* key */
};

/* Functions are keyed by interned profile strings, so pointers compare as
 * the strings do. addr is part of the key only for unsymbolized code, whose
 * address is its name. */
struct fn_key {
	const char *name, *file, *module;
	uint64_t addr;
	int first_line;
	int kind;
};

struct fn_ent {
	UT_hash_handle hh;
	bool oom;
	struct fn_key key;
	uint64_t id;
};

/* A native mapping's key: string indexes of the module path and build-id
 * (0 when it has none), so two builds of one path stay apart. */
struct native_map_key {
	int64_t filename, build_id;
};

struct native_map_ent {
	UT_hash_handle hh;
	bool oom;
	struct native_map_key key;
	uint64_t id;
	size_t map; /* its index in enc.maps */
};

struct enc {
	struct str_ent *str_index;
	char **strings;
	size_t nstrings, strings_cap;
	struct fn_ent *fn_index;
	struct native_map_ent *native_index;
	uint64_t next_native_id;
	/* Sized up front from the frame count, so pointers into them stay valid. */
	Perftools__Profiles__Function *fns;
	size_t nfns;
	Perftools__Profiles__Mapping *maps;
	size_t nmaps;
	Perftools__Profiles__Location *locs;
	Perftools__Profiles__Line *lines;
	Perftools__Profiles__Line **line_ptrs;
	size_t nlocs;
	uint64_t unknown_loc; /* location for frameless samples, 0 until needed */
	int64_t interp_name;  /* the string of the runtime whose mapping is MAP_INTERP; 0: none */
};

/* The string-table index of s, which is already escaped, adding a copy when
 * new; -ENOMEM on failure. */
static int64_t str_index_escaped(struct enc *e, const char *s)
{
	struct str_ent *ent;
	size_t len = strlen(s);
	HASH_FIND(hh, e->str_index, s, len, ent);
	if (ent)
		return ent->index;
	if (e->nstrings == e->strings_cap) {
		size_t ncap = e->strings_cap ? e->strings_cap * 2 : 256;
		char **n = realloc(e->strings, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		e->strings = n;
		e->strings_cap = ncap;
	}
	ent = calloc(1, sizeof(*ent) + len + 1);
	if (!ent)
		return -ENOMEM;
	memcpy(ent->s, s, len + 1);
	ent->index = (int64_t)e->nstrings;
	HASH_ADD_KEYPTR(hh, e->str_index, ent->s, len, ent);
	if (ent->oom) {
		free(ent);
		return -ENOMEM;
	}
	e->strings[e->nstrings++] = ent->s;
	return ent->index;
}

/* The string-table index of s escaped (str_escape), adding it when new;
 * -ENOMEM on failure. Every string of the profile goes through here: the
 * names, files, modules and labels are the target's to choose, and
 * `go tool pprof -top` prints them to a terminal. The escape is one to one,
 * so strings that differ stay apart. */
static int64_t str_index(struct enc *e, const char *s)
{
	char buf[256];
	size_t n = str_escape(buf, sizeof(buf), s, NULL);
	if (n < sizeof(buf))
		return str_index_escaped(e, buf);
	char *all = malloc(n + 1);
	if (!all)
		return -ENOMEM;
	str_escape(all, n + 1, s, NULL);
	int64_t idx = str_index_escaped(e, all);
	free(all);
	return idx;
}

/* Like str_index for NULL-or-text: NULL and "" are both index 0. */
static int64_t str_opt(struct enc *e, const char *s)
{
	return s && *s ? str_index(e, s) : 0;
}

static int64_t str_u32(struct enc *e, uint32_t v)
{
	char buf[16];
	snprintf(buf, sizeof(buf), "%" PRIu32, v);
	return str_index(e, buf);
}

static void enc_free(struct enc *e)
{
	struct str_ent *s, *stmp;
	HASH_ITER(hh, e->str_index, s, stmp)
	{
		HASH_DEL(e->str_index, s);
		free(s);
	}
	struct fn_ent *f, *ftmp;
	HASH_ITER(hh, e->fn_index, f, ftmp)
	{
		HASH_DEL(e->fn_index, f);
		free(f);
	}
	struct native_map_ent *m, *mtmp;
	HASH_ITER(hh, e->native_index, m, mtmp)
	{
		HASH_DEL(e->native_index, m);
		free(m);
	}
	free(e->strings);
	free(e->fns);
	free(e->maps);
	free(e->locs);
	free(e->lines);
	free(e->line_ptrs);
}

/* Adds mapping id, named by string fname (an index, or the negative errno of
 * a failed str_index, which is returned). */
static int add_mapping(struct enc *e, uint64_t id, int64_t fname, bool python)
{
	if (fname < 0)
		return (int)fname;
	Perftools__Profiles__Mapping *m = &e->maps[e->nmaps++];
	/* Python, kernel and marker mappings name no file to read, so their
	 * ranges stay empty; native ones are set up by mapping_for(). */
	perftools__profiles__mapping__init(m);
	m->id = id;
	m->filename = fname;
	/* Every location carries its function already; claiming so keeps pprof
	 * from trying to symbolize "[kernel.kallsyms]" as a file on disk. */
	m->has_functions = true;
	m->has_filenames = python;
	m->has_line_numbers = python;
	return 0;
}

/* The mapping of file fname (a string index) with build_id (an index, 0:
 * none), created on first use with *map pointed at it: a native file's, or
 * (interp) a runtime's other than the first. Returns its id or a negative
 * errno. */
static int64_t own_mapping(struct enc *e, int64_t fname, int64_t build_id, bool interp,
			   Perftools__Profiles__Mapping **map)
{
	struct native_map_key key = {.filename = fname, .build_id = build_id};
	struct native_map_ent *ent;
	HASH_FIND(hh, e->native_index, &key, sizeof(key), ent);
	if (ent) {
		*map = &e->maps[ent->map];
		return (int64_t)ent->id;
	}
	ent = calloc(1, sizeof(*ent));
	if (!ent)
		return -ENOMEM;
	ent->key = key;
	ent->id = e->next_native_id++;
	ent->map = e->nmaps;
	HASH_ADD(hh, e->native_index, key, sizeof(ent->key), ent);
	if (ent->oom) {
		free(ent);
		return -ENOMEM;
	}
	int err = add_mapping(e, ent->id, key.filename, interp);
	if (err)
		return err;
	*map = &e->maps[ent->map];
	if (interp)
		return (int64_t)ent->id;
	/* The whole address space from offset 0: locations hold link-time
	 * addresses, which is what pprof's symbolizer then looks up (it
	 * takes a mapping of 0, all ones and offset 0 as "no relocation"). */
	(*map)->memory_start = 0;
	(*map)->memory_limit = UINT64_MAX;
	(*map)->file_offset = 0;
	(*map)->build_id = key.build_id;
	return (int64_t)ent->id;
}

/* The mapping id for frame f, created on first use, with *map pointed at
 * it. Returns the id (> 0) or a negative errno. */
static int64_t mapping_for(struct enc *e, const struct prof_frame *f, bool used[MAP_FIRST_NATIVE],
			   Perftools__Profiles__Mapping **map)
{
	static const char *const fixed_names[MAP_FIRST_NATIVE] = {
	    [MAP_INTERP] = NULL, /* "[RUNTIME]" */
	    [MAP_KERNEL] = "[kernel.kallsyms]",
	    [MAP_MARKER] = "[taipan]",
	};
	const char *module = f->module;
	int id;
	switch (f->kind) {
	case PROF_FRAME_INTERP: {
		/* "[python]": the first runtime's frames have the fixed id. */
		char name[64];
		snprintf(name, sizeof(name), "[%s]", f->runtime ? f->runtime : "interpreted");
		int64_t fname = str_index(e, name);
		if (fname < 0)
			return fname;
		if (e->interp_name && e->interp_name != fname)
			return own_mapping(e, fname, 0, true, map);
		e->interp_name = fname;
		if (!used[MAP_INTERP]) {
			int err = add_mapping(e, MAP_INTERP, fname, true);
			if (err)
				return err;
			used[MAP_INTERP] = true;
		}
		*map = NULL;
		return MAP_INTERP;
	}
	case PROF_FRAME_KERNEL:
		id = MAP_KERNEL;
		break;
	case PROF_FRAME_NATIVE: {
		int64_t fname = str_index(e, module && *module ? module : "[native]");
		int64_t build_id = str_opt(e, f->build_id);
		if (fname < 0)
			return fname;
		if (build_id < 0)
			return build_id;
		return own_mapping(e, fname, build_id, false, map);
	}
	case PROF_FRAME_MARKER:
	default:
		id = MAP_MARKER;
		break;
	}
	if (!used[id]) {
		int err = add_mapping(e, (uint64_t)id, str_index(e, fixed_names[id]), false);
		if (err)
			return err;
		used[id] = true;
	}
	*map = NULL; /* fixed mappings never change */
	return id;
}

/* The function id for f, created on first use; or a negative errno. */
static int64_t function_for(struct enc *e, const struct prof_frame *f)
{
	bool named = f->name && *f->name;
	bool native = f->kind == PROF_FRAME_KERNEL || f->kind == PROF_FRAME_NATIVE;
	struct fn_key key;
	memset(&key, 0, sizeof(key)); /* padding is part of the hash key */
	key.name = f->name;
	key.file = f->file;
	/* The same symbol in two libraries is two functions. */
	key.module = f->kind == PROF_FRAME_NATIVE ? f->module : NULL;
	/* Only kernel frames come here unnamed (native ones get no function). */
	key.addr = native && !named ? f->addr : 0;
	key.first_line = f->first_line;
	key.kind = (int)f->kind;

	struct fn_ent *ent;
	HASH_FIND(hh, e->fn_index, &key, sizeof(key), ent);
	if (ent)
		return (int64_t)ent->id;

	char hex[24];
	const char *name = f->name;
	if (!named && native) {
		snprintf(hex, sizeof(hex), "0x%" PRIx64, f->addr);
		name = hex;
	} else if (!named) {
		name = "[unknown]";
	}
	int64_t name_idx = str_index(e, name);
	if (name_idx < 0)
		return name_idx;
	int64_t file_idx = str_opt(e, f->file);
	if (file_idx < 0)
		return file_idx;

	ent = calloc(1, sizeof(*ent));
	if (!ent)
		return -ENOMEM;
	ent->key = key;
	ent->id = e->nfns + 1;
	HASH_ADD(hh, e->fn_index, key, sizeof(ent->key), ent);
	if (ent->oom) {
		free(ent);
		return -ENOMEM;
	}

	Perftools__Profiles__Function *fn = &e->fns[e->nfns++];
	perftools__profiles__function__init(fn);
	fn->id = ent->id;
	/* The profile keeps one name, already qualified (Class.method). Only
	 * machine code has a system name: when system_name equals name, pprof
	 * "demangles" it and, taking "<module>" or "<lambda>" for C++ template
	 * arguments, cuts it down to nothing. */
	fn->name = name_idx;
	fn->system_name = native ? name_idx : 0;
	fn->filename = file_idx;
	fn->start_line = f->first_line;
	return (int64_t)ent->id;
}

static int add_location(struct enc *e, uint64_t id, const struct prof_frame *f,
			bool used[MAP_FIRST_NATIVE])
{
	Perftools__Profiles__Mapping *map = NULL;
	int64_t map_id = mapping_for(e, f, used, &map);
	if (map_id < 0)
		return (int)map_id;
	size_t i = e->nlocs;
	Perftools__Profiles__Location *loc = &e->locs[i];
	perftools__profiles__location__init(loc);
	loc->id = id;
	loc->mapping_id = (uint64_t)map_id;
	/* Python code has no address of its own; its identity is the line. */
	loc->address = f->kind == PROF_FRAME_INTERP ? 0 : f->addr;

	/* Native code that no symbol named gets no line: a function named
	 * "libfoo.so+0x1234" would stop every reader from naming it later, as
	 * has_functions true would. */
	if (f->kind == PROF_FRAME_NATIVE && prof_frame_unnamed(f)) {
		map->has_functions = false;
		e->nlocs++;
		return 0;
	}
	int64_t fn_id = function_for(e, f);
	if (fn_id < 0)
		return (int)fn_id;
	Perftools__Profiles__Line *line = &e->lines[i];
	perftools__profiles__line__init(line);
	line->function_id = (uint64_t)fn_id;
	line->line = f->line;
	e->line_ptrs[i] = line;
	loc->n_line = 1;
	loc->line = &e->line_ptrs[i];
	e->nlocs++;
	return 0;
}

/* Adds the label key = str to s, using the next slot of storage; nothing
 * when str is 0 (the value was NULL or empty). key and str may be the negative errno
 * of a failed str_index, which is returned. */
static int add_label(Perftools__Profiles__Sample *s, Perftools__Profiles__Label *storage,
		     int64_t key, int64_t str)
{
	if (key < 0)
		return (int)key; /* a key that could not be interned */
	if (str <= 0)
		return (int)str;
	Perftools__Profiles__Label *l = &storage[s->n_label];
	perftools__profiles__label__init(l);
	l->key = key;
	l->str = str;
	s->label[s->n_label++] = l;
	return 0;
}

static int64_t sat_i64(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int cmp_mapping(const void *a, const void *b)
{
	uint64_t x = ((const Perftools__Profiles__Mapping *)a)->id;
	uint64_t y = ((const Perftools__Profiles__Mapping *)b)->id;
	return x < y ? -1 : x > y;
}

/* A ProtobufCBuffer that gzips whatever protobuf-c appends straight into a
 * FILE, so the packed profile never has to exist in memory whole. */
struct gz_sink {
	ProtobufCBuffer base; /* first: protobuf-c hands back a pointer to it */
	z_stream zs;
	FILE *out;
	int err;
	unsigned char buf[64 * 1024];
};

/* Runs deflate with flush over whatever is in zs.next_in, writing each full
 * output buffer. Errors stick in g->err. */
static void gz_pump(struct gz_sink *g, int flush)
{
	for (;;) {
		g->zs.next_out = g->buf;
		g->zs.avail_out = sizeof(g->buf);
		int rc = deflate(&g->zs, flush);
		if (rc == Z_STREAM_ERROR) {
			g->err = -EIO;
			return;
		}
		size_t have = sizeof(g->buf) - g->zs.avail_out;
		if (have && fwrite(g->buf, 1, have, g->out) != have) {
			g->err = errno ? -errno : -EIO;
			return;
		}
		if (flush == Z_FINISH ? rc == Z_STREAM_END : g->zs.avail_out != 0)
			return;
	}
}

static void gz_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
	struct gz_sink *g = (struct gz_sink *)buffer;
	while (len && !g->err) {
		uInt chunk = len > UINT_MAX ? UINT_MAX : (uInt)len;
		g->zs.next_in = data;
		g->zs.avail_in = chunk;
		gz_pump(g, Z_NO_FLUSH);
		data += chunk;
		len -= chunk;
	}
}

/* Packs msg into out as one gzip member. */
static int write_gzip(const ProtobufCMessage *msg, FILE *out)
{
	struct gz_sink *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->base.append = gz_append;
	g->out = out;
	/* 15 + 16: the largest window, with a gzip header and trailer. */
	int rc =
	    deflateInit2(&g->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
	if (rc != Z_OK) {
		free(g);
		return rc == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
	}
	errno = 0;
	protobuf_c_message_pack_to_buffer(msg, &g->base);
	if (!g->err) {
		g->zs.next_in = NULL;
		g->zs.avail_in = 0;
		gz_pump(g, Z_FINISH);
	}
	int err = g->err;
	deflateEnd(&g->zs);
	free(g);
	return err;
}

int output_write_pprof(const struct profile *p, FILE *out, const struct output_opts *o)
{
	(void)o; /* no options */
	if (!p || !out)
		return -EINVAL;

	struct enc e = {.next_native_id = MAP_FIRST_NATIVE};
	bool used[MAP_FIRST_NATIVE] = {false};
	uint32_t nframes = profile_frame_count(p);
	size_t nsamples = profile_sample_count(p);
	size_t nlocs_max = (size_t)nframes + 1; /* + one for frameless samples */
	size_t nlocids = 0;
	int err = 0;

	Perftools__Profiles__Sample *samples = NULL, **sample_ptrs = NULL;
	Perftools__Profiles__Label *labels = NULL, **label_ptrs = NULL;
	Perftools__Profiles__Function **fn_ptrs = NULL;
	Perftools__Profiles__Mapping **map_ptrs = NULL;
	Perftools__Profiles__Location **loc_ptrs = NULL;
	uint64_t *locids = NULL;
	int64_t *values = NULL;

	for (size_t i = 0; i < nsamples; i++) {
		uint32_t n = profile_sample(p, i)->nframes;
		nlocids += n ? n : 1;
	}

	e.fns = calloc(nlocs_max, sizeof(*e.fns));
	/* One per frame at worst, plus the three fixed ones. */
	e.maps = calloc(nlocs_max + MAP_FIRST_NATIVE, sizeof(*e.maps));
	e.locs = calloc(nlocs_max, sizeof(*e.locs));
	e.lines = calloc(nlocs_max, sizeof(*e.lines));
	e.line_ptrs = calloc(nlocs_max, sizeof(*e.line_ptrs));
	samples = calloc(nsamples ? nsamples : 1, sizeof(*samples));
	sample_ptrs = calloc(nsamples ? nsamples : 1, sizeof(*sample_ptrs));
	labels = calloc((nsamples ? nsamples : 1) * MAX_LABELS, sizeof(*labels));
	label_ptrs = calloc((nsamples ? nsamples : 1) * MAX_LABELS, sizeof(*label_ptrs));
	locids = calloc(nlocids ? nlocids : 1, sizeof(*locids));
	values = calloc((nsamples ? nsamples : 1) * MAX_VALUES, sizeof(*values));
	if (!e.fns || !e.maps || !e.locs || !e.lines || !e.line_ptrs || !samples || !sample_ptrs ||
	    !labels || !label_ptrs || !locids || !values) {
		err = -ENOMEM;
		goto cleanup;
	}

	/* Interned first, into the empty table, so each lands at the index its
	 * enum names: index 0 is "" as the proto requires, and the others never
	 * depend on the data. */
	for (int i = 0; i < S_NFIXED; i++) {
		int64_t idx = str_index(&e, fixed_strings[i]);
		if (idx < 0) {
			err = (int)idx;
			goto cleanup;
		}
	}

	for (uint32_t i = 0; i < nframes; i++) {
		err = add_location(&e, (uint64_t)i + 1, profile_frame(p, i), used);
		if (err)
			goto cleanup;
	}

	uint64_t period = profile_period_ns(p);
	bool wall = profile_weighted(p);
	size_t nvalues = wall ? 3 : 2;
	size_t ns = 0, nid = 0;
	for (size_t i = 0; i < nsamples; i++) {
		const struct prof_sample *ps = profile_sample(p, i);
		if (!ps->count || !prof_value(p, ps))
			continue;
		Perftools__Profiles__Sample *s = &samples[ns];
		perftools__profiles__sample__init(s);
		sample_ptrs[ns++] = s;

		s->location_id = &locids[nid];
		if (ps->nframes == 0) {
			/* pprof drops a sample without locations from every view
			 * but the total; an explicit "[unknown]" keeps it visible. */
			if (!e.unknown_loc) {
				struct prof_frame unk = {.name = "[unknown]",
							 .kind = PROF_FRAME_MARKER};
				e.unknown_loc = (uint64_t)nframes + 1;
				err = add_location(&e, e.unknown_loc, &unk, used);
				if (err)
					goto cleanup;
			}
			locids[nid++] = e.unknown_loc;
			s->n_location_id = 1;
		} else {
			/* The profile is root first; pprof wants the leaf first. */
			for (uint32_t k = ps->nframes; k-- > 0;)
				locids[nid++] = (uint64_t)ps->frames[k] + 1;
			s->n_location_id = ps->nframes;
		}

		s->value = &values[MAX_VALUES * (ns - 1)];
		s->n_value = nvalues;
		s->value[0] = sat_i64(ps->count);
		s->value[1] = sat_i64(prof_sample_cpu_ns(p, ps));
		if (wall)
			s->value[2] = sat_i64(prof_sample_wall_ns(p, ps));

		/* Labels: MAX_LABELS slots per sample; empty values are left out. */
		const struct prof_labels *pl = &ps->labels;
		Perftools__Profiles__Label *ls = &labels[(ns - 1) * MAX_LABELS];
		s->label = &label_ptrs[(ns - 1) * MAX_LABELS];
		err = add_label(s, ls, S_PID, str_u32(&e, pl->pid));
		if (!err)
			err = add_label(s, ls, S_TID, str_u32(&e, pl->tid));
		if (!err && pl->ns_pid)
			err = add_label(s, ls, S_NSPID, str_u32(&e, pl->ns_pid));
		if (!err)
			err = add_label(s, ls, S_TNAME, str_opt(&e, pl->thread_name));
		if (!err)
			err = add_label(s, ls, S_COMM, str_opt(&e, pl->comm));
		if (!err)
			err = add_label(s, ls, S_RUNTIME, str_opt(&e, pl->runtime));
		if (!err)
			err = add_label(s, ls, S_RTVER, str_opt(&e, pl->runtime_version));
		if (!err && pl->version_alias)
			err = add_label(s, ls, str_opt(&e, pl->version_alias),
					str_opt(&e, pl->runtime_version));
		if (!err && pl->cgroup && *pl->cgroup)
			err = add_label(s, ls, S_CGROUP, str_opt(&e, pl->cgroup));
		if (!err && pl->container_id && *pl->container_id)
			err = add_label(s, ls, S_CONTAINER, str_opt(&e, pl->container_id));
		if (!err && pl->task && *pl->task)
			err = add_label(s, ls, S_TASK, str_opt(&e, pl->task));
		if (!err && prof_state_name(pl->state))
			err = add_label(s, ls, S_STATE, str_opt(&e, prof_state_name(pl->state)));
		if (!err && pl->lock_name && prof_lock_name(pl->lock))
			err = add_label(s, ls, str_opt(&e, pl->lock_name),
					str_opt(&e, prof_lock_name(pl->lock)));
		if (err)
			goto cleanup;
	}

	fn_ptrs = calloc(e.nfns ? e.nfns : 1, sizeof(*fn_ptrs));
	map_ptrs = calloc(e.nmaps ? e.nmaps : 1, sizeof(*map_ptrs));
	loc_ptrs = calloc(e.nlocs ? e.nlocs : 1, sizeof(*loc_ptrs));
	if (!fn_ptrs || !map_ptrs || !loc_ptrs) {
		err = -ENOMEM;
		goto cleanup;
	}
	/* pprof names the profile after the first mapping: by id, that is
	 * [python] whenever there is Python code. */
	qsort(e.maps, e.nmaps, sizeof(*e.maps), cmp_mapping);
	for (size_t i = 0; i < e.nfns; i++)
		fn_ptrs[i] = &e.fns[i];
	for (size_t i = 0; i < e.nmaps; i++)
		map_ptrs[i] = &e.maps[i];
	for (size_t i = 0; i < e.nlocs; i++)
		loc_ptrs[i] = &e.locs[i];

	Perftools__Profiles__ValueType st_samples = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	Perftools__Profiles__ValueType st_cpu = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	Perftools__Profiles__ValueType period_type = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	st_samples.type = S_SAMPLES;
	st_samples.unit = S_COUNT;
	st_cpu.type = S_CPU;
	st_cpu.unit = S_NS;
	Perftools__Profiles__ValueType st_wall = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	st_wall.type = S_WALL;
	st_wall.unit = S_NS;
	period_type.type = S_CPU;
	period_type.unit = S_NS;
	Perftools__Profiles__ValueType *sample_types[] = {&st_samples, &st_cpu, &st_wall};

	Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	prof.n_sample_type = nvalues;
	prof.sample_type = sample_types;
	prof.n_sample = ns;
	prof.sample = sample_ptrs;
	prof.n_mapping = e.nmaps;
	prof.mapping = map_ptrs;
	prof.n_location = e.nlocs;
	prof.location = loc_ptrs;
	prof.n_function = e.nfns;
	prof.function = fn_ptrs;
	prof.n_string_table = e.nstrings;
	prof.string_table = e.strings;
	prof.time_nanos = sat_i64(profile_start_ns(p));
	prof.duration_nanos = sat_i64(profile_duration_ns(p));
	prof.period_type = &period_type;
	prof.period = sat_i64(period);
	/* A string index, not a sample_type index. pprof would pick the last
	 * type (cpu) anyway; saying so keeps that true if types are added. */
	prof.default_sample_type = wall ? S_WALL : S_CPU;

	err = write_gzip(&prof.base, out);

cleanup:
	enc_free(&e);
	free(samples);
	free(sample_ptrs);
	free(labels);
	free(label_ptrs);
	free(locids);
	free(values);
	free(fn_ptrs);
	free(map_ptrs);
	free(loc_ptrs);
	return err;
}
