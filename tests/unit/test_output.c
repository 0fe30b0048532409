/* test_output.c - unit tests for the folded and pprof encoders and for
 * output_write_file: exact folded text, a pprof round trip through
 * protobuf-c, the same file read by go tool pprof, and the safety rules of
 * writing a file.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include <cmocka.h>

#include "output/output.h"
#include "profile/profile.h"
#include "profile.pb-c.h"
#include "profile_build.h"

/* Allocation failures on demand: see alloc_inject.h. */
#include "alloc_inject.h"

/* A format of output_formats[] by its name. */
#define FMT(name) output_format_from_name(name)
#define PERIOD_NS 10000000ull /* 100 Hz */
#define START_NS 1700000000000000000ull
#define DURATION_NS 2000000000ull

/* Frame ids of the test profile. */
struct ids {
	uint32_t mod, main, main21, run, weird, native, kernel, trunc;
};

static const struct prof_labels thread_a = {
    .pid = 100,
    .tid = 100,
    .thread_name = "MainThread",
    .comm = "python3",
    .runtime = "python",
    .runtime_version = "3.11.4",
    .version_alias = "python_version",
    .lock_name = "gil",
};

static const struct prof_labels thread_b = {
    .pid = 100,
    .tid = 101,
    .ns_pid = 7,
    .thread_name = "worker",
    .comm = "python3",
    .runtime = "python",
    .runtime_version = "3.11.4",
    .version_alias = "python_version",
    .lock_name = "gil",
};

/* Two threads of one process share a Python stack (4 and 2 samples); the
 * main thread also has a truncated stack that goes through native code into
 * the kernel (2 samples). So the leaves split 6:2, 75% / 25%. */
static struct profile *build_profile(struct ids *id)
{
	struct profile *p = profile_new();
	assert_non_null(p);
	profile_set_timing(p, PERIOD_NS, START_NS, DURATION_NS);

	id->mod = pb_py(p, "<module>", "app.py", 10, 1);
	id->main = pb_py(p, "main", "app.py", 20, 15);
	/* Another line of main: a location of its own, the same function. */
	id->main21 = pb_py(p, "main", "app.py", 21, 15);
	id->run = pb_py(p, "Worker.run", "lib/work.py", 42, 40);
	id->weird = pb_py(p, "weird;name\nx", "odd.py", 3, 1);
	id->native = pb_frame(p, (struct prof_frame){.name = "PyObject_Call",
						     .module = "/usr/lib/libpython3.11.so.1.0",
						     .addr = 0x7f0000001234,
						     .kind = PROF_FRAME_NATIVE});
	id->kernel = pb_frame(p, (struct prof_frame){.name = "do_syscall_64",
						     .module = "[kernel]",
						     .addr = 0xffffffff81000010ull,
						     .kind = PROF_FRAME_KERNEL});
	id->trunc =
	    pb_frame(p, (struct prof_frame){.name = "[truncated]", .kind = PROF_FRAME_MARKER});

	uint32_t py[] = {id->mod, id->main, id->run};
	uint32_t mixed[] = {id->trunc, id->weird, id->native, id->kernel};
	uint32_t only_mod[] = {id->mod};
	assert_int_equal(profile_add(p, py, 3, &thread_a, 3), 0);
	assert_int_equal(profile_add(p, py, 3, &thread_a, 1), 0);
	assert_int_equal(profile_add(p, py, 3, &thread_b, 2), 0);
	assert_int_equal(profile_add(p, mixed, 4, &thread_a, 2), 0);
	/* A stack with no samples must not appear anywhere. */
	assert_int_equal(profile_add(p, only_mod, 1, &thread_b, 0), 0);
	return p;
}

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

