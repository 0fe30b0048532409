/* test_procmaps.c - unit tests for the /proc/PID/maps parser and reader. */
#include <errno.h>
#include <gnu/libc-version.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc/procmaps.h"

static void test_parse_file(void **state)
{
	const char *line = "7f0c1a2b3000-7f0c1a2b5000 r-xp 00001000 fd:01 1234567   "
			   "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0";
	struct map_entry e;

	(void)state;
	assert_int_equal(procmaps_parse_line(line, &e), 0);
	assert_int_equal(e.start, 0x7f0c1a2b3000ULL);
	assert_int_equal(e.end, 0x7f0c1a2b5000ULL);
	assert_string_equal(e.perms, "r-xp");
	assert_int_equal(e.offset, 0x1000);
	assert_int_equal(e.dev_major, 0xfd);
	assert_int_equal(e.dev_minor, 0x01);
	assert_int_equal(e.inode, 1234567);
	assert_false(e.deleted);
	assert_string_equal(e.path, "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0");
	free(e.path);
}

static void test_parse_deleted(void **state)
{
	const char *line = "7f0c1a2b3000-7f0c1a2b5000 r-xp 00001000 fd:01 1234567   "
			   "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0 (deleted)\n";
	struct map_entry e;

	(void)state;
	assert_int_equal(procmaps_parse_line(line, &e), 0);
	assert_true(e.deleted);
	assert_string_equal(e.path, "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0");
	free(e.path);

	/* Shared anonymous memory shows as a deleted /dev/zero. */
	assert_int_equal(
	    procmaps_parse_line("7f00-7f10 rw-s 00000000 00:01 42 /dev/zero (deleted)", &e), 0);
	assert_true(e.deleted);
	assert_string_equal(e.path, "/dev/zero");
	assert_string_equal(e.perms, "rw-s");
	free(e.path);

	/* Only the exact suffix counts. */
	assert_int_equal(procmaps_parse_line("7f00-7f10 r--p 00000000 fd:01 7 /tmp/x(deleted)", &e),
			 0);
	assert_false(e.deleted);
	assert_string_equal(e.path, "/tmp/x(deleted)");
	free(e.path);
}

static void test_parse_spaces_in_path(void **state)
{
	const char *line = "559a5e400000-559a5e401000 r--p 00000000 08:02 99 "
			   "                       /opt/my app/lib two.so (deleted)\n";
	struct map_entry e;

	(void)state;
	assert_int_equal(procmaps_parse_line(line, &e), 0);
	assert_true(e.deleted);
	assert_string_equal(e.path, "/opt/my app/lib two.so");
	assert_int_equal(e.dev_major, 8);
	assert_int_equal(e.dev_minor, 2);
	free(e.path);

	/* Trailing spaces belong to the name. */
	assert_int_equal(procmaps_parse_line("1000-2000 r--p 00000000 08:02 99 /a b  ", &e), 0);
	assert_string_equal(e.path, "/a b  ");
	free(e.path);
}

static void test_parse_anonymous(void **state)
{
	/* Current kernels print a trailing space after the inode, older ones
	 * padded to the path column, and tools strip it: accept all three. */
	const char *lines[] = {
	    "7f0cf3e01000-7f0cf3ec5000 rw-p 00000000 00:00 0",
	    "7f0cf3e01000-7f0cf3ec5000 rw-p 00000000 00:00 0 ",
	    "7f0cf3e01000-7f0cf3ec5000 rw-p 00000000 00:00 0                          \n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		struct map_entry e;

		assert_int_equal(procmaps_parse_line(lines[i], &e), 0);
		assert_int_equal(e.start, 0x7f0cf3e01000ULL);
		assert_int_equal(e.end, 0x7f0cf3ec5000ULL);
		assert_int_equal(e.inode, 0);
		assert_int_equal(e.dev_major, 0);
		assert_false(e.deleted);
		assert_non_null(e.path);
		assert_string_equal(e.path, "");
		free(e.path);
	}
}

static void test_parse_pseudo(void **state)
{
	static const struct {
		const char *line, *path;
		uint64_t start;
	} cases[] = {
	    {"55a6e3b0b000-55a6e3b2c000 rw-p 00000000 00:00 0                          [heap]",
	     "[heap]", 0x55a6e3b0b000ULL},
	    {"7ffd1c1b6000-7ffd1c1b8000 r-xp 00000000 00:00 0                          [vdso]\n",
	     "[vdso]", 0x7ffd1c1b6000ULL},
	    {"7ffd1c0f7000-7ffd1c118000 rw-p 00000000 00:00 0                          [stack]",
	     "[stack]", 0x7ffd1c0f7000ULL},
	    /* All 16 digits, and the header is wider than the pad column. */
	    {"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  "
	     "[vsyscall]",
	     "[vsyscall]", 0xffffffffff600000ULL},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct map_entry e;

		assert_int_equal(procmaps_parse_line(cases[i].line, &e), 0);
		assert_string_equal(e.path, cases[i].path);
		assert_int_equal(e.start, cases[i].start);
		assert_false(e.deleted);
		free(e.path);
	}
}

