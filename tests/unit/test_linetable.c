/* test_linetable.c - line-table decoders against hand-built tables and real interpreters. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpython/linetable.h"

#define MAX_REPORTED 20

/* The table is copied to a heap block of exactly len bytes, so that under
 * AddressSanitizer any read past the end is caught. */
static int line_of(enum py_linetable_kind kind, const uint8_t *bytes, size_t len, int first,
		   uint32_t off)
{
	uint8_t *t = malloc(len ? len : 1);
	int line;

	assert_non_null(t);
	if (len)
		memcpy(t, bytes, len);
	line = py_linetable_line(kind, t, len, first, off);
	free(t);
	return line;
}

#define LINE(kind, arr, first, off) line_of(kind, arr, sizeof(arr), first, off)

/* --- co_lnotab, 2.7 and 3.6-3.9 ----------------------------------------------- */

static void test_lnotab_empty(void **state)
{
	(void)state;
	for (uint32_t off = 0; off < 10; off++) {
		assert_int_equal(line_of(PY_LT_LNOTAB_U8, NULL, 0, 7, off), 7);
		assert_int_equal(line_of(PY_LT_LNOTAB, NULL, 0, 7, off), 7);
	}
	assert_int_equal(py_linetable_line(PY_LT_LNOTAB, NULL, 0, 3, 0), 3);
	assert_int_equal(py_linetable_line(PY_LT_LNOTAB_U8, NULL, 0, 3, UINT32_MAX), 3);
}

static void test_lnotab_big_jumps(void **state)
{
	/* 2.7 splits a jump of 300 lines into 255 + 45 and a jump of 520 bytes
	 * into 255 + 255 + 10; increments >= 128 are positive in 2.7. */
	static const uint8_t u8[] = {4, 0, 0, 255, 0, 45, 255, 0, 255, 0, 10, 200};

	(void)state;
	assert_int_equal(LINE(PY_LT_LNOTAB_U8, u8, 10, 0), 10);
	assert_int_equal(LINE(PY_LT_LNOTAB_U8, u8, 10, 3), 10);
	assert_int_equal(LINE(PY_LT_LNOTAB_U8, u8, 10, 4), 310);
	assert_int_equal(LINE(PY_LT_LNOTAB_U8, u8, 10, 523), 310);
	assert_int_equal(LINE(PY_LT_LNOTAB_U8, u8, 10, 524), 510);
	/* Past the end of the table: the last line reached. */
	assert_int_equal(LINE(PY_LT_LNOTAB_U8, u8, 10, 100000), 510);
	assert_int_equal(LINE(PY_LT_LNOTAB_U8, u8, 10, UINT32_MAX), 510);
	/* The same bytes read as 3.6-3.9 signed increments: 255 is -1, 200 is -56. */
	assert_int_equal(LINE(PY_LT_LNOTAB, u8, 100, 4), 100 - 1 + 45);
	assert_int_equal(LINE(PY_LT_LNOTAB, u8, 100, 524), 100 - 1 + 45 - 56);
}

static void test_lnotab_negative(void **state)
{
	/* 3.8+ goes back 130 lines as -128, -2. */
	static const uint8_t t[] = {6, 1, 2, 0x80, 0, 0xfe, 4, 3};

	(void)state;
	assert_int_equal(LINE(PY_LT_LNOTAB, t, 500, 0), 500);
	assert_int_equal(LINE(PY_LT_LNOTAB, t, 500, 5), 500);
	assert_int_equal(LINE(PY_LT_LNOTAB, t, 500, 6), 501);
	assert_int_equal(LINE(PY_LT_LNOTAB, t, 500, 7), 501);
	assert_int_equal(LINE(PY_LT_LNOTAB, t, 500, 8), 371);
	assert_int_equal(LINE(PY_LT_LNOTAB, t, 500, 11), 371);
	assert_int_equal(LINE(PY_LT_LNOTAB, t, 500, 12), 374);
	assert_int_equal(LINE(PY_LT_LNOTAB, t, 500, 1000), 374);
}

