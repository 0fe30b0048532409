/* dict.h - a profile's dictionary: its strings, functions, mappings and
 * locations, deduplicated, as pprof and OpenTelemetry profiles both encode
 * them. The encoders (out_pprof.c, out_otlp.c) build one, then write it in
 * their own messages; neither decides again what a frame is.
 *
 * Ids follow pprof: a location's id is its frame id + 1, functions count
 * from 1, and mappings have fixed ids for the kinds of code that name no
 * file (DICT_MAP_INTERP, _KERNEL, _MARKER) and ids from DICT_MAP_FIRST_NATIVE
 * for the others. Every string is escaped as folded stacks are (str_escape),
 * so it is valid UTF-8 and prints as the text it is.
 */
#ifndef TAIPAN_DICT_H
#define TAIPAN_DICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/profile.h"

/* Fixed mapping ids, so a reader can tell the kind of a location from its
 * mapping: interpreted frames of the first runtime ("[python]"), kernel,
 * markers; those of another runtime get a mapping of their own, as native
 * files do. */
enum {
	DICT_MAP_INTERP = 1,
	DICT_MAP_KERNEL = 2,
	DICT_MAP_MARKER = 3,
	DICT_MAP_FIRST_NATIVE = 4,
};

/* The strings every dictionary has, at fixed string-table indexes: "" at 0,
 * then the sample types and pprof's label keys. */
enum dict_string {
	DICT_S_EMPTY,
	DICT_S_SAMPLES,
	DICT_S_COUNT,
	DICT_S_CPU,
	DICT_S_NS,
	DICT_S_PID,
	DICT_S_TID,
	DICT_S_NSPID,
	DICT_S_TNAME,
	DICT_S_COMM,
	DICT_S_RUNTIME,
	DICT_S_RTVER,
	DICT_S_CGROUP,
	DICT_S_CONTAINER,
	DICT_S_WALL,
	DICT_S_STATE,
	DICT_S_TASK,
	DICT_S_NFIXED,
};

/* A mapping: strings are string-table indexes, 0 when absent. */
struct dict_mapping {
	uint64_t id;
	int64_t filename;
	int64_t build_id;
	uint64_t memory_start, memory_limit, file_offset;
	bool has_functions, has_filenames, has_line_numbers;
	enum prof_frame_kind kind;
};

struct dict_function {
	uint64_t id;
	int64_t name, system_name, filename;
	int64_t start_line;
};

/* A location: one line at most (function_id 0: none, for native code that
 * no symbol named). */
struct dict_location {
	uint64_t id;
	uint64_t mapping_id;
	uint64_t address;
	uint64_t function_id;
	int64_t line;
	enum prof_frame_kind kind;
	const char *runtime; /* interpreted: the profile's runtime name ("python"), or NULL */
};

struct dict_str_ent;
struct dict_fn_ent;
struct dict_map_ent;

struct dict {
	char **strings; /* escaped, owned */
	size_t nstrings, strings_cap;
	struct dict_function *fns;
	size_t nfns;
	/* In the order they were made, not by id. */
	struct dict_mapping *maps;
	size_t nmaps;
	/* locs[i] is frame i's, ids i + 1; then the "[unknown]" one when
	 * dict_unknown_location() made it. */
	struct dict_location *locs;
	size_t nlocs;
	uint64_t next_native_id; /* one past the largest mapping id */

	/* Private. */
	struct dict_str_ent *str_index;
	struct dict_fn_ent *fn_index;
	struct dict_map_ent *native_index;
	size_t cap; /* of fns and locs; maps has DICT_MAP_FIRST_NATIVE more */
	bool used[DICT_MAP_FIRST_NATIVE];
	uint64_t unknown_loc;
	int64_t interp_name;
};

/* Builds d from p's frames: the fixed strings, then one location per frame
 * with its mapping and function. Returns 0 or a negative errno; d is to be
 * freed with dict_free() either way. */
int dict_build(struct dict *d, const struct profile *p);

/* The id of the "[unknown]" marker location that stands for a sample
 * without frames, made on first use; or a negative errno. */
int64_t dict_unknown_location(struct dict *d);

/* The string-table index of s escaped (str_escape), added when new: a
 * label key or value. NULL and "" are index 0 (dict_str_opt); -ENOMEM on
 * failure. */
int64_t dict_str(struct dict *d, const char *s);
int64_t dict_str_opt(struct dict *d, const char *s);
/* The index of v in decimal. */
int64_t dict_str_u32(struct dict *d, uint32_t v);

/* Frees what d holds; d may be all zeros. */
void dict_free(struct dict *d);

#endif /* TAIPAN_DICT_H */
