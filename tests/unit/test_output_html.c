/* test_output_html.c - unit tests for the HTML flame-graph and speedscope
 * encoders: the page's embedded data read back with jansson (escaping of
 * "</script>", non-ASCII and invalid UTF-8 included), speedscope's per-thread
 * profiles and weights, format selection, and allocation failures.
 *
 * Run as `test_output_html --write-big FILE [N]` it instead writes the flame
 * graph of a synthetic profile with N (default 100,000) distinct stacks, for
 * the functional test that loads it in a browser and times it; with
 * `--write-names FILE`, the page of the small profile below, whose names
 * try to break out of the page.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>

#include "output/output.h"
#include "profile/profile.h"
#include "profile_build.h"

/* Allocation failures on demand: see alloc_inject.h. */
#include "alloc_inject.h"

/* A format of output_formats[] by its name. */
#define FMT(name) output_format_from_name(name)
#define PERIOD_NS 10000000ull /* 100 Hz */
#define START_NS 1700000000123456789ull
#define DURATION_NS 2000000000ull

/* Names that must survive the trip into a <script> element and back. */
#define NAME_SCRIPT "</script><script>alert(1)</script><!--"
#define NAME_UNICODE "na\xc3\xafve_\xe5\x87\xbd\xe6\x95\xb0_\xf0\x9f\x90\x8d" /* naïve_函数_🐍 */
#define NAME_INVALID "bad\xff\xc0\xafname\xed\xa0\x80"
#define NAME_REPAIRED                                                                              \
	"bad\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdname\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"

static const struct prof_labels thread_a = {
    .pid = 100,
    .tid = 100,
    .thread_name = "MainThread",
    .comm = "python3",
    .runtime = "python",
    .runtime_version = "3.12.1",
    .version_alias = "python_version",
    .lock_name = "gil",
};

static const struct prof_labels thread_b = {
    .pid = 100,
    .tid = 101,
    .thread_name = "worker \"<b>\"",
    .comm = "python3",
    .runtime = "python",
    .runtime_version = "3.12.1",
    .version_alias = "python_version",
    .lock_name = "gil",
};

struct ids {
	uint32_t mod, main, run, script, uni, bad, kernel, anon_kernel, trunc;
};

/* Thread a: <module>;main;Worker.run x4 (two adds), <module>;main;</script>
 * x1, [truncated];naïve;bad;kernel;0x... x2. Thread b: <module>;main;
 * Worker.run x3, and a frameless sample x1. A zero-count stack appears
 * nowhere. Totals: a 7, b 4. */
static struct profile *build_profile(struct ids *id, bool timing)
{
	struct profile *p = profile_new();
	assert_non_null(p);
	if (timing)
		profile_set_timing(p, PERIOD_NS, START_NS, DURATION_NS);
	id->mod = pb_py(p, "<module>", "/srv/app.py", 10, 1);
	id->main = pb_py(p, "main", "/srv/app.py", 20, 1);
	id->run = pb_py(p, "Worker.run", "/srv/lib/work.py", 42, 1);
	id->script = pb_py(p, NAME_SCRIPT, "/srv/x.py", 3, 1);
	id->uni = pb_py(p, NAME_UNICODE, "/srv/\xc3\xbc.py", 7, 1);
	id->bad = pb_py(p, NAME_INVALID, "/srv/bad.py", 0, 1);
	id->kernel = pb_frame(p, (struct prof_frame){.name = "do_syscall_64",
						     .module = "[kernel.kallsyms]",
						     .addr = 0xffffffff81000010ull,
						     .kind = PROF_FRAME_KERNEL});
	id->anon_kernel = pb_frame(p, (struct prof_frame){.addr = 0xffffffff8123abcdull,
							  .module = "[kernel.kallsyms]",
							  .kind = PROF_FRAME_KERNEL});
	id->trunc =
	    pb_frame(p, (struct prof_frame){.name = "[truncated]", .kind = PROF_FRAME_MARKER});

