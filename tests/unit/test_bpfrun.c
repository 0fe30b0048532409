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
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/bpfrun.h"
#include "profile/ksyms.h"

static int no_events(void *ctx, void *data, size_t size)
{
	(void)ctx;
	(void)data;
	(void)size;
	return 0;
}

/* A start that fails on the first CPU leaves the descriptors of the other
 * CPUs unopened: freeing must not close fd 0 in their name. */
/* The ring holds a quarter of a second of every CPU's samples, within its
 * bounds, and BPF takes its size (a power of two). */
static void test_ring_sized_by_cpus_and_rate(void **state)
{
	(void)state;
	assert_int_equal(bpfrun_ring_bytes(2, 99, true, false), TP_RING_BYTES);
	assert_int_equal(bpfrun_ring_bytes(2, 10000, true, false), TP_RING_BYTES);
	/* 16 CPUs at 10 kHz: 160,000 samples a second, 61 MB a quarter of it. */
	assert_int_equal(bpfrun_ring_bytes(16, 10000, true, false), 64u << 20);
	assert_int_equal(bpfrun_ring_bytes(16, 10000, false, false), 32u << 20);
	assert_int_equal(bpfrun_ring_bytes(16, 10000, true, true), 128u << 20);
	assert_int_equal(bpfrun_ring_bytes(16, 1000, true, false), TP_RING_BYTES);
	assert_int_equal(bpfrun_ring_bytes(1024, 100000, true, true), TP_RING_MAX_BYTES);
	for (unsigned int cpus = 1; cpus <= 512; cpus *= 3) {
		uint32_t b = bpfrun_ring_bytes(cpus, 4999, true, false);
		assert_true(b >= TP_RING_BYTES && b <= TP_RING_MAX_BYTES && !(b & (b - 1)));
	}
}

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

struct ksym_line {
	uint64_t addr;
	char name[TP_KSYM_LEN];
};

/* Every text symbol of /proc/kallsyms, in file order; NULL without root
 * (addresses all zero) or on a kernel too big for the test. */
static struct ksym_line *read_kallsyms(size_t *n)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	size_t cap = 1 << 19;
	struct ksym_line *v = f ? calloc(cap, sizeof(*v)) : NULL;
	char line[512], type, name[TP_KSYM_LEN];
	unsigned long long addr;
	*n = 0;
	while (v && *n < cap && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %127s", &addr, &type, name) != 3 || !addr ||
		    (type != 't' && type != 'T'))
			continue;
		v[*n].addr = addr;
		memcpy(v[*n].name, name, sizeof(name));
		(*n)++;
	}
	if (f)
		fclose(f);
	if (v && *n < 1000) {
		free(v);
		v = NULL;
	}
	return v;
}

/* The kernel's own names (ksym_names, "%ps") agree with /proc/kallsyms: for
 * addresses spread over the whole kernel, modules included, the name given
 * is the symbol kallsyms puts at the start of the function holding it (or
 * one of its aliases there). */
static void test_kernel_names_agree_with_kallsyms(void **state)
{
	struct sampler_opts o = {.rate_hz = 99, .kernel_stacks = true};
	struct bpfrun *br = NULL;
	char err[256];
	size_t n, named = 0, asked = 0;
	(void)state;

	struct ksym_line *all = read_kallsyms(&n);
	struct ksyms *ks = ksyms_load(NULL);
	if (!all || !ks) {
		free(all);
		ksyms_free(ks);
		print_message("skipped: /proc/kallsyms shows no addresses (not root?)\n");
		skip();
	}
	if (bpfrun_open(&o, no_events, NULL, &br, err, sizeof(err))) {
		free(all);
		ksyms_free(ks);
		print_message("skipped: %s\n", err);
		skip();
	}
	uint64_t addr[TP_KSYM_BATCH];
	static char name[TP_KSYM_BATCH][TP_KSYM_LEN];
	size_t step = n / (4 * TP_KSYM_BATCH) + 1;
	for (size_t i = 0; i < n; i += step * TP_KSYM_BATCH) {
		uint32_t m = 0;
		for (size_t j = i; j < n && m < TP_KSYM_BATCH; j += step, m++)
			addr[m] = all[j].addr + (m % 3); /* inside, not only at the start */
		int ret = bpfrun_kernel_names(br, addr, m, name);
		if (ret == -ENOTSUP) {
			print_message("skipped: this kernel cannot run ksym_names\n");
			break;
		}
		assert_int_equal(ret, 0);
		for (uint32_t k = 0; k < m; k++) {
			uint64_t off;
			const char *want = ksyms_lookup(ks, addr[k], &off);
			asked++;
			if (!strncmp(name[k], "0x", 2))
				continue; /* ftrace trampolines: kallsyms lists them, %ps not */
			named++;
			name[k][strcspn(name[k], " ")] = '\0';
			assert_non_null(want);
			if (!strcmp(want, name[k]))
				continue;
			bool alias = false;
			for (size_t a = 0; a < n && !alias; a++)
				alias =
				    all[a].addr == addr[k] - off && !strcmp(all[a].name, name[k]);
			if (!alias)
				fail_msg("0x%llx: the kernel says %s, kallsyms %s+%llu",
					 (unsigned long long)addr[k], name[k], want,
					 (unsigned long long)off);
		}
	}
	if (asked)
		assert_true(named * 100 >= asked * 99);
	bpfrun_free(br);
	ksyms_free(ks);
	free(all);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ring_sized_by_cpus_and_rate),
	    cmocka_unit_test(test_failed_start_keeps_fd0),
	    cmocka_unit_test(test_kernel_names_agree_with_kallsyms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
