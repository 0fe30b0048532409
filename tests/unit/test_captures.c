/* test_captures.c - the shared walker (src/cpython/walk.h, built for user
 * space) and the symbolizer over memory captured from real interpreters,
 * against the stacks those interpreters reported themselves.
 *
 * tools/capture.c wrote each $TAIPAN_FIXTURES/capture-*.cap from a live
 * process of tests/fixtures/capture_workload.py (tests/fixtures/
 * gen_fixtures.sh runs it under every interpreter found). Here nothing runs
 * and nothing needs privileges: every read is served from the image, so a
 * failure can be stepped through in gdb. Each reported thread is walked two
 * ways, and both must give Python's own frames, files and lines exactly:
 *   - as the BPF program samples it (pywalk_sample: the thread state found
 *     from the thread's pthread_self(), then its frames);
 *   - as `taipan dump` lists it (pywalk_read: every thread of every
 *     interpreter).
 */
#include <errno.h>
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cpython/capture.h"
#include "cpython/pywalk.h"
#include "cpython/symbolize.h"

/* Compares the walked frames with the reported ones; prints every
 * difference and returns how many there were. */
static int compare(const char *path, const char *how, struct symbolizer *sz,
		   const struct capture_thread *want, const struct tp_frame *got, size_t ngot,
		   unsigned int err)
{
	int bad = 0;
	if (err) {
		print_error("%s: thread 0x%llx (%s): walk error %u\n", path,
			    (unsigned long long)want->thread_id, how, err);
		bad++;
	}
	if (ngot != want->nframes) {
		print_error("%s: thread 0x%llx (%s): %zu frames, Python reported %zu\n", path,
			    (unsigned long long)want->thread_id, how, ngot, want->nframes);
		bad++;
	}
	for (size_t i = 0; i < ngot && i < want->nframes; i++) {
		const struct capture_frame *w = &want->frames[i];
		struct prof_frame f;
		if (symbolizer_frame(sz, &got[i], &f)) {
			print_error("%s: thread 0x%llx (%s): frame %zu unreadable, want %s\n", path,
				    (unsigned long long)want->thread_id, how, i, w->name);
			bad++;
			continue;
		}
		if (strcmp(f.name, w->name) || strcmp(f.file ? f.file : "", w->file) ||
		    f.line != w->line) {
			print_error("%s: thread 0x%llx (%s): frame %zu is %s (%s:%d), want %s "
				    "(%s:%d)\n",
				    path, (unsigned long long)want->thread_id, how, i, f.name,
				    f.file ? f.file : "-", f.line, w->name, w->file, w->line);
			bad++;
		}
	}
	return bad;
}

/* Walks every reported thread of one capture both ways; returns the
 * number of differences. */
static int check_capture(const char *path, size_t *nthreads, size_t *nframes)
{
	struct capture c;
	struct pywalk w;
	char err[512];
	int bad = 0;

	if (capture_load(&c, path, err, sizeof(err)))
		fail_msg("%s", err);
	if (!c.nthreads)
		fail_msg("%s: no threads reported", path);
	struct symbolizer *sz = symbolizer_new(&c.pp);
	struct tp_sample *s = malloc(sizeof(*s));
	assert_non_null(sz);
	assert_non_null(s);
	assert_int_equal(pywalk_read(&c.pp, &w), 0);
	if (w.err)
		print_error("%s: thread list error %d\n", path, w.err), bad++;
	for (size_t i = 0; i < c.nthreads; i++) {
		const struct capture_thread *t = &c.threads[i];
		/* As BPF samples it: tid 1 of pid 1, whose fs base is thread_id. */
		assert_int_equal(pywalk_sample(&c.pp, (1ULL << 32) | 1, t->thread_id, s, NULL), 0);
		bad += compare(path, "sampled", sz, t, s->frames, s->nframes, s->err);
		/* As dump lists it. */
		const struct pywalk_thread *listed = NULL;
		for (size_t k = 0; k < w.nthreads && !listed; k++)
			if (w.threads[k].thread_id == t->thread_id)
				listed = &w.threads[k];
		if (!listed) {
			print_error("%s: thread 0x%llx is not in the thread list\n", path,
				    (unsigned long long)t->thread_id);
			bad++;
		} else {
			bad += compare(path, "listed", sz, t, listed->frames, listed->nframes,
				       (unsigned int)listed->err);
		}
		*nframes += t->nframes;
	}
	*nthreads += c.nthreads;
	pywalk_free(&w);
	free(s);
	symbolizer_free(sz);
	capture_free(&c);
	return bad;
}