	uint32_t py[] = {id->mod, id->main, id->run};
	uint32_t scr[] = {id->mod, id->main, id->script};
	uint32_t odd[] = {id->trunc, id->uni, id->bad, id->kernel, id->anon_kernel};
	assert_int_equal(profile_add(p, py, 3, &thread_a, 3), 0);
	assert_int_equal(profile_add(p, py, 3, &thread_a, 1), 0);
	assert_int_equal(profile_add(p, scr, 3, &thread_a, 1), 0);
	assert_int_equal(profile_add(p, odd, 5, &thread_a, 2), 0);
	assert_int_equal(profile_add(p, py, 3, &thread_b, 3), 0);
	assert_int_equal(profile_add(p, NULL, 0, &thread_b, 1), 0);
	assert_int_equal(profile_add(p, py, 2, &thread_b, 0), 0);
	return p;
}

/* Runs an encoder into memory; returns the NUL-terminated output to free. */
static char *encode(output_write_fn fn, const struct profile *p, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	assert_non_null(f);
	assert_int_equal(fn(p, f, NULL), 0);
	assert_int_equal(fclose(f), 0);
	if (len)
		*len = n;
	return buf;
}

static size_t count_ci(const char *hay, const char *needle)
{
	size_t n = 0, len = strlen(needle);
	for (const char *s = hay; *s; s++)
		if (strncasecmp(s, needle, len) == 0)
			n++;
	return n;
}

/* The JSON between the data element's tags, parsed; *raw gets a copy of
 * its text to free. */
static json_t *page_data(const char *html, char **raw)
{
	const char *open = "<script type=\"application/json\" id=\"taipan-data\">";
	const char *start = strstr(html, open);
	assert_non_null(start);
	start += strlen(open);
	const char *end = strstr(start, "</script>");
	assert_non_null(end);
	*raw = strndup(start, (size_t)(end - start));
	assert_non_null(*raw);
	json_error_t jerr;
	json_t *j = json_loads(*raw, 0, &jerr);
	if (!j)
		fail_msg("page data is not JSON: %s at %d", jerr.text, jerr.position);
	return j;
}

static const char *jstr(json_t *strings, json_t *index)
{
	assert_true(json_is_integer(index));
	json_t *s = json_array_get(strings, (size_t)json_integer_value(index));
	assert_true(json_is_string(s));
	return json_string_value(s);
}

static json_int_t jint(json_t *arr, size_t i)
{
	json_t *v = json_array_get(arr, i);
	assert_true(json_is_integer(v));
	return json_integer_value(v);
}

/* Frame id's name as the page will show it. */
static const char *frame_name(json_t *d, uint32_t id)
{
	json_t *frames = json_object_get(d, "frames");
	return jstr(json_object_get(d, "strings"), json_array_get(frames, 4 * (size_t)id));
}