static void test_parse_wide_fields(void **state)
{
	/* 64-bit offsets, big device numbers (12-bit major, 20-bit minor) and
	 * 64-bit inodes all occur. */
	const char *line = "1000-2000 r--p 7fffffffffff0000 103:fffff 18446744073709551615 /x";
	struct map_entry e;

	(void)state;
	assert_int_equal(procmaps_parse_line(line, &e), 0);
	assert_int_equal(e.offset, 0x7fffffffffff0000ULL);
	assert_int_equal(e.dev_major, 0x103);
	assert_int_equal(e.dev_minor, 0xfffff);
	assert_int_equal(e.inode, UINT64_MAX);
	free(e.path);
}

static void test_parse_malformed(void **state)
{
	static const char *bad[] = {
	    "",
	    "\n",
	    "garbage",
	    /* start */
	    "zz00-7f10 r-xp 00000000 fd:01 1 /x",
	    "-7f10 r-xp 00000000 fd:01 1 /x",
	    " 7f00-7f10 r-xp 00000000 fd:01 1 /x",
	    "0x7f00-7f10 r-xp 00000000 fd:01 1 /x",
	    "10000000000000000-7f10 r-xp 00000000 fd:01 1 /x",
	    /* separator and end */
	    "7f00 7f10 r-xp 00000000 fd:01 1 /x",
	    "7f00-7f1g r-xp 00000000 fd:01 1 /x",
	    "7f00- r-xp 00000000 fd:01 1 /x",
	    "7f00-7f10r-xp 00000000 fd:01 1 /x",
	    "7f00-10000000000000000 r-xp 00000000 fd:01 1 /x",
	    /* empty or inverted range */
	    "7f10-7f10 r-xp 00000000 fd:01 1 /x",
	    "7f10-7f00 r-xp 00000000 fd:01 1 /x",
	    /* perms */
	    "7f00-7f10 r-x 00000000 fd:01 1 /x",
	    "7f00-7f10 r-xpp 00000000 fd:01 1 /x",
	    "7f00-7f10 rwxq 00000000 fd:01 1 /x",
	    "7f00-7f10 xr-p 00000000 fd:01 1 /x",
	    "7f00-7f10 R-XP 00000000 fd:01 1 /x",
	    "7f00-7f10 r-xp",
	    "7f00-7f10 r-",
	    /* offset */
	    "7f00-7f10 r-xp 0000000g fd:01 1 /x",
	    "7f00-7f10 r-xp  fd:01 1 /x",
	    "7f00-7f10 r-xp 00000000fd:01 1 /x",
	    "7f00-7f10 r-xp 00000000000000000 fd:01 1 /x",
	    /* device */
	    "7f00-7f10 r-xp 00000000 fd01 1 /x",
	    "7f00-7f10 r-xp 00000000 fd: 1 /x",
	    "7f00-7f10 r-xp 00000000 :01 1 /x",
	    "7f00-7f10 r-xp 00000000 fd:0g 1 /x",
	    "7f00-7f10 r-xp 00000000 fd:01:02 1 /x",
	    "7f00-7f10 r-xp 00000000 123456789:01 1 /x",
	    "7f00-7f10 r-xp 00000000 fd:01",
	    /* inode */
	    "7f00-7f10 r-xp 00000000 fd:01 /x",
	    "7f00-7f10 r-xp 00000000 fd:01 -1 /x",
	    "7f00-7f10 r-xp 00000000 fd:01 12a /x",
	    "7f00-7f10 r-xp 00000000 fd:01 18446744073709551616 /x",
	    "7f00-7f10 r-xp 00000000 fd:01  1 /x",
	    /* two lines in one */
	    "7f00-7f10 r-xp 00000000 fd:01 1 /x\n7f00-7f10 r-xp 00000000 fd:01 1 /y",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct map_entry e;

		memset(&e, 0xa5, sizeof(e));
		if (procmaps_parse_line(bad[i], &e) != -EINVAL)
			fail_msg("accepted malformed line %zu: \"%s\"", i, bad[i]);
		/* On error *out is untouched. */
		for (size_t b = 0; b < sizeof(e); b++)
			assert_int_equal(((unsigned char *)&e)[b], 0xa5);
	}
}