static void test_lnotab_truncated(void **state)
{
	/* An odd trailing byte is not a pair; CPython ignores it too. */
	static const uint8_t odd[] = {2, 1, 2};
	/* Line sums that would overflow an int must not be UB. */
	static const uint8_t up[] = {0, 127, 0, 127, 0, 127};

	(void)state;
	assert_int_equal(LINE(PY_LT_LNOTAB, odd, 1, 1), 1);
	assert_int_equal(LINE(PY_LT_LNOTAB, odd, 1, 2), 2);
	assert_int_equal(LINE(PY_LT_LNOTAB, odd, 1, 500), 2);
	assert_int_equal(LINE(PY_LT_LNOTAB, up, INT32_MAX - 10, 0), -1);
	assert_int_equal(LINE(PY_LT_LNOTAB, up, -1000, 0), -1);
	assert_int_equal(LINE(PY_LT_LNOTAB_U8, up, INT32_MIN, 0), -1);
}

/* --- co_linetable, 3.10 --------------------------------------------------------- */

static void test_linetable310_empty(void **state)
{
	(void)state;
	assert_int_equal(line_of(PY_LT_LINETABLE, NULL, 0, 7, 0), -1);
	assert_int_equal(py_linetable_line(PY_LT_LINETABLE, NULL, 0, 7, 4), -1);
}

static void test_linetable310_no_line(void **state)
{
	/* [0,6) +1, [6,10) no line, [10,12) +2 from the last real line. */
	static const uint8_t t[] = {6, 1, 4, 0x80, 2, 2};

	(void)state;
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 100, 0), 101);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 100, 5), 101);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 100, 6), -1);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 100, 9), -1);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 100, 10), 103);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 100, 11), 103);
	/* The near line of an entry without one: the last real line before. */
	assert_int_equal(py_linetable_line_near(PY_LT_LINETABLE, t, sizeof(t), 100, 6), 101);
	assert_int_equal(py_linetable_line_near(PY_LT_LINETABLE, t, sizeof(t), 100, 9), 101);
	assert_int_equal(py_linetable_line_near(PY_LT_LINETABLE, t, sizeof(t), 100, 10), 103);
	assert_int_equal(py_linetable_line_near(PY_LT_LINETABLE, t, sizeof(t), 100, 12), -1);
	/* Past the end of the table there is no line. */
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 100, 12), -1);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 100, UINT32_MAX), -1);
}

static void test_linetable310_jumps(void **state)
{
	/* +300 lines as 127 + 127 + 46, the first two in zero-length ranges;
	 * -254 lines as -127 - 127 (-128 means "no line"); then 300 bytes as
	 * 254 + 46, the second pair also moving one line. */
	static const uint8_t t[] = {0, 127, 0, 127, 4, 46, 0, 0x81, 2, 0x81, 254, 0, 46, 1};

	(void)state;
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 10, 0), 310);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 10, 3), 310);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 10, 4), 56);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 10, 5), 56);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 10, 6), 56);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 10, 259), 56);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 10, 260), 57);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 10, 305), 57);
	assert_int_equal(LINE(PY_LT_LINETABLE, t, 10, 306), -1);
}

static void test_linetable310_truncated(void **state)
{
	static const uint8_t odd[] = {2, 1, 2};
	static const uint8_t zero_tail[] = {2, 1, 0, 5};

	(void)state;
	assert_int_equal(LINE(PY_LT_LINETABLE, odd, 1, 0), 2);
	assert_int_equal(LINE(PY_LT_LINETABLE, odd, 1, 2), -1);
	/* A zero-length range at the end extends nothing. */
	assert_int_equal(LINE(PY_LT_LINETABLE, zero_tail, 1, 1), 2);
	assert_int_equal(LINE(PY_LT_LINETABLE, zero_tail, 1, 2), -1);
}

/* --- location table, 3.11+ ------------------------------------------------------ */

#define HDR(code, units) (uint8_t)(0x80 | ((code) << 3) | ((units)-1))

static void test_locations_empty(void **state)
{
	(void)state;
	assert_int_equal(line_of(PY_LT_LOCATIONS, NULL, 0, 7, 0), -1);
	assert_int_equal(py_linetable_line(PY_LT_LOCATIONS, NULL, 0, 7, 0), -1);
}