static void test_html_page(void **state)
{
	(void)state;
	struct ids id;
	struct profile *p = build_profile(&id, true);
	char *html = encode(output_write_html, p, NULL);

	/* One whole page, every marker replaced, nothing fetched. */
	assert_int_equal(strncmp(html, "<!DOCTYPE html>", 15), 0);
	assert_non_null(strstr(html, "</html>"));
	assert_null(strstr(html, "TAIPAN:"));
	assert_null(strstr(html, "://"));
	assert_null(strstr(html, " src="));
	assert_non_null(strstr(html, "window.taipan"));	   /* the script */
	assert_non_null(strstr(html, "position: sticky")); /* the style */
	/* Exactly the data and the script: no name closed a <script> early. */
	assert_int_equal(count_ci(html, "<script"), 2);
	assert_int_equal(count_ci(html, "</script"), 2);

	char *raw;
	json_t *d = page_data(html, &raw);
	/* Only ASCII, and nothing an HTML parser looks at inside <script>. */
	for (const char *c = raw; *c; c++)
		assert_true((unsigned char)*c < 0x80 && *c != '<' && *c != '>' && *c != '&');

	assert_int_equal(json_integer_value(json_object_get(d, "version")), 1);
	assert_int_equal(json_integer_value(json_object_get(d, "period_ns")), PERIOD_NS);
	assert_int_equal(json_integer_value(json_object_get(d, "start_ms")), START_NS / 1000000);
	assert_int_equal(json_integer_value(json_object_get(d, "duration_ns")), DURATION_NS);
	assert_int_equal(json_integer_value(json_object_get(d, "total")), 11);

	json_t *strings = json_object_get(d, "strings");
	assert_string_equal(json_string_value(json_array_get(strings, 0)), "");
	/* Decoded, the names are what the profile said. */
	assert_string_equal(frame_name(d, id.script), NAME_SCRIPT);
	assert_string_equal(frame_name(d, id.uni), NAME_UNICODE);
	assert_string_equal(frame_name(d, id.bad), NAME_REPAIRED);
	assert_string_equal(frame_name(d, id.kernel), "do_syscall_64");
	assert_string_equal(frame_name(d, id.anon_kernel), "0xffffffff8123abcd");

	json_t *frames = json_object_get(d, "frames");
	assert_int_equal(json_array_size(frames), 4 * profile_frame_count(p));
	size_t run = 4 * (size_t)id.run;
	assert_string_equal(jstr(strings, json_array_get(frames, run + 1)), "/srv/lib/work.py");
	assert_int_equal(jint(frames, run + 2), 42);
	assert_int_equal(jint(frames, run + 3), PROF_FRAME_INTERP);
	size_t k = 4 * (size_t)id.kernel;
	assert_string_equal(jstr(strings, json_array_get(frames, k + 1)), "[kernel.kallsyms]");
	assert_int_equal(jint(frames, k + 3), PROF_FRAME_KERNEL);
	assert_string_equal(jstr(strings, json_array_get(frames, 4 * (size_t)id.uni + 1)),
			    "/srv/\xc3\xbc.py");

	json_t *threads = json_object_get(d, "threads");
	assert_int_equal(json_array_size(threads), 2);
	json_t *ta = json_array_get(threads, 0), *tb = json_array_get(threads, 1);
	assert_int_equal(jint(ta, 0), 100);
	assert_int_equal(jint(ta, 1), 100);
	assert_string_equal(jstr(strings, json_array_get(ta, 2)), "MainThread");
	assert_string_equal(jstr(strings, json_array_get(ta, 3)), "python3");
	assert_int_equal(jint(tb, 1), 101);
	assert_string_equal(jstr(strings, json_array_get(tb, 2)), "worker \"<b>\"");

	/* Stacks as [thread, count, frames...], root first; the two adds of
	 * one stack are one entry, the zero-count stack is left out. */
	json_t *stacks = json_object_get(d, "stacks");
	assert_int_equal(json_array_size(stacks), 5);
	json_int_t per_thread[2] = {0, 0};
	bool seen_odd = false, seen_frameless = false;
	for (size_t i = 0; i < json_array_size(stacks); i++) {
		json_t *s = json_array_get(stacks, i);
		json_int_t t = jint(s, 0), count = jint(s, 1);
		assert_true(t == 0 || t == 1);
		per_thread[t] += count;
		if (json_array_size(s) == 7) {
			assert_int_equal(t, 0);
			assert_int_equal(count, 2);
			assert_int_equal(jint(s, 2), id.trunc);
			assert_int_equal(jint(s, 6), id.anon_kernel);
			seen_odd = true;
		}
		if (json_array_size(s) == 2) {
			assert_int_equal(t, 1);
			assert_int_equal(count, 1);
			seen_frameless = true;
		}
		if (json_array_size(s) == 5 && jint(s, 4) == id.run)
			assert_int_equal(count, t == 0 ? 4 : 3);
	}
	assert_true(seen_odd && seen_frameless);
	assert_int_equal(per_thread[0], 7);
	assert_int_equal(per_thread[1], 4);

	json_decref(d);
	free(raw);
	free(html);
	profile_free(p);
}

static void test_html_empty(void **state)
{
	(void)state;
	struct profile *p = profile_new();
	assert_non_null(p);
	char *html = encode(output_write_html, p, NULL);
	char *raw;
	json_t *d = page_data(html, &raw);
	assert_int_equal(json_integer_value(json_object_get(d, "total")), 0);
	assert_int_equal(json_array_size(json_object_get(d, "strings")), 1);
	assert_int_equal(json_array_size(json_object_get(d, "stacks")), 0);
	assert_int_equal(json_array_size(json_object_get(d, "threads")), 0);
	json_decref(d);
	free(raw);
	free(html);
	profile_free(p);
}

