/* test_ksyms.c - unit tests for the kallsyms loader: crafted files and the live kernel. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "profile/ksyms.h"

static char *write_tmp(const char *tag, const char *text)
{
	char *path;
	int fd;

	if (asprintf(&path, "/tmp/taipan-test-ksyms-%d-%s", (int)getpid(), tag) < 0)
		fail();
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static struct ksyms *load_text(const char *tag, const char *text)
{
	char *path = write_tmp(tag, text);
	struct ksyms *ks = ksyms_load(path);

	unlink(path);
	free(path);
	return ks;
}

static void expect(const struct ksyms *ks, uint64_t addr, const char *name, uint64_t off)
{
	uint64_t got = ~0ULL;
	const char *s = ksyms_lookup(ks, addr, &got);

	if (!s)
		fail_msg("0x%" PRIx64 ": no symbol, wanted %s+0x%" PRIx64, addr, name, off);
	if (strcmp(s, name) || got != off)
		fail_msg("0x%" PRIx64 ": %s+0x%" PRIx64 ", wanted %s+0x%" PRIx64, addr, s, got,
			 name, off);
}

/* Out of order (a module listed before core symbols), aliases, data symbols,
 * a module suffix after a tab, malformed lines, no final newline. */
static const char crafted[] = "ffffffff81000000 T _stext\n"
			      "ffffffff81000000 t alias_local\n"
			      "ffffffff81000010 t foo\n"
			      "ffffffff81000100 d some_data\n"
			      "ffffffff81000200 T bar\n"
			      "ffffffffc0001000 t modfn\t[mymod]\n"
			      "ffffffff81000300 W weakfn\n"
			      "ffffffff81000300 T strongfn\n"
			      "this is not a kallsyms line\n"
			      "ffffffff81000400 t\n"
			      "ffffffff8100040g t badhex\n"
			      "1ffffffff81000400 t toolong\n"
			      "ffffffff81000400 tt glued\n"
			      "ffffffff81000500 B bss_sym\n"
			      "ffffffffc0002000 t lastfn [othermod]";

static void check_crafted(const struct ksyms *ks)
{
	uint64_t off = 42;

	assert_non_null(ks);
	/* Below the first symbol. */
	assert_null(ksyms_lookup(ks, 0xffffffff80ffffffULL, &off));
	assert_int_equal(off, 42);
	assert_null(ksyms_lookup(ks, 0, NULL));
	/* The global wins over the local alias at the same address. */
	expect(ks, 0xffffffff81000000ULL, "_stext", 0);
	expect(ks, 0xffffffff81000005ULL, "_stext", 5);
	expect(ks, 0xffffffff81000010ULL, "foo", 0);
	/* Data symbols are not kept: this is still in foo. */
	expect(ks, 0xffffffff81000100ULL, "foo", 0xf0);
	expect(ks, 0xffffffff810001ffULL, "foo", 0x1ef);
	expect(ks, 0xffffffff81000200ULL, "bar", 0);
	expect(ks, 0xffffffff81000300ULL, "strongfn", 0);
	/* Malformed lines add nothing. */
	expect(ks, 0xffffffff81000400ULL, "strongfn", 0x100);
	expect(ks, 0xffffffff81000600ULL, "strongfn", 0x300);
	/* Module names are not part of the symbol name. */
	expect(ks, 0xffffffffc0001010ULL, "modfn", 0x10);
	expect(ks, 0xffffffffc0002000ULL, "lastfn", 0);
	/* No sizes in kallsyms: the last symbol runs to the end. */
	expect(ks, UINT64_MAX, "lastfn", UINT64_MAX - 0xffffffffc0002000ULL);
	assert_non_null(ksyms_lookup(ks, 0xffffffff81000001ULL, NULL));
}

static void test_crafted(void **state)
{
	struct ksyms *ks = load_text("crafted", crafted);

	(void)state;
	check_crafted(ks);
	ksyms_free(ks);
}

static void test_crafted_sorted(void **state)
{
	/* The same symbols in address order (the common case, no sort). */
	struct ksyms *ks = load_text("sorted", "ffffffff81000000 t alias_local\n"
					       "ffffffff81000000 T _stext\n"
					       "ffffffff81000010 t foo\n"
					       "ffffffff81000200 T bar\n"
					       "ffffffff81000300 T strongfn\n"
					       "ffffffff81000300 W weakfn\n"
					       "ffffffffc0001000 t modfn\t[mymod]\n"
					       "ffffffffc0002000 t lastfn\t[othermod]\n");

	(void)state;
	check_crafted(ks);
	ksyms_free(ks);
}

static void test_aliases_keep_first(void **state)
{
	struct ksyms *ks = load_text("alias", "0000000000001000 T first\n"
					      "0000000000001000 T second\n"
					      "0000000000002000 t x\n"
					      "0000000000002000 w y\n");

	(void)state;
	assert_non_null(ks);
	expect(ks, 0x1000, "first", 0);
	expect(ks, 0x2000, "x", 0);
	ksyms_free(ks);
}