/* Inflates a gzip member; returns a buffer to free and its length. */
static uint8_t *gunzip(const uint8_t *in, size_t inlen, size_t *outlen)
{
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
	size_t cap = 4096, len = 0;
	uint8_t *out = malloc(cap);
	assert_non_null(out);
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)inlen;
	int rc;
	do {
		if (len == cap) {
			cap *= 2;
			out = realloc(out, cap);
			assert_non_null(out);
		}
		zs.next_out = out + len;
		zs.avail_out = (uInt)(cap - len);
		rc = inflate(&zs, Z_NO_FLUSH);
		assert_true(rc == Z_OK || rc == Z_STREAM_END);
		len = cap - zs.avail_out;
	} while (rc != Z_STREAM_END);
	assert_int_equal(zs.avail_in, 0); /* one member, nothing after it */
	inflateEnd(&zs);
	*outlen = len;
	return out;
}

static Perftools__Profiles__Profile *unpack_gz(const uint8_t *gz, size_t gzlen)
{
	size_t len;
	uint8_t *raw = gunzip(gz, gzlen, &len);
	Perftools__Profiles__Profile *prof = perftools__profiles__profile__unpack(NULL, len, raw);
	free(raw);
	assert_non_null(prof);
	return prof;
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

/* --- output_write_file ------------------------------------------------------- */

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	char *buf = NULL;
	size_t cap = 0, n = 0, r;
	do {
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			buf = realloc(buf, cap + 1);
			assert_non_null(buf);
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void rm_rf(const char *dir)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_write_file(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ids id;
	struct profile *p = build_profile(&id);
	char path[256];
	size_t len;

	snprintf(path, sizeof(path), "%s/out.pb.gz", dir);
	assert_int_equal(output_write_file(p, path, FMT("pprof"), NULL), 0);
	char *data = read_file(path, &len);
	Perftools__Profiles__Profile *prof = unpack_gz((const uint8_t *)data, len);
	assert_int_equal(prof->n_sample, 3);
	perftools__profiles__profile__free_unpacked(prof, NULL);
	free(data);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, geteuid());
	/* A profile names what its processes run (every user's, with -a). */
	assert_int_equal(st.st_mode & 07777, 0600);

	/* Replacing a file of our own is the normal case. */
	snprintf(path, sizeof(path), "%s/out.folded", dir);
	write_text(path, "old contents\n");
	struct output_opts o = {.folded_lines = true};
	assert_int_equal(output_write_file(p, path, FMT("folded"), &o), 0);
	data = read_file(path, &len);
	assert_string_equal(
	    data,
	    "<module> (app.py:10);main (app.py:20);Worker.run (lib/work.py:42) 6\n"
	    "[truncated];weird\\x3bname\\x0ax (odd.py:3);PyObject_Call_[n];do_syscall_64_[k] 2\n");
	free(data);
	/* No temporary file is left behind; the new file is 0600 too. */
	assert_int_equal(dir_entries(dir), 2);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);

	/* A relative path works from the current directory. */
	char cwd[4096];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(dir), 0);
	assert_int_equal(output_write_file(p, "rel.txt", FMT("folded"), NULL), 0);
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(dir_entries(dir), 3);

	assert_int_equal(output_write_file(p, path, NULL, NULL), -EINVAL);
	profile_free(p);
	rm_rf(dir);
}

static void test_write_file_refuses_symlink(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ids id;
	struct profile *p = build_profile(&id);
	char real[256], link[256], dangling[256], missing[256];
	size_t len;

	snprintf(real, sizeof(real), "%s/real.txt", dir);
	snprintf(link, sizeof(link), "%s/link.folded", dir);
	write_text(real, "keep\n");
	assert_int_equal(symlink(real, link), 0);
	assert_int_equal(output_write_file(p, link, FMT("folded"), NULL), -EPERM);
	char *data = read_file(real, &len);
	assert_string_equal(data, "keep\n");
	free(data);
	struct stat st;
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));

	/* A dangling link must not create its target either. */
	snprintf(dangling, sizeof(dangling), "%s/dangling.pb.gz", dir);
	snprintf(missing, sizeof(missing), "%s/target", dir);
	assert_int_equal(symlink(missing, dangling), 0);
	assert_int_equal(output_write_file(p, dangling, FMT("pprof"), NULL), -EPERM);
	assert_int_equal(access(missing, F_OK), -1);

	/* Refused writes leave no temporary file. */
	assert_int_equal(dir_entries(dir), 3);
	profile_free(p);
	rm_rf(dir);
}