static json_t *speedscope_of(const struct profile *p)
{
	char *text = encode(output_write_speedscope, p, NULL);
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);
	if (!j)
		fail_msg("speedscope output is not JSON: %s at %d", jerr.text, jerr.position);
	free(text);
	return j;
}

static const char *sget(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	assert_true(json_is_string(v));
	return json_string_value(v);
}

static json_int_t iget(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	assert_true(json_is_integer(v));
	return json_integer_value(v);
}

/* The weights of profile prof whose stacks end in leaf, summed. */
static json_int_t weight_of_leaf(json_t *prof, json_int_t leaf)
{
	json_t *samples = json_object_get(prof, "samples");
	json_t *weights = json_object_get(prof, "weights");
	json_int_t sum = 0;
	for (size_t i = 0; i < json_array_size(samples); i++) {
		json_t *s = json_array_get(samples, i);
		if (jint(s, json_array_size(s) - 1) == leaf)
			sum += jint(weights, i);
	}
	return sum;
}

static void test_speedscope(void **state)
{
	(void)state;
	struct ids id;
	struct profile *p = build_profile(&id, true);
	json_t *j = speedscope_of(p);
	uint32_t nframes = profile_frame_count(p);

	assert_string_equal(sget(j, "$schema"),
			    "https://www.speedscope.app/file-format-schema.json");
	assert_string_equal(sget(j, "exporter"), "taipan");
	/* Thread a has the most samples. */
	assert_int_equal(iget(j, "activeProfileIndex"), 0);

	json_t *frames = json_object_get(json_object_get(j, "shared"), "frames");
	/* The profile's frames, then "[unknown]" for the frameless sample. */
	assert_int_equal(json_array_size(frames), nframes + 1);
	json_t *run = json_array_get(frames, id.run);
	assert_string_equal(sget(run, "name"), "Worker.run");
	assert_string_equal(sget(run, "file"), "/srv/lib/work.py");
	assert_int_equal(iget(run, "line"), 42);
	assert_string_equal(sget(json_array_get(frames, id.script), "name"), NAME_SCRIPT);
	assert_string_equal(sget(json_array_get(frames, id.uni), "name"), NAME_UNICODE);
	assert_string_equal(sget(json_array_get(frames, id.bad), "name"), NAME_REPAIRED);
	/* Line 0 is "unknown": left out. */
	assert_null(json_object_get(json_array_get(frames, id.bad), "line"));
	json_t *k = json_array_get(frames, id.kernel);
	assert_string_equal(sget(k, "name"), "do_syscall_64");
	assert_string_equal(sget(k, "file"), "[kernel.kallsyms]");
	assert_null(json_object_get(k, "line"));
	assert_string_equal(sget(json_array_get(frames, id.anon_kernel), "name"),
			    "0xffffffff8123abcd");
	assert_string_equal(sget(json_array_get(frames, nframes), "name"), "[unknown]");

	/* One sampled profile per thread, weights in nanoseconds. */
	json_t *profiles = json_object_get(j, "profiles");
	assert_int_equal(json_array_size(profiles), 2);
	json_t *a = json_array_get(profiles, 0), *b = json_array_get(profiles, 1);
	assert_string_equal(sget(a, "type"), "sampled");
	assert_string_equal(sget(a, "unit"), "nanoseconds");
	assert_string_equal(sget(a, "name"), "MainThread (tid 100), python3 (pid 100)");
	assert_string_equal(sget(b, "name"), "worker \"<b>\" (tid 101), python3 (pid 100)");
	assert_int_equal(iget(a, "startValue"), 0);
	assert_int_equal(iget(a, "endValue"), 7 * PERIOD_NS);
	assert_int_equal(iget(b, "endValue"), 4 * PERIOD_NS);
	assert_int_equal(json_array_size(json_object_get(a, "samples")),
			 json_array_size(json_object_get(a, "weights")));
	assert_int_equal(json_array_size(json_object_get(a, "samples")), 3);
	assert_int_equal(json_array_size(json_object_get(b, "samples")), 2);
	assert_int_equal(weight_of_leaf(a, id.run), 4 * PERIOD_NS);
	assert_int_equal(weight_of_leaf(a, id.script), 1 * PERIOD_NS);
	assert_int_equal(weight_of_leaf(a, id.anon_kernel), 2 * PERIOD_NS);
	assert_int_equal(weight_of_leaf(b, id.run), 3 * PERIOD_NS);
	assert_int_equal(weight_of_leaf(b, nframes), 1 * PERIOD_NS);

	/* Root first. */
	json_t *samples = json_object_get(a, "samples");
	for (size_t i = 0; i < json_array_size(samples); i++) {
		json_t *s = json_array_get(samples, i);
		if (json_array_size(s) == 5) {
			assert_int_equal(jint(s, 0), id.trunc);
			assert_int_equal(jint(s, 1), id.uni);
			assert_int_equal(jint(s, 4), id.anon_kernel);
		} else {
			assert_int_equal(json_array_size(s), 3);
			assert_int_equal(jint(s, 0), id.mod);
			assert_int_equal(jint(s, 1), id.main);
		}
	}
	json_decref(j);
	profile_free(p);

	/* Without a period the weights are sample counts. */
	p = build_profile(&id, false);
	j = speedscope_of(p);
	profiles = json_object_get(j, "profiles");
	a = json_array_get(profiles, 0);
	assert_string_equal(sget(a, "unit"), "none");
	assert_int_equal(iget(a, "endValue"), 7);
	assert_int_equal(weight_of_leaf(a, id.run), 4);
	json_decref(j);
	profile_free(p);

	/* Nothing sampled: a valid file with no profiles. */
	p = profile_new();
	assert_non_null(p);
	j = speedscope_of(p);
	assert_int_equal(json_array_size(json_object_get(j, "profiles")), 0);
	assert_int_equal(json_array_size(json_object_get(json_object_get(j, "shared"), "frames")),
			 0);
	assert_null(json_object_get(j, "activeProfileIndex"));
	json_decref(j);
	profile_free(p);
}

