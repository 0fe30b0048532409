/* test_pylocals.c - unit tests for how dump --locals writes a float: as
 * Python's repr() does (src/cpython/pylocals.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpython/pylocals.h"

static void test_float_repr(void **state)
{
	(void)state;
	/* Each as CPython 3's repr() writes it. */
	static const struct {
		double v;
		const char *repr;
	} cases[] = {
	    {0.1, "0.1"},
	    {2.5, "2.5"},
	    {1e16, "1e+16"},
	    {1e-05, "1e-05"},
	    {100.0, "100.0"},
	    {-0.0, "-0.0"},
	    {123456789012345678.0, "1.2345678901234568e+17"},
	    {1.5e-7, "1.5e-07"},
	    {0.0001, "0.0001"},
	    {1e15, "1000000000000000.0"},
	    {9999999999999998.0, "9999999999999998.0"},
	    {5e-324, "5e-324"},
	    {1.7976931348623157e308, "1.7976931348623157e+308"},
	    {-3.25, "-3.25"},
	    {1.0 / 3, "0.3333333333333333"},
	    {INFINITY, "inf"},
	    {-INFINITY, "-inf"},
	    {NAN, "nan"},
	};
	char buf[64];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pylocals_float_repr(cases[i].v, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].repr);
	}
}

/* Every finite double reads back as itself. */
static void test_float_repr_round_trips(void **state)
{
	(void)state;
	char buf[64];
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	for (int i = 0; i < 100000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		double v;
		memcpy(&v, &x, sizeof(v));
		if (!isfinite(v))
			continue;
		pylocals_float_repr(v, buf, sizeof(buf));
		assert_true(strtod(buf, NULL) == v);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_float_repr),
	    cmocka_unit_test(test_float_repr_round_trips),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
