/* test_output.c - unit tests for the folded and pprof encoders: exact
 * folded text, a pprof round trip through protobuf-c, native mappings,
 * hostile names escaped, and the same file read by go tool pprof. Writing
 * the file itself is test_output_file.c's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "output/dict.h"
#include "output_fixture.h"

/* The folded text of p, as a NUL-terminated string to free. */
static char *folded(const struct profile *p, bool lines, bool threads)
{
	struct output_opts o = {.folded_lines = lines, .folded_threads = threads};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(output_write_folded(p, f, &o), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void assert_folded(const struct profile *p, bool lines, bool threads, const char *want)
{
	char *got = folded(p, lines, threads);
	if (strcmp(got, want) != 0)
		print_error("folded (lines=%d threads=%d):\n--- want\n%s--- got\n%s", lines,
			    threads, want, got);
	assert_string_equal(got, want);
	free(got);
}

static void test_folded(void **state)
{
	(void)state;
	struct ids id;
	struct profile *p = build_profile(&id);

	/* Threads hidden: the two threads' identical stacks merge (4 + 2). */
	assert_folded(
	    p, false, false,
	    "<module> (app.py);main (app.py);Worker.run (lib/work.py) 6\n"
	    "[truncated];weird\\x3bname\\x0ax (odd.py);PyObject_Call_[n];do_syscall_64_[k] 2\n");
	assert_folded(
	    p, true, false,
	    "<module> (app.py:10);main (app.py:20);Worker.run (lib/work.py:42) 6\n"
	    "[truncated];weird\\x3bname\\x0ax (odd.py:3);PyObject_Call_[n];do_syscall_64_[k] 2\n");
	assert_folded(
	    p, false, true,
	    "python3 [pid 100];MainThread [tid 100];<module> (app.py);main (app.py);"
	    "Worker.run (lib/work.py) 4\n"
	    "python3 [pid 100];MainThread [tid 100];[truncated];weird\\x3bname\\x0ax (odd.py);"
	    "PyObject_Call_[n];do_syscall_64_[k] 2\n"
	    "python3 [pid 100];worker [tid 101];<module> (app.py);main (app.py);"
	    "Worker.run (lib/work.py) 2\n");
	assert_folded(
	    p, true, true,
	    "python3 [pid 100];MainThread [tid 100];<module> (app.py:10);main (app.py:20);"
	    "Worker.run (lib/work.py:42) 4\n"
	    "python3 [pid 100];MainThread [tid 100];[truncated];weird\\x3bname\\x0ax (odd.py:3);"
	    "PyObject_Call_[n];do_syscall_64_[k] 2\n"
	    "python3 [pid 100];worker [tid 101];<module> (app.py:10);main (app.py:20);"
	    "Worker.run (lib/work.py:42) 2\n");
	profile_free(p);
}

/* Frameless stacks, unsymbolized code, missing names and labels that the
 * folded lines cannot show. */
static void test_folded_edges(void **state)
{
	(void)state;
	struct profile *p = profile_new();
	assert_non_null(p);
	uint32_t k =
	    pb_frame(p, (struct prof_frame){
			    .name = "", .addr = 0xffffffff81234567ull, .kind = PROF_FRAME_KERNEL});
	uint32_t py = pb_frame(p, (struct prof_frame){.name = "f", .line = 7});
	struct prof_labels l1 = {.pid = 5,
				 .tid = 6,
				 .comm = "a;b\nc",
				 .runtime = "python",
				 .runtime_version = "3.12",
				 .version_alias = "python_version",
				 .lock_name = "gil"};
	struct prof_labels l2 = l1;
	l2.runtime_version = NULL; /* differs only in a label folded does not show */
	assert_int_equal(profile_add(p, NULL, 0, &l1, 2), 0);
	assert_int_equal(profile_add(p, NULL, 0, &l2, 1), 0);
	assert_int_equal(profile_add(p, &k, 1, &l1, 1), 0);
	assert_int_equal(profile_add(p, &py, 1, &l2, 1), 0);
	assert_int_equal(profile_sample_count(p), 4);

	assert_folded(p, false, false, "0xffffffff81234567_[k] 1\n[unknown] 3\nf 1\n");
	assert_folded(p, true, true,
		      "a\\x3bb\\x0ac [pid 5];[tid 6] 3\n"
		      "a\\x3bb\\x0ac [pid 5];[tid 6];0xffffffff81234567_[k] 1\n"
		      "a\\x3bb\\x0ac [pid 5];[tid 6];f 1\n");
	profile_free(p);

	/* Nothing sampled: nothing written, and no error. */
	p = profile_new();
	assert_non_null(p);
	assert_folded(p, false, true, "");
	profile_free(p);
}

static Perftools__Profiles__Profile *pprof_of(const struct profile *p)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(output_write_pprof(p, f, NULL), 0);
	assert_int_equal(fclose(f), 0);
	Perftools__Profiles__Profile *prof = unpack_gz((const uint8_t *)buf, len);
	free(buf);
	return prof;
}

static const char *str(const Perftools__Profiles__Profile *prof, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < prof->n_string_table);
	return prof->string_table[i];
}

static const Perftools__Profiles__Location *loc_by_id(const Perftools__Profiles__Profile *prof,
						      uint64_t id)
{
	for (size_t i = 0; i < prof->n_location; i++)
		if (prof->location[i]->id == id)
			return prof->location[i];
	fail_msg("no location %llu", (unsigned long long)id);
	return NULL;
}