/* Native frames: Python -> the re engine (named) -> an address of libz
 * that no symbol named -> the kernel. */
static struct profile *build_native(uint32_t *py, uint32_t *named, uint32_t *unnamed, uint32_t *k)
{
	struct profile *p = profile_new();
	assert_non_null(p);
	profile_set_timing(p, PERIOD_NS, START_NS, DURATION_NS);
	*py = pb_py(p, "regex", "/srv/app.py", 9, 8);
	*named = pb_frame(p, (struct prof_frame){.name = "sre_ucs1_match",
						 .module = "/usr/lib/libpython3.12.so.1.0",
						 .build_id = "f9d5c82f",
						 .addr = 0x34fc94,
						 .kind = PROF_FRAME_NATIVE});
	*unnamed = pb_frame(p, (struct prof_frame){.name = "libz.so.1+0x10764",
						   .module = "/usr/lib/libz.so.1",
						   .addr = 0x10764,
						   .kind = PROF_FRAME_NATIVE});
	*k = pb_frame(p, (struct prof_frame){.name = "asm_exc_page_fault",
					     .module = "[kernel.kallsyms]",
					     .addr = 0xffffffff81000010ull,
					     .kind = PROF_FRAME_KERNEL});
	pb_add(p, &thread_a, 3, 4, *py, *named, *unnamed, *k);
	return p;
}

/* Native frames reach the page with their kind and their module as their
 * file; the page has a legend of the kinds' colours; speedscope gets the
 * function as the name and the module as the file. */