static const struct map_entry *containing(const struct proc_maps *m, uintptr_t addr)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].start <= addr && addr < m->v[i].end)
			return &m->v[i];
	return NULL;
}

static void test_read_self(void **state)
{
	const struct map_entry *exe, *libc, *base;
	struct proc_maps m = {0};
	char self[PATH_MAX];
	ssize_t n;

	(void)state;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(n > 0);
	self[n] = '\0';

	assert_int_equal(procmaps_read(getpid(), &m), 0);
	assert_true(m.n > 5);
	for (size_t i = 0; i < m.n; i++) {
		assert_true(m.v[i].start < m.v[i].end);
		assert_int_equal(m.v[i].start % 4096, 0);
		assert_int_equal(m.v[i].end % 4096, 0);
		/* The kernel lists mappings in address order, without overlap. */
		if (i)
			assert_true(m.v[i - 1].end <= m.v[i].start);
	}

	/* Our own code lies in an executable mapping of our executable. */
	exe = containing(&m, (uintptr_t)test_read_self);
	assert_non_null(exe);
	assert_string_equal(exe->path, self);
	assert_non_null(strchr(exe->perms, 'x'));
	assert_true(exe->inode != 0);
	base = procmaps_find_base(&m, exe);
	assert_non_null(base);
	assert_int_equal(base->offset, 0);
	assert_string_equal(base->path, self);
	assert_true(base->start <= exe->start);

	/* And glibc's code (a function no sanitizer intercepts) in libc.so. */
	libc = containing(&m, (uintptr_t)gnu_get_libc_version);
	assert_non_null(libc);
	assert_non_null(strstr(libc->path, "/libc.so"));
	assert_string_equal(libc->perms, "r-xp");
	assert_false(libc->deleted);
	base = procmaps_find_base(&m, libc);
	assert_non_null(base);
	assert_int_equal(base->offset, 0);
	assert_string_equal(base->path, libc->path);
	assert_true(base->start < libc->start);

	/* Our frame is in [stack]. (Not the address of a local: sanitizers
	 * may move locals to the heap.) */
	libc = containing(&m, (uintptr_t)__builtin_frame_address(0));
	assert_non_null(libc);
	assert_string_equal(libc->path, "[stack]");

	procmaps_free(&m);
	assert_null(m.v);
	assert_int_equal(m.n, 0);
}

static void test_read_missing_pid(void **state)
{
	struct proc_maps m = {.v = (void *)1, .n = 7};

	(void)state;
	/* pid_max is at most 2^22, so this pid never exists. */
	assert_int_equal(procmaps_read(INT_MAX, &m), -ESRCH);
	assert_int_equal(procmaps_read(-5, &m), -ESRCH);
	/* Untouched on error. */
	assert_ptr_equal(m.v, (void *)1);
	assert_int_equal(m.n, 7);
}

static void test_find_base(void **state)
{
	struct map_entry v[] = {
	    {.start = 0x1000, .end = 0x2000, .offset = 0, .inode = 0, .path = ""},
	    {.start = 0x3000, .end = 0x4000, .offset = 0, .inode = 5, .dev_major = 8},
	    {.start = 0x5000, .end = 0x6000, .offset = 0, .inode = 5, .dev_major = 9},
	    {.start = 0x6000, .end = 0x7000, .offset = 0x1000, .inode = 5, .dev_major = 9},
	    {.start = 0x8000, .end = 0x9000, .offset = 0x1000, .inode = 6, .dev_major = 9},
	};
	struct proc_maps m = {.v = v, .n = 5};
	struct proc_maps empty = {0};

	(void)state;
	/* Same inode on another device is another file. */
	assert_ptr_equal(procmaps_find_base(&m, &v[3]), &v[2]);
	assert_ptr_equal(procmaps_find_base(&m, &v[1]), &v[1]);
	assert_null(procmaps_find_base(&m, &v[4]));
	assert_null(procmaps_find_base(&m, &v[0]));
	assert_null(procmaps_find_base(&empty, &v[3]));
	procmaps_free(&empty);
	procmaps_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_file),		 cmocka_unit_test(test_parse_deleted),
	    cmocka_unit_test(test_parse_spaces_in_path), cmocka_unit_test(test_parse_anonymous),
	    cmocka_unit_test(test_parse_pseudo),	 cmocka_unit_test(test_parse_wide_fields),
	    cmocka_unit_test(test_parse_malformed),	 cmocka_unit_test(test_read_self),
	    cmocka_unit_test(test_read_missing_pid),	 cmocka_unit_test(test_find_base),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
