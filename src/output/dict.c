/* dict.c - a profile's dictionary, shared by the pprof and OTLP encoders.
 *
 * The profile's frames map one to one onto locations (id = frame id + 1).
 * Functions are shared by every frame of the same function, so a reader can
 * aggregate by function while lines still separate. Mappings say what kind
 * of code a location is: interpreted, kernel, a native library, or taipan's
 * own markers.
 *
 * A native library's mapping carries its path and build-id and spans the
 * whole address space from file offset 0, and its locations' addresses are
 * link-time addresses: a symbolizer's address - memory_start + file_offset is
 * then what addr2line -e FILE takes, whatever the process's load address.
 * So a frame that no symbol named goes out with no function at all, and
 * pprof, Parca or Pyroscope can name it later from the file or its build-id.
 *
 * Every string is escaped as folded stacks are (str_escape): `go tool pprof
 * -top` prints names a target chose to the terminal of whoever reads it, and
 * OTLP's strings must be valid UTF-8.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A failed hash insert must be an error we return, not uthash's exit(). The
 * entry is then left out of the table, and its oom flag says so. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(ent) ((ent)->oom = true)
#include <uthash.h>

#include "output/dict.h"
#include "util/hashfree.h"
#include "util/strutil.h"

static const char *const fixed_strings[DICT_S_NFIXED] = {
    [DICT_S_EMPTY] = "",
    [DICT_S_SAMPLES] = "samples",
    [DICT_S_COUNT] = "count",
    [DICT_S_CPU] = "cpu",
    [DICT_S_NS] = "nanoseconds",
    [DICT_S_PID] = "pid",
    [DICT_S_TID] = "tid",
    [DICT_S_NSPID] = "ns_pid",
    [DICT_S_TNAME] = "thread_name",
    [DICT_S_COMM] = "comm",
    [DICT_S_RUNTIME] = "runtime",
    [DICT_S_RTVER] = "runtime_version",
    [DICT_S_CGROUP] = "cgroup",
    [DICT_S_CONTAINER] = "container_id",
    [DICT_S_WALL] = "wall",
    [DICT_S_STATE] = "state",
    [DICT_S_TASK] = "task",
};

struct dict_str_ent {
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

struct dict_fn_ent {
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

struct dict_map_ent {
	UT_hash_handle hh;
	bool oom;
	struct native_map_key key;
	uint64_t id;
	size_t map; /* its index in maps */
};

/* The string-table index of s, which is already escaped, adding a copy when
 * new; -ENOMEM on failure. */