static const Perftools__Profiles__Function *fn_by_id(const Perftools__Profiles__Profile *prof,
						     uint64_t id)
{
	for (size_t i = 0; i < prof->n_function; i++)
		if (prof->function[i]->id == id)
			return prof->function[i];
	fail_msg("no function %llu", (unsigned long long)id);
	return NULL;
}

static const Perftools__Profiles__Mapping *map_by_id(const Perftools__Profiles__Profile *prof,
						     uint64_t id)
{
	for (size_t i = 0; i < prof->n_mapping; i++)
		if (prof->mapping[i]->id == id)
			return prof->mapping[i];
	fail_msg("no mapping %llu", (unsigned long long)id);
	return NULL;
}

/* The function of a location (each has exactly one line). */
static const Perftools__Profiles__Function *loc_fn(const Perftools__Profiles__Profile *prof,
						   const Perftools__Profiles__Location *loc)
{
	assert_int_equal(loc->n_line, 1);
	return fn_by_id(prof, loc->line[0]->function_id);
}

static const char *loc_mapping(const Perftools__Profiles__Profile *prof,
			       const Perftools__Profiles__Location *loc)
{
	return str(prof, map_by_id(prof, loc->mapping_id)->filename);
}

/* The value of the string label key, or NULL when the sample has none. */
static const char *label(const Perftools__Profiles__Profile *prof,
			 const Perftools__Profiles__Sample *s, const char *key)
{
	const char *found = NULL;
	for (size_t i = 0; i < s->n_label; i++) {
		if (strcmp(str(prof, s->label[i]->key), key) == 0) {
			assert_null(found); /* each key once */
			found = str(prof, s->label[i]->str);
		}
	}
	return found;
}

/* The sample of thread tid whose leaf is function leaf. */
static const Perftools__Profiles__Sample *find_sample(const Perftools__Profiles__Profile *prof,
						      const char *tid, const char *leaf)
{
	for (size_t i = 0; i < prof->n_sample; i++) {
		const Perftools__Profiles__Sample *s = prof->sample[i];
		const char *t = label(prof, s, "tid");
		assert_true(s->n_location_id > 0);
		const Perftools__Profiles__Location *loc = loc_by_id(prof, s->location_id[0]);
		if (t && strcmp(t, tid) == 0 &&
		    strcmp(str(prof, loc_fn(prof, loc)->name), leaf) == 0)
			return s;
	}
	fail_msg("no sample for tid %s with leaf %s", tid, leaf);
	return NULL;
}

/* Checks location i of s: its function, line and mapping. */
static void assert_frame(const Perftools__Profiles__Profile *prof,
			 const Perftools__Profiles__Sample *s, size_t i, uint32_t frame_id,
			 const char *fn, int64_t line, const char *mapping)
{
	assert_true(i < s->n_location_id);
	assert_int_equal(s->location_id[i], (uint64_t)frame_id + 1);
	const Perftools__Profiles__Location *loc = loc_by_id(prof, s->location_id[i]);
	assert_string_equal(str(prof, loc_fn(prof, loc)->name), fn);
	assert_int_equal(loc->line[0]->line, line);
	assert_string_equal(loc_mapping(prof, loc), mapping);
}