static void test_native_frames(void **state)
{
	(void)state;
	uint32_t py, named, unnamed, k;
	struct profile *p = build_native(&py, &named, &unnamed, &k);

	char *html = encode(output_write_html, p, NULL);
	assert_non_null(strstr(html, "id=\"legend\""));
	assert_non_null(strstr(html, "KIND_SWATCH"));
	char *raw;
	json_t *d = page_data(html, &raw);
	json_t *strings = json_object_get(d, "strings");
	json_t *frames = json_object_get(d, "frames");
	size_t n = 4 * (size_t)named, u = 4 * (size_t)unnamed;
	assert_string_equal(frame_name(d, named), "sre_ucs1_match");
	assert_string_equal(jstr(strings, json_array_get(frames, n + 1)),
			    "/usr/lib/libpython3.12.so.1.0");
	assert_int_equal(jint(frames, n + 2), 0);
	assert_int_equal(jint(frames, n + 3), PROF_FRAME_NATIVE);
	assert_string_equal(frame_name(d, unnamed), "libz.so.1+0x10764");
	assert_string_equal(jstr(strings, json_array_get(frames, u + 1)), "/usr/lib/libz.so.1");
	assert_int_equal(jint(frames, u + 3), PROF_FRAME_NATIVE);
	assert_int_equal(jint(frames, 4 * (size_t)k + 3), PROF_FRAME_KERNEL);
	assert_int_equal(jint(frames, 4 * (size_t)py + 3), PROF_FRAME_INTERP);
	json_decref(d);
	free(raw);
	free(html);

	json_t *j = speedscope_of(p);
	json_t *sf = json_object_get(json_object_get(j, "shared"), "frames");
	json_t *f = json_array_get(sf, named);
	assert_string_equal(sget(f, "name"), "sre_ucs1_match");
	assert_string_equal(sget(f, "file"), "/usr/lib/libpython3.12.so.1.0");
	assert_null(json_object_get(f, "line"));
	f = json_array_get(sf, unnamed);
	assert_string_equal(sget(f, "name"), "libz.so.1+0x10764");
	assert_string_equal(sget(f, "file"), "/usr/lib/libz.so.1");
	f = json_array_get(sf, py);
	assert_string_equal(sget(f, "file"), "/srv/app.py");
	assert_int_equal(iget(f, "line"), 9);
	json_decref(j);
	profile_free(p);
}

static void test_format_selection(void **state)
{
	(void)state;
	assert_ptr_equal(output_format_from_path("x.html"), FMT("html"));
	assert_ptr_equal(output_format_from_path("dir/x.HTM"), FMT("html"));
	assert_ptr_equal(output_format_from_path("x.json"), FMT("speedscope"));
	assert_ptr_equal(output_format_from_path("dir/.json"), NULL);
	assert_ptr_equal(output_format_from_path("x.html.gz"), NULL);
	assert_ptr_equal(output_format_from_name("json"), NULL);
	assert_string_equal(FMT("html")->name, "html");
	assert_string_equal(FMT("speedscope")->name, "speedscope");
}

/* output_write_file dispatches both formats. */
static void test_write_file(void **state)
{
	(void)state;
	char dir[] = "/tmp/taipan-test-html-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct ids id;
	struct profile *p = build_profile(&id, true);
	const char *names[] = {"p.html", "p.json"};
	const char *starts[] = {"<!DOCTYPE html>", "{\"$schema\":"};
	const struct output_format_desc *fmts[] = {FMT("html"), FMT("speedscope")};
	for (int i = 0; i < 2; i++) {
		char path[256], buf[32] = {0};
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		assert_int_equal(output_write_file(p, path, fmts[i], NULL), 0);
		FILE *f = fopen(path, "r");
		assert_non_null(f);
		assert_true(fread(buf, 1, sizeof(buf) - 1, f) > 0);
		fclose(f);
		assert_int_equal(strncmp(buf, starts[i], strlen(starts[i])), 0);
		assert_int_equal(unlink(path), 0);
	}
	assert_int_equal(rmdir(dir), 0);
	profile_free(p);
}