/* output_file_open into a fresh temporary directory's path rel: its
 * return, with the error text in err. */
static int open_in(const char *dir, const char *rel, char *err, size_t errlen)
{
	char path[512];
	struct output_file *of;
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	err[0] = '\0';
	int ret = output_file_open(path, FMT("folded"), &of, err, errlen);
	output_file_free(of);
	return ret;
}

/* -o's directory is reached through a symbolic link only where nobody else
 * could have made or changed it: a link of ours (or root's) in a directory
 * of ours that no one else can write. */
static void test_open_follows_only_trusted_links(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char p[512], q[512], err[1024];
	struct profile *pr;
	struct ids id;

	snprintf(p, sizeof(p), "%s/real", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	/* Ours, in a directory of ours (0700): followed, relative or absolute,
	 * through a chain of them too. */
	snprintf(q, sizeof(q), "%s/rel", dir);
	assert_int_equal(symlink("real", q), 0);
	snprintf(q, sizeof(q), "%s/abs", dir);
	assert_int_equal(symlink(p, q), 0);
	snprintf(p, sizeof(p), "%s/chain", dir);
	assert_int_equal(symlink(q, p), 0);
	pr = build_profile(&id);
	snprintf(p, sizeof(p), "%s/rel/a.folded", dir);
	assert_int_equal(output_write_file(pr, p, FMT("folded"), NULL), 0);
	snprintf(p, sizeof(p), "%s/chain/./b.folded", dir);
	assert_int_equal(output_write_file(pr, p, FMT("folded"), NULL), 0);
	snprintf(p, sizeof(p), "%s/real", dir);
	assert_int_equal(dir_entries(p), 2);
	profile_free(pr);

	/* Ours, but in a directory every user can write: another user could
	 * have put it there. Sticky does not help: a hard link to a link is a
	 * link of its owner's. */
	snprintf(p, sizeof(p), "%s/open", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(chmod(p, 01777), 0);
	snprintf(q, sizeof(q), "%s/open/l", dir);
	assert_int_equal(symlink("../real", q), 0);
	assert_int_equal(open_in(dir, "open/l/c.folded", err, sizeof(err)), -EPERM);
	if (!strstr(err, "open/l is a symbolic link in a directory that every user can write "
			 "(mode 1777)"))
		fail_msg("%s", err);
	/* The same through a link that is trusted. */
	snprintf(q, sizeof(q), "%s/to-open", dir);
	assert_int_equal(symlink("open", q), 0);
	assert_int_equal(open_in(dir, "to-open/l/c.folded", err, sizeof(err)), -EPERM);
	/* Group-writable is refused as well. */
	assert_int_equal(chmod(p, 0775), 0);
	assert_int_equal(open_in(dir, "open/l/c.folded", err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "its group can write (mode 0775)"));
	/* The directory itself, writable or not, is fine when no link is met. */
	assert_int_equal(open_in(dir, "open/c.folded", err, sizeof(err)), 0);

	/* A link loop ends. */
	snprintf(q, sizeof(q), "%s/loop", dir);
	assert_int_equal(symlink("loop", q), 0);
	assert_int_equal(open_in(dir, "loop/d.folded", err, sizeof(err)), -ELOOP);

	if (geteuid() == 0) {
		/* Another user's link, in a directory of root's. */
		snprintf(q, sizeof(q), "%s/theirs", dir);
		assert_int_equal(symlink("real", q), 0);
		assert_int_equal(lchown(q, 65534, 65534), 0);
		assert_int_equal(open_in(dir, "theirs/e.folded", err, sizeof(err)), -EPERM);
		assert_non_null(strstr(err, "theirs is a symbolic link owned by uid 65534"));
	}
	snprintf(p, sizeof(p), "%s/real", dir);
	assert_int_equal(dir_entries(p), 2); /* nothing more written */
	rm_rf(dir);
}

static void test_write_file_foreign_owner(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		print_message("skipping: only root can give a file to another user\n");
		skip();
	}
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ids id;
	struct profile *p = build_profile(&id);
	char path[256];
	size_t len;
	snprintf(path, sizeof(path), "%s/theirs.folded", dir);
	write_text(path, "theirs\n");
	assert_int_equal(chown(path, 65534, 65534), 0);
	assert_int_equal(output_write_file(p, path, FMT("folded"), NULL), -EPERM);
	char *data = read_file(path, &len);
	assert_string_equal(data, "theirs\n");
	free(data);
	assert_int_equal(dir_entries(dir), 1);
	profile_free(p);
	rm_rf(dir);
}

static void test_write_file_errors(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ids id;
	struct profile *p = build_profile(&id);
	char path[256];

	snprintf(path, sizeof(path), "%s/no/such/dir/out.folded", dir);
	assert_int_equal(output_write_file(p, path, FMT("folded"), NULL), -ENOENT);
	/* A directory is not a file name. */
	snprintf(path, sizeof(path), "%s/", dir);
	assert_int_equal(output_write_file(p, path, FMT("folded"), NULL), -EISDIR);
	snprintf(path, sizeof(path), "%s/sub.folded", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(output_write_file(p, path, FMT("folded"), NULL), -EISDIR);
	assert_int_equal(dir_entries(dir), 1);

	profile_free(p);
	rm_rf(dir);
}

/* output_file_open's refusal of path: err, which must contain want. */
static void assert_refused(const char *path, int want_rc, const char *want)
{
	struct output_file *of = (struct output_file *)1;
	char err[512] = "";
	assert_int_equal(output_file_open(path, FMT("folded"), &of, err, sizeof(err)), want_rc);
	assert_null(of);
	if (!strstr(err, want)) {
		print_error("%s: \"%s\" does not say \"%s\"\n", path, err, want);
		fail();
	}
}

/* Device nodes and FIFOs stay what they are; each refusal says why. */
static void test_open_refuses_what_is_not_a_file(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "%s/fifo.folded", dir);
	assert_int_equal(mkfifo(path, 0644), 0);
	assert_refused(path, -EPERM, "is a FIFO");
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	if (geteuid() == 0) {
		snprintf(path, sizeof(path), "%s/fakenull", dir);
		assert_int_equal(mknod(path, S_IFCHR | 0666, makedev(1, 3)), 0);
		assert_refused(path, -EPERM, "is a character device");
		assert_int_equal(lstat(path, &st), 0);
		assert_true(S_ISCHR(st.st_mode));
		snprintf(path, sizeof(path), "%s/theirs.folded", dir);
		write_text(path, "theirs\n");
		assert_int_equal(chown(path, 65534, 65534), 0);
		assert_refused(path, -EPERM, "owned by uid 65534");
	}
	snprintf(path, sizeof(path), "%s/link.folded", dir);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_refused(path, -EPERM, "is a symbolic link");
	snprintf(path, sizeof(path), "%s/no/out.folded", dir);
	assert_refused(path, -ENOENT, "does not exist");
	snprintf(path, sizeof(path), "%s", dir);
	assert_refused(path, -EISDIR, "is a directory");
	/* Nothing was created beside them. */
	assert_int_equal(dir_entries(dir), geteuid() == 0 ? 4 : 2);
	rm_rf(dir);
}

/* The temporary file is there from open to commit, and gone after either a
 * commit or a free. */
static void test_open_then_commit(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ids id;
	struct profile *p = build_profile(&id);
	struct output_file *of;
	char path[256], err[512];
	size_t len;

	snprintf(path, sizeof(path), "%s/out.folded", dir);
	assert_int_equal(output_file_open(path, FMT("folded"), &of, err, sizeof(err)), 0);
	assert_int_equal(dir_entries(dir), 1);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(output_file_commit(of, p, NULL, err, sizeof(err)), 0);
	output_file_free(of);
	assert_int_equal(dir_entries(dir), 1);
	char *data = read_file(path, &len);
	assert_non_null(strstr(data, "Worker.run (lib/work.py) 6\n"));
	free(data);

	/* Given up before the end: nothing left. */
	assert_int_equal(output_file_open(path, FMT("folded"), &of, err, sizeof(err)), 0);
	assert_int_equal(dir_entries(dir), 2);
	output_file_free(of);
	assert_int_equal(dir_entries(dir), 1);

	/* The destination turned into a symlink while recording. */
	assert_int_equal(output_file_open(path, FMT("folded"), &of, err, sizeof(err)), 0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(output_file_commit(of, p, NULL, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "is a symbolic link"));
	output_file_free(of);
	assert_int_equal(dir_entries(dir), 1);
	profile_free(p);
	rm_rf(dir);
}

/* A pid that is certainly dead: a child's, reaped. */
static pid_t dead_pid(void)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	return pid;
}

/* Leftovers of killed taipans go; anything else stays. */
static void test_open_removes_stale_temps(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[512], name[128];
	struct output_file *of;
	pid_t dead = dead_pid();
	static const char *const keep_fmt[] = {
	    ".taipan-%d-0123456789abcdeg.tmp",	/* not hex */
	    ".taipan-%d-0123456789abcde.tmp",	/* 15 digits */
	    ".taipan-%d-0123456789ABCDEF.tmp",	/* not as taipan writes them */
	    ".taipan-%d-0123456789abcdef.tmp~", /* something else's */
	    "taipan-%d-0123456789abcdef.tmp",	"x.taipan-%d-0123456789abcdef.tmp",
	};
	for (size_t i = 0; i < sizeof(keep_fmt) / sizeof(keep_fmt[0]); i++) {
		snprintf(name, sizeof(name), keep_fmt[i], (int)dead);
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		write_text(path, "x");
	}
	/* A live process's (ours is skipped; our parent is alive). */
	snprintf(path, sizeof(path), "%s/.taipan-%d-0123456789abcdef.tmp", dir, (int)getppid());
	write_text(path, "x");
	/* A symlink of the pattern is not a file taipan wrote. */
	snprintf(path, sizeof(path), "%s/.taipan-%d-00000000000000ff.tmp", dir, (int)dead);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	int kept = dir_entries(dir);
	/* The stale one. */
	snprintf(path, sizeof(path), "%s/.taipan-%d-0123456789abcdef.tmp", dir, (int)dead);
	write_text(path, "stale");

	snprintf(path, sizeof(path), "%s/out.folded", dir);
	char err[512];
	assert_int_equal(output_file_open(path, FMT("folded"), &of, err, sizeof(err)), 0);
	output_file_free(of);
	assert_int_equal(dir_entries(dir), kept);
	snprintf(path, sizeof(path), "%s/.taipan-%d-0123456789abcdef.tmp", dir, (int)dead);
	assert_int_equal(access(path, F_OK), -1);
	rm_rf(dir);
}

/* A profile that could not go where asked goes to $TMPDIR, for its owner. */
static void test_rescue(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ids id;
	struct profile *p = build_profile(&id);
	char path[512], want[512];
	const char *old = getenv("TMPDIR");
	char *saved = old ? strdup(old) : NULL;
	size_t len;
	struct stat st;

	assert_int_equal(setenv("TMPDIR", dir, 1), 0);
	assert_int_equal(output_write_rescue(p, FMT("folded"), NULL, path, sizeof(path)), 0);
	snprintf(want, sizeof(want), "%s/taipan-rescued-%d-", dir, (int)getpid());
	assert_true(strncmp(path, want, strlen(want)) == 0);
	assert_string_equal(path + strlen(path) - strlen(".folded"), ".folded");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	char *data = read_file(path, &len);
	assert_non_null(strstr(data, "Worker.run (lib/work.py) 6\n"));
	free(data);
	/* A missing directory is an error, not a crash. */
	snprintf(want, sizeof(want), "%s/missing", dir);
	assert_int_equal(setenv("TMPDIR", want, 1), 0);
	assert_int_equal(output_write_rescue(p, FMT("pprof"), NULL, path, sizeof(path)), -ENOENT);

	if (saved)
		setenv("TMPDIR", saved, 1);
	else
		unsetenv("TMPDIR");
	free(saved);
	profile_free(p);
	rm_rf(dir);
}

static void test_format_selection(void **state)
{
	(void)state;
	assert_ptr_equal(output_format_from_path("a.folded"), FMT("folded"));
	assert_ptr_equal(output_format_from_path("dir/a.txt"), FMT("folded"));
	assert_ptr_equal(output_format_from_path("/x/profile.pb.gz"), FMT("pprof"));
	assert_ptr_equal(output_format_from_path("cpu.pprof"), FMT("pprof"));
	assert_ptr_equal(output_format_from_path("CPU.PB.GZ"), FMT("pprof"));
	assert_ptr_equal(output_format_from_path("a.gz"), NULL);
	assert_ptr_equal(output_format_from_path("a.folded.bak"), NULL);
	assert_ptr_equal(output_format_from_path("noext"), NULL);
	assert_ptr_equal(output_format_from_path(".txt"), NULL);
	assert_ptr_equal(output_format_from_path("dir/.pprof"), NULL);
	assert_ptr_equal(output_format_from_path(""), NULL);
	assert_string_equal(output_format_from_name("folded")->name, "folded");
	assert_string_equal(output_format_from_name("pprof")->name, "pprof");
	assert_ptr_equal(output_format_from_name("html?"), NULL);
	assert_ptr_equal(output_format_from_name(NULL), NULL);
	size_t n = 0;
	for (const struct output_format_desc *f = output_formats; f->name; f++, n++) {
		assert_ptr_equal(output_format_from_name(f->name), f);
		/* Each extension picks its own format. */
		for (const char *const *e = f->extensions; *e; e++) {
			char path[64];
			snprintf(path, sizeof(path), "dir/x%s", *e);
			assert_ptr_equal(output_format_from_path(path), f);
		}
		assert_non_null(f->extensions[0]);
		assert_true(f->suggested >= 1 && f->write && f->help);
	}
	assert_true(n >= 4);

	/* The lists record's messages and --help give. */
	char buf[512];
	assert_string_equal(output_format_names(buf, sizeof(buf)),
			    "html, speedscope, pprof or folded");
	assert_string_equal(output_format_extensions(buf, sizeof(buf)),
			    ".html, .json, .pb.gz, .pprof, .folded or .txt");
	assert_string_equal(output_format_summary(buf, sizeof(buf)),
			    ".html/.htm flame graph, .json speedscope, .pb.gz/.pprof pprof, "
			    ".folded/.txt folded stacks");
	/* Cut to fit, terminated. */
	assert_string_equal(output_format_names(buf, 9), "html, sp");
	assert_string_equal(output_format_summary(buf, 12), ".html/.htm ");
}

#ifdef INJECT_ALLOC_FAILURES
/* The contents of the open file f, to free; *len is its length. */
static char *contents(FILE *f, size_t *len)
{
	struct stat st;
	assert_int_equal(fflush(f), 0);
	assert_int_equal(fstat(fileno(f), &st), 0);
	char *buf = malloc((size_t)st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(pread(fileno(f), buf, (size_t)st.st_size, 0), st.st_size);
	*len = (size_t)st.st_size;
	return buf;
}

/* Runs encoder `which` (folded, pprof, whole file) into f or path. */
static int encode_one(int which, const struct profile *p, FILE *f, const char *path)
{
	static const struct output_opts o = {.folded_lines = true, .folded_threads = true};
	assert_int_equal(ftruncate(fileno(f), 0), 0);
	rewind(f);
	if (which == 0)
		return output_write_folded(p, f, &o);
	if (which == 1)
		return output_write_pprof(p, f, NULL);
	return output_write_file(p, path, FMT("pprof"), NULL);
}

#endif

/* Fails each allocation in turn, for each encoder and for a whole file
 * write. Each must then return -ENOMEM, or succeed with the complete output
 * when the failure was absorbed (glibc's asprintf falls back to its first
 * buffer); never crash, never leave a temporary file. LSan or valgrind over
 * this test finds what the error paths leak. */
static void test_alloc_failures(void **state)
{
	(void)state;
#ifndef INJECT_ALLOC_FAILURES
	print_message("skipping: allocation failures cannot be injected under ASan\n");
	skip();
#else
	char dir[] = "/tmp/taipan-test-output-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[256];
	snprintf(path, sizeof(path), "%s/out.pb.gz", dir);
	struct ids id;
	struct profile *p = build_profile(&id);
	FILE *f = tmpfile();
	assert_non_null(f);
	setvbuf(f, NULL, _IONBF, 0); /* stdio must not allocate a buffer */

	for (int which = 0; which < 3; which++) {
		size_t want_len, got_len;
		assert_int_equal(encode_one(which, p, f, path), 0);
		char *want = which == 2 ? read_file(path, &want_len) : contents(f, &want_len);
		unlink(path);

		long n;
		for (n = 0; n < 100000; n++) {
			alloc_failed = 0;
			alloc_live = 0;
			alloc_countdown = n;
			alloc_counting = true;
			int rc = encode_one(which, p, f, path);
			alloc_counting = false;
			alloc_countdown = -1;
			long live = alloc_live;
			if (which == 0 && n == 0 && !alloc_failed) {
				print_message("skipping: malloc is not ours to replace here "
					      "(valgrind?)\n");
				fclose(f);
				free(want);
				profile_free(p);
				rm_rf(dir);
				skip();
			}
			if (live != 0)
				print_error(
				    "encoder %d, allocation %ld failed: %ld blocks leaked\n", which,
				    n, live);
			assert_int_equal(live, 0);
			if (rc != 0 && rc != -ENOMEM)
				print_error("encoder %d, allocation %ld failed: rc %d\n", which, n,
					    rc);
			assert_true(rc == 0 || rc == -ENOMEM);
			if (rc == 0) {
				char *got =
				    which == 2 ? read_file(path, &got_len) : contents(f, &got_len);
				assert_int_equal(got_len, want_len);
				assert_memory_equal(got, want, want_len);
				free(got);
				unlink(path);
			}
			assert_int_equal(dir_entries(dir), 0);
			if (!alloc_failed)
				break;
		}
		/* The failures did reach the encoder. (Under valgrind only its own
		 * calls do: libc's internal ones go to valgrind's malloc.) */
		assert_true(n >= 2);
		free(want);
	}
	fclose(f);
	profile_free(p);
	rm_rf(dir);
#endif
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
	    cmocka_unit_test(test_alloc_failures),
	    cmocka_unit_test(test_go_pprof),
	    cmocka_unit_test(test_write_file),
	    cmocka_unit_test(test_write_file_refuses_symlink),
	    cmocka_unit_test(test_write_file_foreign_owner),
	    cmocka_unit_test(test_open_follows_only_trusted_links),
	    cmocka_unit_test(test_write_file_errors),
	    cmocka_unit_test(test_open_refuses_what_is_not_a_file),
	    cmocka_unit_test(test_open_then_commit),
	    cmocka_unit_test(test_open_removes_stale_temps),
	    cmocka_unit_test(test_rescue),
	    cmocka_unit_test(test_format_selection),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