static void test_pprof_roundtrip(void **state)
{
	(void)state;
	struct ids id;
	struct profile *p = build_profile(&id);
	Perftools__Profiles__Profile *prof = pprof_of(p);

	assert_true(prof->n_string_table > 0);
	assert_string_equal(prof->string_table[0], "");
	/* Strings are interned: no duplicates in the table. */
	for (size_t i = 0; i < prof->n_string_table; i++)
		for (size_t j = i + 1; j < prof->n_string_table; j++)
			assert_string_not_equal(prof->string_table[i], prof->string_table[j]);

	assert_int_equal(prof->n_sample_type, 2);
	assert_string_equal(str(prof, prof->sample_type[0]->type), "samples");
	assert_string_equal(str(prof, prof->sample_type[0]->unit), "count");
	assert_string_equal(str(prof, prof->sample_type[1]->type), "cpu");
	assert_string_equal(str(prof, prof->sample_type[1]->unit), "nanoseconds");
	assert_non_null(prof->period_type);
	assert_string_equal(str(prof, prof->period_type->type), "cpu");
	assert_string_equal(str(prof, prof->period_type->unit), "nanoseconds");
	assert_int_equal(prof->period, PERIOD_NS);
	assert_int_equal(prof->time_nanos, START_NS);
	assert_int_equal(prof->duration_nanos, DURATION_NS);
	assert_string_equal(str(prof, prof->default_sample_type), "cpu");

	/* One location per frame, the unused main:21 included. */
	assert_int_equal(prof->n_location, profile_frame_count(p));
	/* The zero-count stack is gone; the rest stay apart by labels. */
	assert_int_equal(prof->n_sample, 3);

	const Perftools__Profiles__Sample *s = find_sample(prof, "101", "Worker.run");
	assert_int_equal(s->n_value, 2);
	assert_int_equal(s->value[0], 2);
	assert_int_equal(s->value[1], 2 * PERIOD_NS);
	assert_int_equal(s->n_location_id, 3);
	assert_frame(prof, s, 0, id.run, "Worker.run", 42, "[python]");
	assert_frame(prof, s, 1, id.main, "main", 20, "[python]");
	assert_frame(prof, s, 2, id.mod, "<module>", 10, "[python]");
	assert_int_equal(s->n_label, 8);
	assert_string_equal(label(prof, s, "pid"), "100");
	assert_string_equal(label(prof, s, "tid"), "101");
	assert_string_equal(label(prof, s, "ns_pid"), "7");
	assert_string_equal(label(prof, s, "thread_name"), "worker");
	assert_string_equal(label(prof, s, "comm"), "python3");
	assert_string_equal(label(prof, s, "runtime"), "python");
	assert_string_equal(label(prof, s, "runtime_version"), "3.11.4");
	/* The alias older readers of taipan's profiles look for. */
	assert_string_equal(label(prof, s, "python_version"), "3.11.4");

	s = find_sample(prof, "100", "Worker.run");
	assert_int_equal(s->value[0], 4);
	assert_int_equal(s->value[1], 4 * PERIOD_NS);
	assert_null(label(prof, s, "ns_pid")); /* 0: the same namespace */
	assert_string_equal(label(prof, s, "thread_name"), "MainThread");

	/* Leaf first through every kind; names are escaped as folded's are. */
	s = find_sample(prof, "100", "do_syscall_64");
	assert_int_equal(s->value[0], 2);
	assert_int_equal(s->n_location_id, 4);
	assert_frame(prof, s, 0, id.kernel, "do_syscall_64", 0, "[kernel.kallsyms]");
	assert_frame(prof, s, 1, id.native, "PyObject_Call", 0, "/usr/lib/libpython3.11.so.1.0");
	assert_frame(prof, s, 2, id.weird, "weird;name\\x0ax", 3, "[python]");
	assert_frame(prof, s, 3, id.trunc, "[truncated]", 0, "[taipan]");
	assert_int_equal(loc_by_id(prof, id.kernel + 1)->address, 0xffffffff81000010ull);
	assert_int_equal(loc_by_id(prof, id.native + 1)->address, 0x7f0000001234ull);
	assert_int_equal(loc_by_id(prof, id.run + 1)->address, 0);

	/* Kernel and Python code are told apart by their mappings. */
	const Perftools__Profiles__Mapping *py_map =
	    map_by_id(prof, loc_by_id(prof, id.run + 1)->mapping_id);
	const Perftools__Profiles__Mapping *k_map =
	    map_by_id(prof, loc_by_id(prof, id.kernel + 1)->mapping_id);
	const Perftools__Profiles__Mapping *n_map =
	    map_by_id(prof, loc_by_id(prof, id.native + 1)->mapping_id);
	assert_int_equal(py_map->id, 1);
	assert_int_equal(k_map->id, 2);
	assert_true(n_map->id != py_map->id && n_map->id != k_map->id);
	assert_true(py_map->has_functions && py_map->has_filenames && py_map->has_line_numbers);
	assert_false(k_map->has_line_numbers);
	assert_false(n_map->has_line_numbers);
	assert_int_equal(prof->n_mapping, 4);
	assert_string_equal(str(prof, prof->mapping[0]->filename), "[python]");

	/* Functions: qualified name, file and first line; shared by lines. */
	const Perftools__Profiles__Function *run = loc_fn(prof, loc_by_id(prof, id.run + 1));
	assert_string_equal(str(prof, run->name), "Worker.run");
	/* Python code has no system name; native code keeps its symbol there. */
	assert_int_equal(run->system_name, 0);
	const Perftools__Profiles__Function *sys = loc_fn(prof, loc_by_id(prof, id.kernel + 1));
	assert_string_equal(str(prof, sys->system_name), "do_syscall_64");
	sys = loc_fn(prof, loc_by_id(prof, id.native + 1));
	assert_string_equal(str(prof, sys->system_name), "PyObject_Call");
	assert_string_equal(str(prof, run->filename), "lib/work.py");
	assert_int_equal(run->start_line, 40);
	const Perftools__Profiles__Location *m20 = loc_by_id(prof, id.main + 1);
	const Perftools__Profiles__Location *m21 = loc_by_id(prof, id.main21 + 1);
	assert_int_equal(m20->line[0]->function_id, m21->line[0]->function_id);
	assert_int_equal(m21->line[0]->line, 21);
	assert_int_equal(loc_fn(prof, m20)->start_line, 15);
	/* <module>, main, Worker.run, weird, PyObject_Call, do_syscall_64, [truncated] */
	assert_int_equal(prof->n_function, 7);

	perftools__profiles__profile__free_unpacked(prof, NULL);
	profile_free(p);
}

/* A frameless sample keeps its weight under an explicit [unknown] location. */
static void test_pprof_frameless(void **state)
{
	(void)state;
	struct profile *p = profile_new();
	assert_non_null(p);
	struct prof_labels l = {.pid = 1, .tid = 1, .thread_name = ""};
	assert_int_equal(profile_add(p, NULL, 0, &l, 5), 0);
	Perftools__Profiles__Profile *prof = pprof_of(p);
	assert_int_equal(prof->n_sample, 1);
	const Perftools__Profiles__Sample *s = prof->sample[0];
	assert_int_equal(s->value[0], 5);
	assert_int_equal(s->n_location_id, 1);
	const Perftools__Profiles__Location *loc = loc_by_id(prof, s->location_id[0]);
	assert_string_equal(str(prof, loc_fn(prof, loc)->name), "[unknown]");
	assert_string_equal(loc_mapping(prof, loc), "[taipan]");
	/* Empty and NULL label values are left out. */
	assert_null(label(prof, s, "thread_name"));
	assert_null(label(prof, s, "comm"));
	assert_string_equal(label(prof, s, "pid"), "1");
	perftools__profiles__profile__free_unpacked(prof, NULL);
	profile_free(p);
}

/* Native frames: a mapping per (module, build-id), spanning the address
 * space from offset 0 so that link-time addresses resolve; unnamed frames
 * without a line, and their mapping without has_functions. */