/* Every capture of every interpreter. A run that finds none fails: a test
 * that checks nothing must not pass. */
static void test_captured_interpreters(void **state)
{
	const char *dir = getenv("TAIPAN_FIXTURES");
	size_t nthreads = 0, nframes = 0;
	char *pattern;
	glob_t g;
	int bad = 0;

	(void)state;
	if (!dir || !*dir)
		fail_msg("TAIPAN_FIXTURES is not set; run through 'make unit', which "
			 "captures the interpreters and sets it");
	if (asprintf(&pattern, "%s/capture-*.cap", dir) < 0)
		fail_msg("out of memory");
	int rc = glob(pattern, 0, NULL, &g);
	free(pattern);
	if (rc == GLOB_NOMATCH)
		fail_msg("%s: no capture-*.cap fixture; generate them with "
			 "tests/fixtures/gen_fixtures.sh",
			 dir);
	assert_int_equal(rc, 0);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		int b = check_capture(g.gl_pathv[i], &nthreads, &nframes);
		print_message("%s: %s\n", strrchr(g.gl_pathv[i], '/') + 1,
			      b ? "DIFFERS" : "every frame as Python reported it");
		bad += b;
	}
	print_message("%zu captures, %zu threads, %zu frames, %d differences\n", g.gl_pathc,
		      nthreads, nframes, bad);
	globfree(&g);
	assert_int_equal(bad, 0);
}

/* A capture reads back what was kept and nothing else, and a damaged file
 * is refused with a message, never half-loaded. */
static void test_capture_file_round_trip(void **state)
{
	(void)state;
	char path[] = "/tmp/taipan-test-capture-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	unlink(path);

	/* Record from this process: three reads, two of them touching. */
	static const char text[] = "0123456789abcdefghijklmnopqrstuvwxyz";
	uint64_t base = (uint64_t)(uintptr_t)text;
	struct pyproc pp = {.pid = getpid(), .major = 3, .minor = 12};
	snprintf(pp.version, sizeof(pp.version), "3.12.1");
	assert_non_null(py_layout_find(3, 12));
	pp.layout = py_layout_find(3, 12)->layout;
	struct capture c;
	char buf[16];
	capture_record(&c, &pp);
	assert_int_equal(pyproc_read(&c.pp, base, buf, 4), 0);
	assert_int_equal(pyproc_read(&c.pp, base + 4, buf, 4), 0);
	assert_int_equal(pyproc_read(&c.pp, base + 20, buf, 6), 0);
	assert_int_equal(c.nregions, 2); /* [0,8) merged, [20,26) apart */
	assert_int_equal(capture_add_thread(&c, 0x1234), 0);
	assert_int_equal(capture_add_frame(&c, 7, "/a b/c.py", "Outer.method"), 0);
	assert_int_equal(capture_write(&c, path), 0);
	capture_free(&c);

	/* Loaded: the kept bytes and only those, and the reported stack. */
	char err[512];
	assert_int_equal(capture_load(&c, path, err, sizeof(err)), 0);
	assert_int_equal(c.pp.read(c.pp.read_ctx, base + 2, buf, 6), 0);
	assert_memory_equal(buf, "234567", 6);
	assert_int_equal(c.pp.read(c.pp.read_ctx, base + 6, buf, 4), -EFAULT);
	assert_int_equal(c.pp.read(c.pp.read_ctx, base + 20, buf, 6), 0);
	assert_memory_equal(buf, "klmnop", 6);
	assert_true(c.pp.tp.off.flags & TP_LF_INTERP_FRAME);
	assert_int_equal(c.nthreads, 1);
	assert_int_equal(c.threads[0].thread_id, 0x1234);
	assert_int_equal(c.threads[0].nframes, 1);
	assert_string_equal(c.threads[0].frames[0].file, "/a b/c.py");
	assert_string_equal(c.threads[0].frames[0].name, "Outer.method");
	assert_int_equal(c.threads[0].frames[0].line, 7);
	capture_free(&c);

	/* A damaged file: cut in the middle of its image. */
	FILE *f = fopen(path, "r+");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	assert_int_equal(ftruncate(fileno(f), ftell(f) - 8), 0);
	fclose(f);
	assert_int_not_equal(capture_load(&c, path, err, sizeof(err)), 0);
	assert_non_null(strstr(err, path));
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_capture_file_round_trip),
	    cmocka_unit_test(test_captured_interpreters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