static int64_t str_index_escaped(struct dict *d, const char *s)
{
	struct dict_str_ent *ent;
	size_t len = strlen(s);
	HASH_FIND(hh, d->str_index, s, len, ent);
	if (ent)
		return ent->index;
	if (d->nstrings == d->strings_cap) {
		size_t ncap = d->strings_cap ? d->strings_cap * 2 : 256;
		char **n = realloc(d->strings, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		d->strings = n;
		d->strings_cap = ncap;
	}
	ent = calloc(1, sizeof(*ent) + len + 1);
	if (!ent)
		return -ENOMEM;
	memcpy(ent->s, s, len + 1);
	ent->index = (int64_t)d->nstrings;
	HASH_ADD_KEYPTR(hh, d->str_index, ent->s, len, ent);
	if (ent->oom) {
		free(ent);
		return -ENOMEM;
	}
	d->strings[d->nstrings++] = ent->s;
	return ent->index;
}

/* The escape is one to one, so strings that differ stay apart. */
int64_t dict_str(struct dict *d, const char *s)
{
	char buf[256];
	size_t n = str_escape(buf, sizeof(buf), s, NULL);
	if (n < sizeof(buf))
		return str_index_escaped(d, buf);
	char *all = malloc(n + 1);
	if (!all)
		return -ENOMEM;
	str_escape(all, n + 1, s, NULL);
	int64_t idx = str_index_escaped(d, all);
	free(all);
	return idx;
}

int64_t dict_str_opt(struct dict *d, const char *s)
{
	return s && *s ? dict_str(d, s) : 0;
}

int64_t dict_str_u32(struct dict *d, uint32_t v)
{
	char buf[16];
	snprintf(buf, sizeof(buf), "%" PRIu32, v);
	return dict_str(d, buf);
}

void dict_free(struct dict *d)
{
	HASH_FREE_ALL(d->str_index, s, (void)0);
	HASH_FREE_ALL(d->fn_index, f, (void)0);
	HASH_FREE_ALL(d->native_index, m, (void)0);
	free(d->strings);
	free(d->fns);
	free(d->maps);
	free(d->locs);
	memset(d, 0, sizeof(*d));
}

/* Adds mapping id of kind, named by string fname (an index, or the negative
 * errno of a failed dict_str, which is returned). */
static int add_mapping(struct dict *d, uint64_t id, int64_t fname, enum prof_frame_kind kind)
{
	if (fname < 0)
		return (int)fname;
	bool interp = kind == PROF_FRAME_INTERP;
	struct dict_mapping *m = &d->maps[d->nmaps++];
	/* Interpreted, kernel and marker mappings name no file to read, so
	 * their ranges stay empty; native ones are set up by own_mapping(). */
	memset(m, 0, sizeof(*m));
	m->id = id;
	m->filename = fname;
	m->kind = kind;
	/* Every location carries its function already; claiming so keeps pprof
	 * from trying to symbolize "[kernel.kallsyms]" as a file on disk. */
	m->has_functions = true;
	m->has_filenames = interp;
	m->has_line_numbers = interp;
	return 0;
}

/* The mapping of file fname (a string index) with build_id (an index, 0:
 * none), created on first use with *map pointed at it: a native file's, or
 * (interp) a runtime's other than the first. Returns its id or a negative
 * errno. */
static int64_t own_mapping(struct dict *d, int64_t fname, int64_t build_id, bool interp,
			   struct dict_mapping **map)
{
	struct native_map_key key = {.filename = fname, .build_id = build_id};
	struct dict_map_ent *ent;
	HASH_FIND(hh, d->native_index, &key, sizeof(key), ent);
	if (ent) {
		*map = &d->maps[ent->map];
		return (int64_t)ent->id;
	}
	ent = calloc(1, sizeof(*ent));
	if (!ent)
		return -ENOMEM;
	ent->key = key;
	ent->id = d->next_native_id++;
	ent->map = d->nmaps;
	HASH_ADD(hh, d->native_index, key, sizeof(ent->key), ent);
	if (ent->oom) {
		free(ent);
		return -ENOMEM;
	}
	int err =
	    add_mapping(d, ent->id, key.filename, interp ? PROF_FRAME_INTERP : PROF_FRAME_NATIVE);
	if (err)
		return err;
	*map = &d->maps[ent->map];
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
 * it (NULL for the fixed ones, which never change). Returns the id (> 0) or
 * a negative errno. */
static int64_t mapping_for(struct dict *d, const struct prof_frame *f, struct dict_mapping **map)
{
	static const char *const fixed_names[DICT_MAP_FIRST_NATIVE] = {
	    [DICT_MAP_INTERP] = NULL, /* "[RUNTIME]" */
	    [DICT_MAP_KERNEL] = "[kernel.kallsyms]",
	    [DICT_MAP_MARKER] = "[taipan]",
	};
	const char *module = f->module;
	int id;
	enum prof_frame_kind kind;
	switch (f->kind) {
	case PROF_FRAME_INTERP: {
		/* "[python]": the first runtime's frames have the fixed id. */
		char name[64];
		snprintf(name, sizeof(name), "[%s]", f->runtime ? f->runtime : "interpreted");
		int64_t fname = dict_str(d, name);
		if (fname < 0)
			return fname;
		if (d->interp_name && d->interp_name != fname)
			return own_mapping(d, fname, 0, true, map);
		d->interp_name = fname;
		if (!d->used[DICT_MAP_INTERP]) {
			int err = add_mapping(d, DICT_MAP_INTERP, fname, PROF_FRAME_INTERP);
			if (err)
				return err;
			d->used[DICT_MAP_INTERP] = true;
		}
		*map = NULL;
		return DICT_MAP_INTERP;
	}
	case PROF_FRAME_KERNEL:
		id = DICT_MAP_KERNEL;
		kind = PROF_FRAME_KERNEL;
		break;
	case PROF_FRAME_NATIVE: {
		int64_t fname = dict_str(d, module && *module ? module : "[native]");
		int64_t build_id = dict_str_opt(d, f->build_id);
		if (fname < 0)
			return fname;
		if (build_id < 0)
			return build_id;
		return own_mapping(d, fname, build_id, false, map);
	}
	case PROF_FRAME_MARKER:
	default:
		id = DICT_MAP_MARKER;
		kind = PROF_FRAME_MARKER;
		break;
	}
	if (!d->used[id]) {
		int err = add_mapping(d, (uint64_t)id, dict_str(d, fixed_names[id]), kind);
		if (err)
			return err;
		d->used[id] = true;
	}
	*map = NULL;
	return id;
}

/* The function id for f, created on first use; or a negative errno. */
static int64_t function_for(struct dict *d, const struct prof_frame *f)
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

	struct dict_fn_ent *ent;
	HASH_FIND(hh, d->fn_index, &key, sizeof(key), ent);
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
	int64_t name_idx = dict_str(d, name);
	if (name_idx < 0)
		return name_idx;
	int64_t file_idx = dict_str_opt(d, f->file);
	if (file_idx < 0)
		return file_idx;

	ent = calloc(1, sizeof(*ent));
	if (!ent)
		return -ENOMEM;
	ent->key = key;
	ent->id = d->nfns + 1;
	HASH_ADD(hh, d->fn_index, key, sizeof(ent->key), ent);
	if (ent->oom) {
		free(ent);
		return -ENOMEM;
	}

	struct dict_function *fn = &d->fns[d->nfns++];
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

static int add_location(struct dict *d, uint64_t id, const struct prof_frame *f)
{
	if (d->nlocs >= d->cap)
		return -EOVERFLOW;
	struct dict_mapping *map = NULL;
	int64_t map_id = mapping_for(d, f, &map);
	if (map_id < 0)
		return (int)map_id;
	struct dict_location *loc = &d->locs[d->nlocs];
	memset(loc, 0, sizeof(*loc));
	loc->id = id;
	loc->mapping_id = (uint64_t)map_id;
	loc->kind = f->kind;
	loc->runtime = f->kind == PROF_FRAME_INTERP ? f->runtime : NULL;
	/* Interpreted code has no address of its own; its identity is the line. */
	loc->address = f->kind == PROF_FRAME_INTERP ? 0 : f->addr;

	/* Native code that no symbol named gets no line: a function named
	 * "libfoo.so+0x1234" would stop every reader from naming it later, as
	 * has_functions true would. */
	if (f->kind == PROF_FRAME_NATIVE && prof_frame_unnamed(f)) {
		map->has_functions = false;
		d->nlocs++;
		return 0;
	}
	int64_t fn_id = function_for(d, f);
	if (fn_id < 0)
		return (int)fn_id;
	loc->function_id = (uint64_t)fn_id;
	loc->line = f->line;
	d->nlocs++;
	return 0;
}

int dict_build(struct dict *d, const struct profile *p)
{
	memset(d, 0, sizeof(*d));
	d->next_native_id = DICT_MAP_FIRST_NATIVE;
	uint32_t nframes = profile_frame_count(p);
	d->cap = (size_t)nframes + 1; /* + one for frameless samples */
	d->fns = calloc(d->cap, sizeof(*d->fns));
	/* One per frame at worst, plus the three fixed ones. */
	d->maps = calloc(d->cap + DICT_MAP_FIRST_NATIVE, sizeof(*d->maps));
	d->locs = calloc(d->cap, sizeof(*d->locs));
	if (!d->fns || !d->maps || !d->locs)
		return -ENOMEM;

	/* Interned first, into the empty table, so each lands at the index its
	 * enum names: index 0 is "" as both formats require, and the others
	 * never depend on the data. */
	for (int i = 0; i < DICT_S_NFIXED; i++) {
		int64_t idx = dict_str(d, fixed_strings[i]);
		if (idx < 0)
			return (int)idx;
	}
	for (uint32_t i = 0; i < nframes; i++) {
		int err = add_location(d, (uint64_t)i + 1, profile_frame(p, i));
		if (err)
			return err;
	}
	return 0;
}

int64_t dict_unknown_location(struct dict *d)
{
	if (d->unknown_loc)
		return (int64_t)d->unknown_loc;
	/* pprof drops a sample without locations from every view but the
	 * total; an explicit "[unknown]" keeps it visible. */
	struct prof_frame unk = {.name = "[unknown]", .kind = PROF_FRAME_MARKER};
	uint64_t id = (uint64_t)d->cap; /* one past the last frame's */
	int err = add_location(d, id, &unk);
	if (err)
		return err;
	d->unknown_loc = id;
	return (int64_t)id;
}