static void test_locations_forms(void **state)
{
	/* One entry a line. */
	/* clang-format off */
	static const uint8_t t[] = {
		/* cu 0: long form, line +1, end line +0, columns 1 and 2 */
		HDR(14, 1), 0x02, 0x00, 0x01, 0x02,
		/* cu 1-2: short form (an instruction and its CACHE) */
		HDR(0, 2), 0x05,
		/* cu 3: one-line form, line +1 */
		HDR(11, 1), 0x04, 0x08,
		/* cu 4-5: no location */
		HDR(15, 2),
		/* cu 6: one-line form, line +2 from the last real line */
		HDR(12, 1), 0x00, 0x01,
		/* cu 7: no columns, line -5 (svarint 11) */
		HDR(13, 1), 0x0b,
		/* cu 8-10: long form, line +1000 (svarint 2000, two chunks) */
		HDR(14, 3), 0x50, 0x1f, 0x00, 0x00, 0x00,
		/* cu 11-18: one-line form, same line */
		HDR(10, 8), 0x00, 0x01,
		/* cu 19: short form with code 9 */
		HDR(9, 1), 0x7f,
	};
	/* clang-format on */

	(void)state;
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 0), 11);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 1), 11); /* odd: same unit */
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 2), 11);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 4), 11); /* CACHE unit */
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 6), 12);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 8), -1);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 10), -1);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 12), 14);
	/* The near line of cu 4-5: that of cu 3, the last with a location. */
	assert_int_equal(py_linetable_line_near(PY_LT_LOCATIONS, t, sizeof(t), 10, 8), 12);
	assert_int_equal(py_linetable_line_near(PY_LT_LOCATIONS, t, sizeof(t), 10, 10), 12);
	assert_int_equal(py_linetable_line_near(PY_LT_LOCATIONS, t, sizeof(t), 10, 12), 14);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 14), 9);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 16), 1009);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 20), 1009);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 22), 1009);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 36), 1009);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 38), 1009);
	/* Past the end of the table there is no line. */
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 40), -1);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, UINT32_MAX), -1);
}

static void test_locations_big_negative(void **state)
{
	/* line -70000: svarint 140001 = 0x222e1, chunks 0x21, 0x0b, 0x22 */
	/* clang-format off */
	static const uint8_t t[] = {
		HDR(13, 1), 0x61, 0x4b, 0x22,		/* cu 0: line -70000 */
		HDR(15, 1),				/* cu 1: no location */
		HDR(14, 1), 0x61, 0x4b, 0x22, 0, 0, 0,	/* cu 2: line -70000 */
	};
	/* clang-format on */

	(void)state;
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 140000, 0), 70000);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 140000, 2), -1);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 140000, 4), 0);
	assert_int_equal(LINE(PY_LT_LOCATIONS, t, 10, 4), -1); /* below zero */
}

static void test_locations_garbage(void **state)
{
	/* No header byte first: CPython takes the first byte as a header anyway. */
	static const uint8_t headless[] = {0x05, 0x06, HDR(11, 1), 0, 0};
	/* A varint that never ends within its entry, then one cut by the table. */
	/* clang-format off */
	static const uint8_t endless[] = {
		HDR(13, 1), 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f,
		HDR(10, 1), 0, 0,
		HDR(14, 2), 0x7f,
	};
	/* clang-format on */
	/* Truncated long form. */
	static const uint8_t cut[] = {HDR(14, 2)};

	(void)state;
	assert_int_equal(LINE(PY_LT_LOCATIONS, headless, 5, 0), 5);
	assert_int_equal(LINE(PY_LT_LOCATIONS, headless, 5, 10), 5); /* 0x05: 6 units */
	assert_int_equal(LINE(PY_LT_LOCATIONS, headless, 5, 12), 6);
	assert_int_equal(LINE(PY_LT_LOCATIONS, headless, 5, 14), -1);
	assert_in_range(LINE(PY_LT_LOCATIONS, endless, 5, 0) + 1, 0, INT32_MAX);
	assert_in_range(LINE(PY_LT_LOCATIONS, endless, 5, 4) + 1, 0, INT32_MAX);
	assert_int_equal(LINE(PY_LT_LOCATIONS, cut, 5, 0), 5);
	assert_int_equal(LINE(PY_LT_LOCATIONS, cut, 5, 2), 5);
	assert_int_equal(LINE(PY_LT_LOCATIONS, cut, 5, 4), -1);
}

