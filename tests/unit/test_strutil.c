/* test_strutil.c - unit tests for the UTF-8 checker and repairer and
 * base_name (src/util/strutil.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/strutil.h"

#define FFFD "\xef\xbf\xbd"

static size_t seq(const char *s)
{
	return utf8_seq_len((const unsigned char *)s);
}

static void test_seq_len(void **state)
{
	(void)state;
	assert_int_equal(seq("a"), 1);
	assert_int_equal(seq("\xc3\xaf"), 2);	      /* U+00EF */
	assert_int_equal(seq("\xe5\x87\xbd"), 3);     /* U+51FD */
	assert_int_equal(seq("\xf0\x9f\x90\x8d"), 4); /* U+1F40D */
	assert_int_equal(seq("\xf4\x8f\xbf\xbf"), 4); /* U+10FFFF */
	assert_int_equal(seq("\xed\x9f\xbf"), 3);     /* U+D7FF */
	assert_int_equal(seq("\x80"), 0);	      /* a lone continuation */
	assert_int_equal(seq("\xc0\xaf"), 0);	      /* overlong '/' */
	assert_int_equal(seq("\xc1\xbf"), 0);	      /* overlong */
	assert_int_equal(seq("\xe0\x9f\xbf"), 0);     /* overlong */
	assert_int_equal(seq("\xf0\x8f\xbf\xbf"), 0); /* overlong */
	assert_int_equal(seq("\xed\xa0\x80"), 0);     /* surrogate U+D800 */
	assert_int_equal(seq("\xf4\x90\x80\x80"), 0); /* U+110000 */
	assert_int_equal(seq("\xf5\x80\x80\x80"), 0);
	assert_int_equal(seq("\xff"), 0);
	/* Cut short by the end of the string. */
	assert_int_equal(seq("\xe5\x87"), 0);
	assert_int_equal(seq("\xf0\x9f\x90"), 0);
	assert_int_equal(seq("\xc3"), 0);
}

static void test_valid(void **state)
{
	(void)state;
	assert_true(utf8_valid(""));
	assert_true(utf8_valid("plain ascii"));
	assert_true(utf8_valid("na\xc3\xafve_\xe5\x87\xbd\xe6\x95\xb0_\xf0\x9f\x90\x8d"));
	assert_false(utf8_valid("bad\xff"));
	assert_false(utf8_valid("cut\xe5\x87"));
	assert_false(utf8_valid("\xed\xa0\x80"));
}

static void test_repair(void **state)
{
	(void)state;
	char *r = utf8_repair("bad\xff\xc0\xafname\xed\xa0\x80");
	assert_non_null(r);
	/* One U+FFFD per byte that starts no valid sequence. */
	assert_string_equal(r, "bad" FFFD FFFD FFFD "name" FFFD FFFD FFFD);
	assert_true(utf8_valid(r));
	free(r);
	r = utf8_repair("fine \xc3\xaf");
	assert_non_null(r);
	assert_string_equal(r, "fine \xc3\xaf");
	free(r);
	/* A sequence cut by the end keeps nothing of it. */
	r = utf8_repair("\xf0\x9f\x90");
	assert_non_null(r);
	assert_string_equal(r, FFFD FFFD FFFD);
	free(r);
	r = utf8_repair("");
	assert_non_null(r);
	assert_string_equal(r, "");
	free(r);
}

static void test_base_name(void **state)
{
	(void)state;
	assert_string_equal(base_name("/usr/lib/libpython3.11.so.1.0"), "libpython3.11.so.1.0");
	assert_string_equal(base_name("app.py"), "app.py");
	assert_string_equal(base_name("dir/"), "");
	assert_string_equal(base_name("/"), "");
	assert_null(base_name(NULL));
	const char *p = "a/b";
	assert_ptr_equal(base_name(p), p + 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_seq_len),
	    cmocka_unit_test(test_valid),
	    cmocka_unit_test(test_repair),
	    cmocka_unit_test(test_base_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