static struct profile *build_native_profile(uint32_t *named, uint32_t *unnamed, uint32_t *other)
{
	struct profile *p = profile_new();
	assert_non_null(p);
	profile_set_timing(p, PERIOD_NS, START_NS, DURATION_NS);
	uint32_t mod = pb_py(p, "<module>", "app.py", 3, 1);
	*named = pb_frame(p, (struct prof_frame){.name = "qsort",
						 .module = "/usr/lib/x86_64-linux-gnu/libc.so.6",
						 .build_id = "93ac61ec5a8eb139",
						 .addr = 0x4a1c3,
						 .kind = PROF_FRAME_NATIVE});
	*unnamed = pb_frame(p, (struct prof_frame){.name = "libc.so.6+0x4b00f",
						   .module = "/usr/lib/x86_64-linux-gnu/libc.so.6",
						   .build_id = "93ac61ec5a8eb139",
						   .addr = 0x4b010,
						   .kind = PROF_FRAME_NATIVE});
	/* Another build of a file at the same path (a container's own libc). */
	*other = pb_frame(p, (struct prof_frame){.name = "qsort",
						 .module = "/usr/lib/x86_64-linux-gnu/libc.so.6",
						 .build_id = "0123456789abcdef",
						 .addr = 0x4a1c3,
						 .kind = PROF_FRAME_NATIVE});
	uint32_t cmp = pb_frame(p, (struct prof_frame){.name = "cmp",
						       .module = "/opt/ext/_ext.so",
						       .addr = 0x1100,
						       .kind = PROF_FRAME_NATIVE});
	uint32_t k = pb_frame(p, (struct prof_frame){.name = "asm_exc_page_fault",
						     .module = "[kernel.kallsyms]",
						     .addr = 0xffffffff81000010ull,
						     .kind = PROF_FRAME_KERNEL});
	struct prof_labels l = {.pid = 1, .tid = 1};
	pb_add(p, &l, 3, 4, mod, *named, cmp, k);
	pb_add(p, &l, 1, 3, mod, *named, *unnamed);
	pb_add(p, &l, 2, 2, mod, *other);
	return p;
}

static void test_pprof_native(void **state)
{
	(void)state;
	uint32_t named, unnamed, other;
	struct profile *p = build_native_profile(&named, &unnamed, &other);
	Perftools__Profiles__Profile *prof = pprof_of(p);

	const Perftools__Profiles__Location *ln = loc_by_id(prof, named + 1);
	const Perftools__Profiles__Location *lu = loc_by_id(prof, unnamed + 1);
	const Perftools__Profiles__Location *lo = loc_by_id(prof, other + 1);
	/* Link-time addresses, as they are. */
	assert_int_equal(ln->address, 0x4a1c3);
	assert_int_equal(lu->address, 0x4b010);
	assert_int_equal(ln->n_line, 1);
	assert_string_equal(str(prof, loc_fn(prof, ln)->name), "qsort");
	/* No "libc.so.6+0x4b00f" function: a reader names it from the file. */
	assert_int_equal(lu->n_line, 0);

	const Perftools__Profiles__Mapping *libc = map_by_id(prof, ln->mapping_id);
	assert_int_equal(lu->mapping_id, ln->mapping_id);
	assert_string_equal(str(prof, libc->filename), "/usr/lib/x86_64-linux-gnu/libc.so.6");
	assert_string_equal(str(prof, libc->build_id), "93ac61ec5a8eb139");
	assert_int_equal(libc->memory_start, 0);
	assert_true(libc->memory_limit == UINT64_MAX);
	assert_int_equal(libc->file_offset, 0);
	assert_false(libc->has_functions); /* one of its locations is unnamed */
	assert_false(libc->has_filenames || libc->has_line_numbers);

	/* The same path with another build-id is another mapping. */
	const Perftools__Profiles__Mapping *libc2 = map_by_id(prof, lo->mapping_id);
	assert_true(libc2->id != libc->id);
	assert_string_equal(str(prof, libc2->filename), "/usr/lib/x86_64-linux-gnu/libc.so.6");
	assert_string_equal(str(prof, libc2->build_id), "0123456789abcdef");
	assert_true(libc2->has_functions); /* every location named */

	/* No build-id: none in the mapping; kernel's stays as it was. */
	const Perftools__Profiles__Sample *s = find_sample(prof, "1", "asm_exc_page_fault");
	const Perftools__Profiles__Location *lc = loc_by_id(prof, s->location_id[1]);
	const Perftools__Profiles__Mapping *ext = map_by_id(prof, lc->mapping_id);
	assert_string_equal(str(prof, ext->filename), "/opt/ext/_ext.so");
	assert_int_equal(ext->build_id, 0);
	assert_true(ext->has_functions);
	const Perftools__Profiles__Mapping *km =
	    map_by_id(prof, loc_by_id(prof, s->location_id[0])->mapping_id);
	assert_string_equal(str(prof, km->filename), "[kernel.kallsyms]");
	assert_true(km->has_functions);
	assert_int_equal(km->memory_limit, 0);
	assert_int_equal(prof->n_mapping, 5); /* python, kernel, libc twice, _ext */

	perftools__profiles__profile__free_unpacked(prof, NULL);
	profile_free(p);
}

/* pprof's strings and folded lines carry every hostile name escaped, the
 * same way: `go tool pprof -top` prints them to a terminal. */
