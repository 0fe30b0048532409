/* test_strutil.c - unit tests for the UTF-8 checker and repairer, the
 * escaper and base_name (src/util/strutil.c). */
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

/* str_escape_dup(s, also), checked against want and freed. */
static void assert_escaped(const char *s, const char *also, const char *want)
{
	char *got = str_escape_dup(s, also);
	assert_non_null(got);
	assert_string_equal(got, want);
	assert_int_equal(str_escape(NULL, 0, s, also), strlen(want));
	free(got);
}

static void test_escape(void **state)
{
	(void)state;
	assert_escaped("plain name (app.py:3)", NULL, "plain name (app.py:3)");
	assert_escaped("", NULL, "");
	assert_escaped(NULL, NULL, "");
	/* What a hostile process names a function: a window title, a cleared
	 * screen, a forged traceback line, a clipboard write. */
	assert_escaped("\x1b]0;TITLE\x07\x1b[2J\n  File \"/etc/shadow\"", NULL,
		       "\\x1b]0;TITLE\\x07\\x1b[2J\\x0a  File \"/etc/shadow\"");
	assert_escaped("\x1b]52;c;cm0gLXJmIH4=\x1b\\", NULL, "\\x1b]52;c;cm0gLXJmIH4=\\x1b\\\\");
	assert_escaped("\x01\t\r\x7f", NULL, "\\x01\\x09\\x0d\\x7f");
	/* A backslash doubles, so "\x1b" typed by the target stays apart from ESC. */
	assert_escaped("a\\x1b", NULL, "a\\\\x1b");
	/* C1 controls as code points (U+009B is CSI) and as stray bytes. */
	assert_escaped("\xc2\x9b"
		       "2J \xc2\x80 \xc2\x9f \xc2\xa0",
		       NULL, "\\u009b2J \\u0080 \\u009f \xc2\xa0");
	assert_escaped("\x9b"
		       "2J\xff",
		       NULL, "\\x9b2J\\xff");
	/* Bidi overrides and line separators; other text passes untouched. */
	assert_escaped("\xe2\x80\xae"
		       "evil\xe2\x81\xa9\xe2\x80\xa8",
		       NULL, "\\u202eevil\\u2069\\u2028");
	/* The Arabic letter mark, the zero-width characters, the word joiner
	 * and invisible operators, the byte order mark: each can make one
	 * name look like another. Their neighbours pass. */
	assert_escaped("\xd8\x9c"
		       "a\xe2\x80\x8b"
		       "b\xe2\x80\x8c\xe2\x80\x8d\xe2\x80\x8e\xe2\x80\x8f",
		       NULL, "\\u061ca\\u200bb\\u200c\\u200d\\u200e\\u200f");
	assert_escaped("\xe2\x81\xa0\xe2\x81\xa4\xe2\x81\xaf\xef\xbb\xbf", NULL,
		       "\\u2060\\u2064\\u206f\\ufeff");
	assert_escaped("\xd8\x9b\xd8\x9d\xe2\x80\x8a\xe2\x80\x90\xe2\x81\xb0\xef\xbb\xbe", NULL,
		       "\xd8\x9b\xd8\x9d\xe2\x80\x8a\xe2\x80\x90\xe2\x81\xb0\xef\xbb\xbe");
	assert_escaped("na\xc3\xafve_\xe5\x87\xbd\xe6\x95\xb0_\xf0\x9f\x90\x8d", NULL,
		       "na\xc3\xafve_\xe5\x87\xbd\xe6\x95\xb0_\xf0\x9f\x90\x8d");
	/* Extra characters, for formats that give them a meaning. */
	assert_escaped("a;b c\n", ";", "a\\x3bb c\\x0a");
	assert_escaped("a;b", NULL, "a;b");
}

static void test_escape_cut(void **state)
{
	(void)state;
	char buf[8];
	/* Cut before an escape that does not fit whole. */
	assert_int_equal(str_escape(buf, sizeof(buf), "abcde\x1b", NULL), 9);
	assert_string_equal(buf, "abcde");
	assert_int_equal(str_escape(buf, sizeof(buf),
				    "abc\x1b"
				    "defgh",
				    NULL),
			 12);
	assert_string_equal(buf, "abc\\x1b");
	/* ... and before a UTF-8 sequence that does not. */
	assert_int_equal(str_escape(buf, sizeof(buf), "abcde\xe5\x87\xbd", NULL), 8);
	assert_string_equal(buf, "abcde");
	assert_int_equal(str_escape(buf, 1, "abc", NULL), 3);
	assert_string_equal(buf, "");
	/* Exactly full. */
	assert_int_equal(str_escape(buf, sizeof(buf), "abcdefg", NULL), 7);
	assert_string_equal(buf, "abcdefg");
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
	    cmocka_unit_test(test_seq_len),    cmocka_unit_test(test_valid),
	    cmocka_unit_test(test_repair),     cmocka_unit_test(test_escape),
	    cmocka_unit_test(test_escape_cut), cmocka_unit_test(test_base_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