static void test_alloc_failures(void **state)
{
	(void)state;
#ifndef INJECT_ALLOC_FAILURES
	print_message("skipping: allocation failures cannot be injected under ASan\n");
	skip();
#else
	const output_write_fn encoders[] = {output_write_html, output_write_speedscope};
	struct ids id;
	struct profile *p = build_profile(&id, true);

	for (int which = 0; which < 2; which++) {
		size_t want_len;
		char *want = encode(encoders[which], p, &want_len);
		long n;
		for (n = 0; n < 100000; n++) {
			/* Unbuffered, so stdio allocates nothing of its own. */
			FILE *f = tmpfile();
			assert_non_null(f);
			setvbuf(f, NULL, _IONBF, 0);
			alloc_failed = 0;
			alloc_live = 0;
			alloc_countdown = n;
			alloc_counting = true;
			int rc = encoders[which](p, f, NULL);
			alloc_counting = false;
			alloc_countdown = -1;
			if (which == 0 && n == 0 && !alloc_failed) {
				print_message("skipping: malloc is not ours to replace here\n");
				fclose(f);
				free(want);
				profile_free(p);
				skip();
			}
			if (alloc_live != 0)
				print_error(
				    "encoder %d, allocation %ld failed: %ld blocks leaked\n", which,
				    n, alloc_live);
			assert_int_equal(alloc_live, 0);
			assert_true(rc == 0 || rc == -ENOMEM);
			if (rc == 0) {
				/* A failure it recovered from changes nothing. */
				long len = ftell(f);
				assert_int_equal((size_t)len, want_len);
				char *got = malloc(want_len + 1);
				assert_non_null(got);
				rewind(f);
				assert_int_equal(fread(got, 1, want_len, f), want_len);
				assert_memory_equal(got, want, want_len);
				free(got);
			}
			fclose(f);
			if (!alloc_failed)
				break;
		}
		assert_true(n >= 2);
		free(want);
	}
	profile_free(p);
#endif
}

/* --- the synthetic profile for the browser test -------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64*: deterministic, so every run writes the same page. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

#define BIG_FUNCS 4000
#define BIG_LINES 3
#define BIG_THREADS 4

/* n distinct stacks shaped like a real program's: a call graph where each
 * function calls a few others, walked from a handful of entry points, 4 to
 * 40 deep, over 4 threads. Returns 0 or a negative errno. */
static int write_big(const char *path, size_t n)
{
	struct profile *p = profile_new();
	uint32_t *ids = calloc(BIG_FUNCS * BIG_LINES, sizeof(*ids));
	if (!p || !ids) {
		profile_free(p);
		free(ids);
		return -ENOMEM;
	}
	profile_set_timing(p, 1000000, 1700000000000000000ull, 60000000000ull);
	for (int f = 0; f < BIG_FUNCS; f++) {
		char name[64], file[64];
		snprintf(name, sizeof(name), "module%d.Class%d.method_%d", f % 97, f % 13, f);
		snprintf(file, sizeof(file), "/srv/app/pkg%d/module%d.py", f % 11, f % 97);
		for (int l = 0; l < BIG_LINES; l++) {
			struct prof_frame fr = {.name = name,
						.file = file,
						.line = 10 + f % 300 + 7 * l,
						.first_line = 10 + f % 300};
			int id = profile_intern_frame(p, &fr);
			if (id < 0) {
				free(ids);
				profile_free(p);
				return id;
			}
			ids[f * BIG_LINES + l] = (uint32_t)id;
		}
	}
	struct prof_labels labels[BIG_THREADS];
	char tnames[BIG_THREADS][32];
	for (int t = 0; t < BIG_THREADS; t++) {
		snprintf(tnames[t], sizeof(tnames[t]), t ? "worker-%d" : "MainThread", t);
		labels[t] = (struct prof_labels){.pid = 4242,
						 .tid = 4242 + (uint32_t)t,
						 .thread_name = tnames[t],
						 .comm = "python3",
						 .runtime = "python",
						 .runtime_version = "3.12.1",
						 .version_alias = "python_version",
						 .lock_name = "gil"};
	}
	uint32_t stack[40];
	int err = 0;
	for (size_t tries = 0; profile_sample_count(p) < n && tries < 50 * n; tries++) {
		uint32_t depth = 4 + (uint32_t)(rnd() % 37);
		uint64_t f = rnd() % 8; /* entry points */
		for (uint32_t d = 0; d < depth; d++) {
			stack[d] = ids[f * BIG_LINES + rnd() % BIG_LINES];
			/* Each function calls one of 6 others. */
			f = (f * 2654435761u + 1 + rnd() % 6 * 7919) % BIG_FUNCS;
		}
		err = profile_add(p, stack, depth, &labels[rnd() % BIG_THREADS], 1 + rnd() % 20);
		if (err)
			break;
	}
	free(ids);
	if (!err)
		err = output_write_file(p, path, FMT("html"), NULL);
	if (!err)
		printf("%zu distinct stacks, %" PRIu64 " samples, %" PRIu32 " frames\n",
		       profile_sample_count(p), profile_total(p), profile_frame_count(p));
	profile_free(p);
	return err;
}