static void test_hostile_names_escaped(void **state)
{
	(void)state;
	struct profile *p = pb_evil_profile();
	Perftools__Profiles__Profile *prof = pprof_of(p);
	for (size_t i = 0; i < prof->n_string_table; i++)
		pb_assert_no_raw_controls(prof->string_table[i], strlen(prof->string_table[i]),
					  false);
	const Perftools__Profiles__Sample *s = find_sample(prof, "8", EVIL_FN_ESC);
	assert_string_equal(str(prof, loc_fn(prof, loc_by_id(prof, s->location_id[1]))->filename),
			    EVIL_FILE_ESC);
	assert_string_equal(
	    str(prof, loc_fn(prof, loc_by_id(prof, s->location_id[0]))->system_name), EVIL_FN_ESC);
	assert_string_equal(loc_mapping(prof, loc_by_id(prof, s->location_id[0])), EVIL_MODULE_ESC);
	assert_string_equal(label(prof, s, "thread_name"), EVIL_THREAD_ESC);
	assert_string_equal(label(prof, s, "comm"), EVIL_COMM_ESC);
	assert_string_equal(label(prof, s, "cgroup"), "/" EVIL_THREAD_ESC);
	perftools__profiles__profile__free_unpacked(prof, NULL);

	char *text = folded(p, true, true);
	pb_assert_no_raw_controls(text, strlen(text), true);
	assert_string_equal(text, EVIL_COMM_ESC " [pid 7];" EVIL_THREAD_ESC " [tid 8];"
						"\\x1b]0\\x3bpwned\\x07\\u202eevil (" EVIL_FILE_ESC
						":3);\\x1b]0\\x3bpwned\\x07\\u202eevil_[n] 1\n");
	free(text);
	profile_free(p);
}

/* Which frames are machine code that no symbol named. */
static void test_frame_unnamed(void **state)
{
	(void)state;
	struct prof_frame f = {.kind = PROF_FRAME_NATIVE, .module = "/lib/libc.so.6"};
	const char *yes[] = {"libc.so.6+0x4b00f", "libc.so.6+0xABC", "0x7f00", "", NULL};
	const char *no[] = {"qsort",	    "libc.so.6+0x", "libc.so.6+0x12g",
			    "libz.so+0x10", "libc.so.6+12", "libc.so.6-0x1",
			    "0x",	    "libc.so.6"};
	for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++) {
		f.name = yes[i];
		if (!prof_frame_unnamed(&f))
			fail_msg("%s should be unnamed", yes[i] ? yes[i] : "NULL");
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++) {
		f.name = no[i];
		if (prof_frame_unnamed(&f))
			fail_msg("%s should be named", no[i]);
	}
	f.module = "libc.so.6"; /* no directory */
	f.name = "libc.so.6+0x10";
	assert_true(prof_frame_unnamed(&f));
	f.module = NULL;
	assert_false(prof_frame_unnamed(&f));
	f.kind = PROF_FRAME_KERNEL;
	f.name = "0xffffffff81000000";
	assert_true(prof_frame_unnamed(&f));
	/* Python frames and markers are never machine code. */
	f.kind = PROF_FRAME_INTERP;
	f.name = "";
	assert_false(prof_frame_unnamed(&f));
	f.kind = PROF_FRAME_MARKER;
	f.name = "0x10";
	assert_false(prof_frame_unnamed(&f));
}

/* --- go tool pprof -------------------------------------------------------- */

/* Runs cmd and returns everything it printed (stdout and stderr); asserts
 * that it exited 0. */
static char *run(const char *cmd)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	assert_non_null(mem);
	FILE *pipe = popen(cmd, "r");
	assert_non_null(pipe);
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), pipe)) > 0)
		fwrite(chunk, 1, n, mem);
	int status = pclose(pipe);
	assert_int_equal(fclose(mem), 0);
	if (status != 0)
		print_error("%s exited with %d:\n%s\n", cmd, status, buf);
	assert_int_equal(status, 0);
	return buf;
}

/* The flat% that `pprof -top` shows for fn, or -1 when fn is not listed. */
static double top_flat_pct(const char *top, const char *fn)
{
	const char *line = top;
	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char buf[512], flat[64], cum[64], name[256];
		double flat_pct, sum_pct, cum_pct;
		if (len < sizeof(buf)) {
			memcpy(buf, line, len);
			buf[len] = '\0';
			if (sscanf(buf, "%63s %lf%% %lf%% %63s %lf%% %255[^\n]", flat, &flat_pct,
				   &sum_pct, cum, &cum_pct, name) == 6 &&
			    strcmp(name, fn) == 0)
				return flat_pct;
		}
		line = end ? end + 1 : NULL;
	}
	return -1;
}

static bool have_go(void)
{
	return system("command -v go >/dev/null 2>&1") == 0;
}

