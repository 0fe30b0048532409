/* test_bpfrun.c - unit tests for the BPF loader's failure paths. They load
 * the real BPF object, so they need root (or CAP_BPF and CAP_PERFMON) and
 * skip without it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/bpfrun.h"

static int no_events(void *ctx, void *data, size_t size)
{
	(void)ctx;
	(void)data;
	(void)size;
	return 0;
}

/* A start that fails on the first CPU leaves the descriptors of the other
 * CPUs unopened: freeing must not close fd 0 in their name. */
static void test_failed_start_keeps_fd0(void **state)
{
	/* Above perf_event_max_sample_rate: perf_event_open refuses it on
	 * the first CPU with EINVAL. */
	struct sampler_opts o = {.rate_hz = UINT_MAX};
	struct bpfrun *br = NULL;
	struct stat before, after;
	char err[256];
	(void)state;

	if (fcntl(STDIN_FILENO, F_GETFD) < 0)
		assert_int_equal(open("/dev/null", O_RDONLY), STDIN_FILENO);
	assert_int_equal(fstat(STDIN_FILENO, &before), 0);
	if (bpfrun_open(&o, no_events, NULL, &br, err, sizeof(err))) {
		print_message("skipped: %s\n", err);
		skip();
	}
	if (bpfrun_ncpus(br) < 2) {
		bpfrun_free(br);
		print_message("skipped: one CPU, so no CPU is left unreached\n");
		skip();
	}
	assert_true(bpfrun_start(br, err, sizeof(err)) < 0);
	bpfrun_free(br);
	assert_int_equal(fstat(STDIN_FILENO, &after), 0);
	assert_int_equal(before.st_dev, after.st_dev);
	assert_int_equal(before.st_ino, after.st_ino);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_failed_start_keeps_fd0),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