/* Random bytes for every kind: the decoders must return a line >= -1 without
 * reading outside the table (ASan) or overflowing (UBSan). */
static void test_fuzz(void **state)
{
	static const enum py_linetable_kind kinds[] = {PY_LT_LNOTAB_U8, PY_LT_LNOTAB,
						       PY_LT_LINETABLE, PY_LT_LOCATIONS};
	uint64_t x = 0x9e3779b97f4a7c15ull;
	uint8_t buf[96];

	(void)state;
	for (int round = 0; round < 20000; round++) {
		size_t len;

		for (size_t i = 0; i < sizeof(buf); i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			buf[i] = (uint8_t)x;
		}
		len = x % sizeof(buf);
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			static const int firsts[] = {0, 1, 1000, INT32_MAX, INT32_MIN, -1};
			uint32_t offs[] = {0, 1, (uint32_t)(x >> 40) % 600, UINT32_MAX};

			for (size_t o = 0; o < 4; o++) {
				int line = line_of(kinds[k], buf, len, firsts[round % 6], offs[o]);

				assert_true(line >= -1);
			}
		}
	}
}

/* --- fixtures from real interpreters -------------------------------------------- */

struct tally {
	unsigned long codes, offsets, mismatches;
};

static char *next_token(char **p)
{
	char *s = *p, *e;

	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	if (!*s)
		return NULL;
	e = s;
	while (*e && *e != ' ' && *e != '\t' && *e != '\n' && *e != '\r')
		e++;
	if (*e)
		*e++ = '\0';
	*p = e;
	return s;
}

static int parse_long(const char *s, long *out)
{
	char *end;

	if (!s)
		return -EINVAL;
	errno = 0;
	*out = strtol(s, &end, 10);
	return (errno || end == s || *end) ? -EINVAL : 0;
}

static int parse_kind(const char *s, enum py_linetable_kind *kind)
{
	static const struct {
		const char *name;
		enum py_linetable_kind kind;
	} names[] = {
	    {"LNOTAB_U8", PY_LT_LNOTAB_U8},
	    {"LNOTAB", PY_LT_LNOTAB},
	    {"LINETABLE", PY_LT_LINETABLE},
	    {"LOCATIONS", PY_LT_LOCATIONS},
	};

	for (size_t i = 0; s && i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(s, names[i].name)) {
			*kind = names[i].kind;
			return 0;
		}
	}
	return -EINVAL;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Decodes hex ("-" for empty) into a malloc'ed block of exactly the table's
 * size, so that ASan sees reads past its end. */
static int parse_hex(const char *s, uint8_t **out, size_t *len)
{
	size_t n;

	*out = NULL;
	*len = 0;
	if (!s)
		return -EINVAL;
	if (!strcmp(s, "-"))
		return 0;
	n = strlen(s);
	if (n % 2)
		return -EINVAL;
	*out = malloc(n / 2);
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			free(*out);
			*out = NULL;
			return -EINVAL;
		}
		(*out)[i] = (uint8_t)(hi << 4 | lo);
	}
	*len = n / 2;
	return 0;
}

/* Checks one record "KIND NAME FIRST CODELEN HEX COUNT OFF:LINE...". Returns 0,
 * or -EINVAL when the record is malformed. */