static void test_go_pprof(void **state)
{
	(void)state;
	if (!have_go()) {
		const char *ci = getenv("CI");
		if (ci && strcmp(ci, "true") == 0)
			fail_msg(
			    "go is not installed (apt-get install golang-go); CI=true needs it");
		print_message("skipping: `go` not found on PATH, so go tool pprof cannot be run\n");
		skip();
	}

	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	/* go wants a HOME and a cache directory even for `go tool`. */
	if (!getenv("HOME"))
		setenv("HOME", dir, 1);
	if (!getenv("GOCACHE")) {
		char cache[sizeof(dir) + 16];
		snprintf(cache, sizeof(cache), "%s/gocache", dir);
		setenv("GOCACHE", cache, 1);
	}
	setenv("PPROF_TMPDIR", dir, 1);

	struct ids id;
	struct profile *p = build_profile(&id);
	char path[sizeof(dir) + 32];
	snprintf(path, sizeof(path), "%s/test.pb.gz", dir);
	assert_int_equal(output_write_file(p, path, FMT("pprof"), NULL), 0);

	char cmd[sizeof(path) + 64];
	snprintf(cmd, sizeof(cmd), "go tool pprof -raw '%s' 2>&1", path);
	char *raw = run(cmd);
	const char *names[] = {"<module>",	"main",	       "Worker.run", "PyObject_Call",
			       "do_syscall_64", "[truncated]", "worker",     "MainThread"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strstr(raw, names[i]))
			print_error("%s missing from go tool pprof -raw:\n%s\n", names[i], raw);
		assert_non_null(strstr(raw, names[i]));
	}
	assert_non_null(strstr(raw, "PeriodType: cpu nanoseconds"));
	free(raw);

	snprintf(cmd, sizeof(cmd), "go tool pprof -top '%s' 2>&1", path);
	char *top = run(cmd);
	print_message("go tool pprof -top:\n%s", top);
	assert_non_null(strstr(top, "Type: cpu"));
	assert_non_null(strstr(top, "80ms total"));
	assert_true(top_flat_pct(top, "Worker.run") == 75.0);
	assert_true(top_flat_pct(top, "do_syscall_64") == 25.0);
	/* Listed by name: pprof must not mistake "<module>" for C++. */
	assert_true(top_flat_pct(top, "<module>") == 0.0);
	assert_true(top_flat_pct(top, "main") == 0.0);
	free(top);
	profile_free(p);

	/* Native mappings: pprof reads their file and build-id, and takes
	 * their whole-address-space ranges. Not symbolized here, so that an
	 * unnamed location stays as taipan wrote it. */
	uint32_t named, unnamed, other;
	p = build_native_profile(&named, &unnamed, &other);
	assert_int_equal(output_write_file(p, path, FMT("pprof"), NULL), 0);
	snprintf(cmd, sizeof(cmd), "go tool pprof -symbolize=none -raw '%s' 2>&1", path);
	raw = run(cmd);
	const char *want[] = {
	    "0x0/0xffffffffffffffff/0x0 /usr/lib/x86_64-linux-gnu/libc.so.6 93ac61ec5a8eb139 \n",
	    "0x0/0xffffffffffffffff/0x0 /usr/lib/x86_64-linux-gnu/libc.so.6 0123456789abcdef "
	    "[FN]\n",
	    "0x0/0xffffffffffffffff/0x0 /opt/ext/_ext.so  [FN]\n",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (!strstr(raw, want[i]))
			print_error("%s missing from go tool pprof -raw:\n%s\n", want[i], raw);
		assert_non_null(strstr(raw, want[i]));
	}
	/* The unnamed location: its address and mapping, and no function
	 * (pprof numbers locations its own way, so by address). */
	const char *unl = ": 0x4b010 M=";
	const char *u = strstr(raw, unl);
	if (u)
		u = strchr(u + strlen(unl), ' ');
	if (!u || u[1] != '\n')
		print_error("want \"%s<mapping> \" alone on its line:\n%s\n", unl, raw);
	assert_true(u && u[1] == '\n');
	free(raw);
	snprintf(cmd, sizeof(cmd), "go tool pprof -symbolize=none -top '%s' 2>&1", path);
	top = run(cmd);
	print_message("go tool pprof -top (native):\n%s", top);
	assert_true(top_flat_pct(top, "asm_exc_page_fault") == 50.0);
	assert_true(top_flat_pct(top, "qsort") == 33.33);
	free(top);

	unlink(path);
	profile_free(p);
	char cleanup[sizeof(dir) + 16];
	snprintf(cleanup, sizeof(cleanup), "rm -rf '%s'", dir);
	assert_int_equal(system(cleanup), 0);
}

/* --- OTLP ------------------------------------------------------------------- */

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
    OtRequest;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary OtDictionary;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles OtScopeProfiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile OtProfile;

static OtRequest *otlp_of(const struct profile *p, const struct output_opts *o)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(output_write_otlp(p, f, o), 0);
	assert_int_equal(fclose(f), 0);
	OtRequest *req =
	    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
		NULL, len, (const uint8_t *)buf);
	free(buf);
	assert_non_null(req);
	return req;
}

static void otlp_free(OtRequest *req)
{
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
	    req, NULL);
}

static const char *ostr(const OtDictionary *d, int32_t i)
{
	assert_true(i >= 0 && (size_t)i < d->n_string_table);
	return d->string_table[i];
}

/* The string value of attribute key among indices, or NULL. */
static const char *oattr(const OtDictionary *d, const int32_t *ix, size_t n, const char *key)
{
	const char *found = NULL;
	for (size_t i = 0; i < n; i++) {
		assert_true(ix[i] > 0 && (size_t)ix[i] < d->n_attribute_table);
		const Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit *a =
		    d->attribute_table[ix[i]];
		if (strcmp(ostr(d, a->key_strindex), key))
			continue;
		assert_null(found); /* each key once */
		assert_non_null(a->value);
		found = a->value->value_case ==
				OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
			    ? a->value->string_value
			    : "(int)";
	}
	return found;
}

/* The same profile as pprof and as OTLP: the same strings (the dictionary
 * is one), a location per frame with the same function and line, and per
 * process the samples and values pprof has, every index in range. */