static void test_hidden_addresses(void **state)
{
	/* What an unprivileged reader sees with kernel.kptr_restrict set. */
	struct ksyms *ks = load_text("zero", "0000000000000000 T _stext\n"
					     "0000000000000000 t foo\n"
					     "0000000000000000 T bar\t[mod]\n");

	(void)state;
	assert_null(ks);
	assert_int_equal(errno, EPERM);
}

static void test_empty_and_missing(void **state)
{
	(void)state;
	errno = 0;
	assert_null(load_text("empty", ""));
	assert_int_equal(errno, ENOENT);
	errno = 0;
	assert_null(load_text("nodata", "ffffffff81000100 d some_data\n"));
	assert_int_equal(errno, ENOENT);
	errno = 0;
	assert_null(ksyms_load("/nonexistent/kallsyms"));
	assert_int_equal(errno, ENOENT);
	ksyms_free(NULL);
}

struct known {
	uint64_t addr;
	uint64_t next; /* the next greater text address, 0 if none */
	bool found;
	char aliases[512]; /* " a b c " names sharing addr */
};

static bool is_text(char t)
{
	return t == 't' || t == 'T' || t == 'w' || t == 'W';
}

/* Reads the real file the slow, obvious way, for one symbol. */
static void scan_for(const char *name, struct known *k)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char line[512], sym[256], type;
	unsigned long long a;

	memset(k, 0, sizeof(*k));
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %255s", &a, &type, sym) == 3 && is_text(type) &&
		    !strcmp(sym, name)) {
			k->addr = a;
			k->found = true;
			break;
		}
	if (!k->found) {
		fclose(f);
		return;
	}
	rewind(f);
	strcpy(k->aliases, " ");
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s", &a, &type, sym) != 3 || !is_text(type))
			continue;
		if (a == k->addr && strlen(k->aliases) + strlen(sym) + 2 < sizeof(k->aliases)) {
			strcat(k->aliases, sym);
			strcat(k->aliases, " ");
		}
		if (a > k->addr && (!k->next || a < k->next))
			k->next = a;
	}
	fclose(f);
}

static bool in_aliases(const struct known *k, const char *name)
{
	char word[300];

	snprintf(word, sizeof(word), " %s ", name);
	return strstr(k->aliases, word) != NULL;
}

static void test_live_kernel(void **state)
{
	static const char *names[] = {"do_sys_openat2", "vfs_read", "schedule"};
	struct timespec t0, t1;
	struct known st, k;
	struct ksyms *ks;
	const char *s;
	uint64_t off, lowest = UINT64_MAX;
	double ms;
	int checked = 0;

	(void)state;
	if (access("/proc/kallsyms", R_OK)) {
		print_message("skipping: /proc/kallsyms not readable\n");
		skip();
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ks = ksyms_load(NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (!ks && errno == EPERM) {
		print_message("skipping: kernel hides addresses (not root, or kptr_restrict)\n");
		skip();
	}
	assert_non_null(ks);
	ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	print_message("/proc/kallsyms loaded in %.1f ms\n", ms);
	assert_true(ms < 2000);

	/* _stext shares its address with other symbols on some kernels; any
	 * of them is a right answer, at offset 0. */
	scan_for("_stext", &st);
	assert_true(st.found);
	s = ksyms_lookup(ks, st.addr, &off);
	assert_non_null(s);
	assert_int_equal(off, 0);
	if (!in_aliases(&st, s))
		fail_msg("_stext address: got %s, not among%s", s, st.aliases);
	print_message("_stext 0x%" PRIx64 " -> %s\n", st.addr, s);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		scan_for(names[i], &k);
		if (!k.found)
			continue;
		s = ksyms_lookup(ks, k.addr, &off);
		assert_non_null(s);
		assert_int_equal(off, 0);
		assert_true(in_aliases(&k, s));
		if (k.next > k.addr + 1) {
			uint64_t mid = k.addr + (k.next - k.addr) / 2;

			s = ksyms_lookup(ks, mid, &off);
			assert_non_null(s);
			assert_true(in_aliases(&k, s));
			assert_int_equal(off, mid - k.addr);
			s = ksyms_lookup(ks, k.next - 1, &off);
			assert_true(in_aliases(&k, s));
			assert_int_equal(off, k.next - 1 - k.addr);
		}
		checked++;
	}
	assert_true(checked > 0);

	/* Below the lowest text symbol there is nothing. */
	{
		FILE *f = fopen("/proc/kallsyms", "r");
		char line[512], type;
		unsigned long long a;

		assert_non_null(f);
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "%llx %c", &a, &type) == 2 && is_text(type) && a < lowest)
				lowest = a;
		fclose(f);
	}
	assert_true(lowest > 0 && lowest != UINT64_MAX);
	assert_null(ksyms_lookup(ks, lowest - 1, &off));
	assert_non_null(ksyms_lookup(ks, lowest, &off));
	assert_null(ksyms_lookup(ks, 0, NULL));
	ksyms_free(ks);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_crafted),
	    cmocka_unit_test(test_crafted_sorted),
	    cmocka_unit_test(test_aliases_keep_first),
	    cmocka_unit_test(test_hidden_addresses),
	    cmocka_unit_test(test_empty_and_missing),
	    cmocka_unit_test(test_live_kernel),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