static int check_record(const char *file, char *rec, struct tally *t)
{
	enum py_linetable_kind kind;
	char *p = rec, *kind_s, *name, *tok;
	long first, codelen, count;
	uint8_t *table;
	size_t len;
	int err;

	kind_s = next_token(&p);
	name = next_token(&p);
	if (parse_kind(kind_s, &kind) || !name || parse_long(next_token(&p), &first) ||
	    parse_long(next_token(&p), &codelen))
		return -EINVAL;
	err = parse_hex(next_token(&p), &table, &len);
	if (err)
		return err;
	if (parse_long(next_token(&p), &count) || count < 0) {
		free(table);
		return -EINVAL;
	}
	for (long i = 0; i < count; i++) {
		char *colon;
		long off, want;
		int got;

		tok = next_token(&p);
		colon = tok ? strchr(tok, ':') : NULL;
		if (!colon) {
			err = -EINVAL;
			break;
		}
		*colon = '\0';
		if (parse_long(tok, &off) || parse_long(colon + 1, &want) || off < 0 ||
		    off > (long)UINT32_MAX) {
			err = -EINVAL;
			break;
		}
		got = py_linetable_line(kind, table, len, (int)first, (uint32_t)off);
		t->offsets++;
		if (got != want && t->mismatches++ < MAX_REPORTED)
			print_message("%s: %s (%s, firstlineno %ld, %ld bytes of code): "
				      "offset %ld: CPython says line %ld, decoder says %d\n",
				      file, name, kind_s, first, codelen, off, want, got);
	}
	if (!err && next_token(&p))
		err = -EINVAL; /* more pairs than COUNT */
	free(table);
	t->codes++;
	return err;
}

static void check_fixture_file(const char *path, struct tally *total)
{
	const char *file = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	struct tally t = {0};
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0;
	long lineno = 0;

	if (!f)
		fail_msg("%s: %s", path, strerror(errno));
	while (getline(&buf, &cap, f) > 0) {
		lineno++;
		if (buf[0] == '#' || buf[0] == '\n')
			continue;
		if (check_record(file, buf, &t)) {
			free(buf);
			fclose(f);
			fail_msg("%s:%ld: malformed record", path, lineno);
		}
	}
	free(buf);
	fclose(f);
	print_message("%s: %lu code objects, %lu offsets, %lu mismatches\n", file, t.codes,
		      t.offsets, t.mismatches);
	if (!t.offsets)
		fail_msg("%s: no offsets to check", path);
	total->codes += t.codes;
	total->offsets += t.offsets;
	total->mismatches += t.mismatches;
}

/* Every offset of every code object that tests/fixtures/dump_linetables.py
 * recorded from a real interpreter. A run that finds nothing to check fails:
 * a test that checks nothing must not pass. */
static void test_fixtures(void **state)
{
	const char *dir = getenv("TAIPAN_FIXTURES");
	struct tally total = {0};
	char *pattern;
	glob_t g;
	int rc;

	(void)state;
	if (!dir || !*dir)
		fail_msg("TAIPAN_FIXTURES is not set; run through 'make unit', which "
			 "generates the fixtures and sets it");
	if (asprintf(&pattern, "%s/linetables-*.txt", dir) < 0)
		fail_msg("out of memory");
	rc = glob(pattern, 0, NULL, &g);
	free(pattern);
	if (rc == GLOB_NOMATCH)
		fail_msg("%s: no linetables-*.txt fixture; generate them with "
			 "tests/fixtures/gen_fixtures.sh %s",
			 dir, dir);
	if (rc)
		fail_msg("%s: glob failed", dir);
	for (size_t i = 0; i < g.gl_pathc; i++)
		check_fixture_file(g.gl_pathv[i], &total);
	print_message("%zu fixture files: %lu code objects, %lu offsets, %lu mismatches\n",
		      g.gl_pathc, total.codes, total.offsets, total.mismatches);
	globfree(&g);
	assert_int_equal(total.mismatches, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lnotab_empty),
	    cmocka_unit_test(test_lnotab_big_jumps),
	    cmocka_unit_test(test_lnotab_negative),
	    cmocka_unit_test(test_lnotab_truncated),
	    cmocka_unit_test(test_linetable310_empty),
	    cmocka_unit_test(test_linetable310_no_line),
	    cmocka_unit_test(test_linetable310_jumps),
	    cmocka_unit_test(test_linetable310_truncated),
	    cmocka_unit_test(test_locations_empty),
	    cmocka_unit_test(test_locations_forms),
	    cmocka_unit_test(test_locations_big_negative),
	    cmocka_unit_test(test_locations_garbage),
	    cmocka_unit_test(test_fuzz),
	    cmocka_unit_test(test_fixtures),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