/* Checks every string in j, however deep, with pb_assert_no_raw_controls;
 * returns how many of them equal want. */
static int walk_strings(json_t *j, const char *want)
{
	int n = 0;
	size_t i;
	const char *key;
	json_t *v;
	if (json_is_string(j)) {
		pb_assert_no_raw_controls(json_string_value(j), json_string_length(j), false);
		return strcmp(json_string_value(j), want) == 0;
	}
	if (json_is_array(j))
		json_array_foreach(j, i, v) n += walk_strings(v, want);
	if (json_is_object(j))
		json_object_foreach(j, key, v) n += walk_strings(v, want);
	return n;
}

/* The flame graph's names and speedscope's strings carry every hostile name
 * escaped as folded stacks and pprof do: a page and speedscope draw them,
 * jq -r prints them. */
static void test_hostile_names_escaped(void **state)
{
	(void)state;
	struct profile *p = pb_evil_profile();
	char *raw, *html = encode(output_write_html, p, NULL);
	json_t *data = page_data(html, &raw);
	json_t *strings = json_object_get(data, "strings");
	const char *want[] = {EVIL_FN_ESC, EVIL_FILE_ESC, EVIL_MODULE_ESC, EVIL_THREAD_ESC,
			      EVIL_COMM_ESC};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (walk_strings(strings, want[i]) != 1)
			fail_msg("the page's strings have no %s once", want[i]);
	json_decref(data);
	free(raw);
	free(html);

	json_t *j = speedscope_of(p);
	assert_int_equal(
	    walk_strings(json_object_get(json_object_get(j, "shared"), "frames"), EVIL_FN_ESC), 2);
	assert_int_equal(walk_strings(j, EVIL_FILE_ESC), 1);
	assert_int_equal(walk_strings(j, EVIL_MODULE_ESC), 1);
	json_t *prof = json_array_get(json_object_get(j, "profiles"), 0);
	assert_string_equal(sget(prof, "name"),
			    EVIL_THREAD_ESC " (tid 8), " EVIL_COMM_ESC " (pid 7)");
	json_decref(j);
	profile_free(p);
}

/* The test profile above, hostile names and all, as a page. */
static int write_names(const char *path)
{
	struct ids id;
	struct profile *p = build_profile(&id, true);
	int err = output_write_file(p, path, FMT("html"), NULL);
	profile_free(p);
	return err;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-names") == 0) {
		int err = write_names(argv[2]);
		if (err)
			fprintf(stderr, "%s: %s\n", argv[2], strerror(-err));
		return err ? 1 : 0;
	}
	if (argc >= 3 && strcmp(argv[1], "--write-big") == 0) {
		size_t n = argc >= 4 ? strtoul(argv[3], NULL, 10) : 100000;
		int err = write_big(argv[2], n);
		if (err)
			fprintf(stderr, "%s: %s\n", argv[2], strerror(-err));
		return err ? 1 : 0;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_html_page),	     cmocka_unit_test(test_html_empty),
	    cmocka_unit_test(test_speedscope),	     cmocka_unit_test(test_native_frames),
	    cmocka_unit_test(test_format_selection), cmocka_unit_test(test_write_file),
	    cmocka_unit_test(test_alloc_failures),   cmocka_unit_test(test_hostile_names_escaped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