static void test_otlp_matches_pprof(void **state)
{
	(void)state;
	struct ids id;
	struct profile *p = build_profile(&id);
	Perftools__Profiles__Profile *prof = pprof_of(p);
	struct output_opts o = {.service = "svc"};
	OtRequest *req = otlp_of(p, &o);
	const OtDictionary *d = req->dictionary;
	assert_non_null(d);

	/* Zero entries first. The strings start as pprof's: "", the fixed
	 * ones and the frames' (each encoder then adds its labels' or
	 * attributes' own); the frames are compared one by one below. */
	assert_true(d->n_string_table > DICT_S_NFIXED);
	for (size_t i = 0; i < DICT_S_NFIXED; i++)
		assert_string_equal(d->string_table[i], prof->string_table[i]);
	assert_int_equal(d->n_location_table, prof->n_location + 1);
	assert_int_equal(d->n_function_table, prof->n_function + 1);
	assert_int_equal(d->n_mapping_table, prof->n_mapping + 1);
	assert_int_equal(d->location_table[0]->n_lines, 0);
	assert_int_equal(d->function_table[0]->name_strindex, 0);
	assert_int_equal(d->stack_table[0]->n_location_indices, 0);
	assert_null(d->attribute_table[0]->value);
	assert_int_equal(d->n_link_table, 1);

	/* Location i + 1 is pprof's location id i + 1, the same code. */
	for (size_t i = 0; i < prof->n_location; i++) {
		const Perftools__Profiles__Location *pl = loc_by_id(prof, i + 1);
		const Opentelemetry__Proto__Profiles__V1development__Location *ol =
		    d->location_table[i + 1];
		assert_true(ol->mapping_index > 0 &&
			    (size_t)ol->mapping_index < d->n_mapping_table);
		assert_string_equal(ostr(d, d->mapping_table[ol->mapping_index]->filename_strindex),
				    loc_mapping(prof, pl));
		assert_int_equal(ol->n_lines, pl->n_line);
		if (!pl->n_line)
			continue;
		assert_int_equal(ol->lines[0]->line, pl->line[0]->line);
		const Opentelemetry__Proto__Profiles__V1development__Function *of =
		    d->function_table[ol->lines[0]->function_index];
		assert_string_equal(ostr(d, of->name_strindex), str(prof, loc_fn(prof, pl)->name));
		const char *type =
		    oattr(d, ol->attribute_indices, ol->n_attribute_indices, "profile.frame.type");
		const char *map = loc_mapping(prof, pl);
		assert_string_equal(type, !strcmp(map, "[python]")	      ? "cpython"
					  : !strcmp(map, "[kernel.kallsyms]") ? "kernel"
					  : !strcmp(map, "[taipan]")	      ? "unknown"
									      : "native");
	}

	/* Per process: two profiles (samples, cpu), each with every sample. */
	size_t nsamples = 0;
	for (size_t r = 0; r < req->n_resource_profiles; r++) {
		const Opentelemetry__Proto__Profiles__V1development__ResourceProfiles *rp =
		    req->resource_profiles[r];
		assert_int_equal(rp->n_scope_profiles, 1);
		const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
		    rp->scope_profiles[0];
		assert_int_equal(sp->n_profiles, 2);
		assert_string_equal(ostr(d, sp->profiles[0]->sample_type->type_strindex),
				    "samples");
		assert_string_equal(ostr(d, sp->profiles[1]->sample_type->type_strindex), "cpu");
		bool service = false;
		for (size_t k = 0; k < rp->resource->n_attributes; k++)
			service |= !strcmp(rp->resource->attributes[k]->key, "service.name") &&
				   !strcmp(rp->resource->attributes[k]->value->string_value, "svc");
		assert_true(service);
		for (size_t i = 0; i < sp->profiles[0]->n_samples; i++) {
			const Opentelemetry__Proto__Profiles__V1development__Sample *s0 =
			    sp->profiles[0]->samples[i];
			const Opentelemetry__Proto__Profiles__V1development__Sample *s1 =
			    sp->profiles[1]->samples[i];
			assert_true(s0->stack_index > 0 &&
				    (size_t)s0->stack_index < d->n_stack_table);
			assert_int_equal(s1->stack_index, s0->stack_index);
			assert_int_equal(s1->values[0], s0->values[0] * PERIOD_NS);
			assert_non_null(
			    oattr(d, s0->attribute_indices, s0->n_attribute_indices, "thread.id"));
			const Opentelemetry__Proto__Profiles__V1development__Stack *st =
			    d->stack_table[s0->stack_index];
			for (size_t k = 0; k < st->n_location_indices; k++)
				assert_true(st->location_indices[k] > 0 &&
					    (size_t)st->location_indices[k] < d->n_location_table);
		}
		nsamples += sp->profiles[0]->n_samples;
	}
	assert_int_equal(nsamples, prof->n_sample);
	otlp_free(req);
	perftools__profiles__profile__free_unpacked(prof, NULL);
	profile_free(p);
}

/* OTLP's strings are the dictionary's, escaped: no hostile name goes out
 * raw, in the tables or the resource. */
static void test_otlp_hostile_names(void **state)
{
	(void)state;
	struct profile *p = pb_evil_profile();
	OtRequest *req = otlp_of(p, NULL);
	const OtDictionary *d = req->dictionary;
	bool seen = false;
	for (size_t i = 0; i < d->n_string_table; i++) {
		pb_assert_no_raw_controls(d->string_table[i], strlen(d->string_table[i]), false);
		seen |= !strcmp(d->string_table[i], EVIL_FN_ESC);
	}
	assert_true(seen);
	for (size_t r = 0; r < req->n_resource_profiles; r++)
		for (size_t k = 0; k < req->resource_profiles[r]->resource->n_attributes; k++) {
			const Opentelemetry__Proto__Common__V1__AnyValue *v =
			    req->resource_profiles[r]->resource->attributes[k]->value;
			if (v->value_case ==
			    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE)
				pb_assert_no_raw_controls(v->string_value, strlen(v->string_value),
							  false);
		}
	otlp_free(req);
	profile_free(p);
}

/* A sample without frames stands on the "[unknown]" location; a profile
 * without samples is a request without resources. */
