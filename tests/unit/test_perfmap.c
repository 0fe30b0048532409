/* test_perfmap.c - unit tests for perf maps (proc/perfmap.c): the lines of
 * perf's convention and bcc's "0x" variant, bad and partial lines, names
 * cut at their bound, the later of two entries at one address winning, and
 * a real file of this process's: read at the first miss, what was appended
 * read at a later one (paced), a file another user owns refused. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc/perfmap.h"
#include "util/budget.h"

static size_t parse(struct perfmap *pm, const char *text)
{
	return perfmap_parse(pm, text, strlen(text));
}

static void test_lines(void **state)
{
	(void)state;
	struct perfmap *pm = perfmap_new(getpid(), NULL);
	struct perfmap_stats st;
	assert_non_null(pm);
	const char *text = "7f0000001000 b py::f:/a.py\n"
			   "0x7f0000002000 0x20 LazyCompile:*g /b.js:10\r\n"
			   "\n"
			   "zz 10 bad\n"
			   "7f0000003000 0 empty\n"
			   "7f0000003000 10\n"
			   "ffffffffffffff00 1000 wraps\n"
			   "11112222333344445 10 too long a number\n"
			   "7f0000004000 10 partial";
	size_t used = parse(pm, text);
	assert_int_equal(used, strlen(text) - strlen("7f0000004000 10 partial"));
	/* This process has no perf map file: a miss reads nothing more. */
	const uint64_t later = 1;
	assert_string_equal(perfmap_find(pm, 0x7f0000001000, later), "py::f:/a.py");
	assert_string_equal(perfmap_find(pm, 0x7f000000100a, later), "py::f:/a.py");
	assert_null(perfmap_find(pm, 0x7f000000100b, later));
	assert_string_equal(perfmap_find(pm, 0x7f000000201f, later), "LazyCompile:*g /b.js:10");
	assert_null(perfmap_find(pm, 0x7f0000000fff, later));
	assert_null(perfmap_find(pm, 0x7f0000004000, later));
	perfmap_get_stats(pm, &st);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.bad, 5);
	perfmap_free(pm);
}

/* Out of order, overlapping, and a name past the bound. */
static void test_order_and_bounds(void **state)
{
	(void)state;
	struct perfmap *pm = perfmap_new(getpid(), NULL);
	char line[1024];
	assert_non_null(pm);
	parse(pm, "5000 100 later\n1000 100 first\n5000 100 replaced\n");
	assert_string_equal(perfmap_find(pm, 0x1050, 1), "first");
	assert_string_equal(perfmap_find(pm, 0x5050, 1), "replaced");
	memset(line, 'x', sizeof(line));
	memcpy(line, "9000 10 ", 8);
	line[sizeof(line) - 1] = '\n';
	perfmap_parse(pm, line, sizeof(line));
	const char *name = perfmap_find(pm, 0x9000, 1);
	assert_non_null(name);
	assert_int_equal(strlen(name), PERFMAP_NAME_MAX);
	perfmap_free(pm);
}

/* The memory comes from the budget: what does not fit is not kept. */
static void test_budget(void **state)
{
	(void)state;
	struct budget b = {.limit = 4096};
	struct perfmap *pm = perfmap_new(getpid(), &b);
	struct perfmap_stats st;
	char line[64];
	assert_non_null(pm);
	for (int i = 0; i < 1000; i++) {
		snprintf(line, sizeof(line), "%x 10 function_number_%d\n", 0x10000 + i * 0x10, i);
		parse(pm, line);
	}
	perfmap_get_stats(pm, &st);
	assert_true(st.entries > 0 && st.entries < 1000);
	assert_true(b.used <= b.limit && b.used > 0);
	assert_true(b.refused > 0);
	perfmap_free(pm);
	assert_int_equal(b.used, 0);
}

/* This process's own /tmp/perf-PID.map, as a JIT writes it. */
static void test_file(void **state)
{
	(void)state;
	char path[64];
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "1000 100 one\n2000 1", 19), 19);
	struct perfmap *pm = perfmap_new(getpid(), NULL);
	assert_non_null(pm);
	assert_string_equal(perfmap_find(pm, 0x1080, 1000), "one");
	/* The JIT finishes the line and adds one: a miss within the pace
	 * reads nothing, one after it reads what was appended. */
	assert_int_equal(write(fd, "00 two\n3000 100 three\n", 22), 22);
	assert_null(perfmap_find(pm, 0x3000, 1000 + PERFMAP_RELOAD_NS - 1));
	assert_string_equal(perfmap_find(pm, 0x3000, 1000 + PERFMAP_RELOAD_NS), "three");
	assert_string_equal(perfmap_find(pm, 0x2050, 1000 + PERFMAP_RELOAD_NS), "two");
	struct perfmap_stats st;
	perfmap_get_stats(pm, &st);
	assert_int_equal(st.reads, 2);
	assert_int_equal(st.entries, 3);
	perfmap_free(pm);
	/* One that another user owns names nothing (as root only: others
	 * cannot give a file away). */
	if (geteuid() == 0) {
		assert_int_equal(fchown(fd, 65534, 65534), 0);
		pm = perfmap_new(getpid(), NULL);
		assert_null(perfmap_find(pm, 0x1080, 1000));
		perfmap_free(pm);
	}
	close(fd);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lines),
	    cmocka_unit_test(test_order_and_bounds),
	    cmocka_unit_test(test_budget),
	    cmocka_unit_test(test_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