static void test_otlp_frameless_and_empty(void **state)
{
	(void)state;
	struct profile *p = profile_new();
	assert_non_null(p);
	OtRequest *req = otlp_of(p, NULL);
	assert_int_equal(req->n_resource_profiles, 0);
	assert_string_equal(req->dictionary->string_table[0], "");
	otlp_free(req);

	struct prof_labels l = {.pid = 1, .tid = 1, .thread_name = ""};
	assert_int_equal(profile_add(p, NULL, 0, &l, 5), 0);
	req = otlp_of(p, NULL);
	const OtDictionary *d = req->dictionary;
	assert_int_equal(req->n_resource_profiles, 1);
	const Opentelemetry__Proto__Profiles__V1development__Sample *s =
	    req->resource_profiles[0]->scope_profiles[0]->profiles[0]->samples[0];
	assert_int_equal(s->values[0], 5);
	const Opentelemetry__Proto__Profiles__V1development__Stack *st =
	    d->stack_table[s->stack_index];
	assert_int_equal(st->n_location_indices, 1);
	const Opentelemetry__Proto__Profiles__V1development__Location *loc =
	    d->location_table[st->location_indices[0]];
	assert_string_equal(
	    ostr(d, d->function_table[loc->lines[0]->function_index]->name_strindex), "[unknown]");
	/* An empty thread name is left out; the id is always there. */
	assert_null(oattr(d, s->attribute_indices, s->n_attribute_indices, "thread.name"));
	assert_non_null(oattr(d, s->attribute_indices, s->n_attribute_indices, "thread.id"));
	otlp_free(req);
	profile_free(p);
}

/* A profile that kept its events: each sample has a value and a timestamp
 * per event, in every type (samples, cpu, wall), untimed ones at the
 * profile's start; a sample that kept none is one value at the start. */
static void test_otlp_timestamps(void **state)
{
	(void)state;
	struct profile *p = profile_new();
	assert_non_null(p);
	profile_keep_events(p, 100);
	profile_set_mode(p, PROF_MODE_WALL);
	profile_set_timing(p, 10000000, 1700000000000000000ULL, 3000000000ULL);
	uint32_t f = pb_py(p, "work", "app.py", 20, 1);
	struct prof_labels run = {
	    .pid = 7, .tid = 7, .thread_name = "main", .state = PROF_STATE_RUNNING};
	struct prof_labels nap = run;
	nap.state = PROF_STATE_SLEEPING;
	size_t i;
	assert_int_equal(profile_add_at(p, &f, 1, &run, 0, 0, &i), 0);
	profile_bump_at(p, i, 1, 0, 1700000000100000000ULL);
	profile_bump_at(p, i, 2, 0, 0);
	assert_int_equal(profile_add_at(p, &f, 1, &nap, 0, 0, &i), 0);
	profile_bump_at(p, i, 1, 400000000, 1700000000500000000ULL);
	OtRequest *req = otlp_of(p, NULL);
	assert_int_equal(req->n_resource_profiles, 1);
	const OtScopeProfiles *sp = req->resource_profiles[0]->scope_profiles[0];
	assert_int_equal(sp->n_profiles, 3);
	/* samples, cpu, wall: per event of the running sample, then of the
	 * sleeping one. */
	static const int64_t want[3][2][2] = {
	    {{1, 2}, {1}},
	    {{10000000, 20000000}, {0}},
	    {{10000000, 20000000}, {400000000}},
	};
	for (size_t t = 0; t < 3; t++) {
		const OtProfile *pr = sp->profiles[t];
		assert_int_equal(pr->n_samples, 2);
		for (size_t k = 0; k < 2; k++) {
			const Opentelemetry__Proto__Profiles__V1development__Sample *s =
			    pr->samples[k];
			size_t n = k == 0 ? 2 : 1;
			assert_int_equal(s->n_values, n);
			assert_int_equal(s->n_timestamps_unix_nano, n);
			for (size_t e = 0; e < n; e++)
				assert_int_equal(s->values[e], want[t][k][e]);
		}
		assert_int_equal(pr->samples[0]->timestamps_unix_nano[0], 1700000000100000000ULL);
		assert_int_equal(pr->samples[0]->timestamps_unix_nano[1], 1700000000000000000ULL);
		assert_int_equal(pr->samples[1]->timestamps_unix_nano[0], 1700000000500000000ULL);
	}
	otlp_free(req);

	/* Without events: one aggregated value, no timestamps. */
	struct profile *plain = profile_new();
	assert_non_null(plain);
	assert_int_equal(profile_merge(plain, p), 0);
	req = otlp_of(plain, NULL);
	const OtProfile *pr = req->resource_profiles[0]->scope_profiles[0]->profiles[0];
	for (size_t k = 0; k < pr->n_samples; k++) {
		assert_int_equal(pr->samples[k]->n_values, 1);
		assert_int_equal(pr->samples[k]->n_timestamps_unix_nano, 0);
	}
	otlp_free(req);
	profile_free(plain);
	profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_folded),
	    cmocka_unit_test(test_folded_edges),
	    cmocka_unit_test(test_pprof_roundtrip),
	    cmocka_unit_test(test_pprof_frameless),
	    cmocka_unit_test(test_pprof_native),
	    cmocka_unit_test(test_frame_unnamed),
	    cmocka_unit_test(test_hostile_names_escaped),
	    cmocka_unit_test(test_go_pprof),
	    cmocka_unit_test(test_otlp_matches_pprof),
	    cmocka_unit_test(test_otlp_hostile_names),
	    cmocka_unit_test(test_otlp_frameless_and_empty),
	    cmocka_unit_test(test_otlp_timestamps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
