/* test_walkerr.c - unit tests for the names of the walk failures: every row
 * of the generic list and of each runtime's (taipan_runtimes.h) is named at
 * its id, in its runtime's range, with a key of its own; ids between two
 * ranges' rows and past the last name nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/walkerr.h"
#include "taipan_runtimes.h"

struct row {
	unsigned int id;
	const char *marker, *key, *desc;
};

#define X_ROW(id, marker, key, desc) {TP_ERR_##id, marker, key, desc},
static const struct row generic[] = {TP_WALK_ERRORS(X_ROW)};
static const struct row runtimes[] = {TP_RUNTIME_ERRORS(X_ROW)};

static void check_rows(const struct row *rows, size_t n, unsigned int lo, unsigned int hi)
{
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		assert_true(r->id >= lo && r->id < hi);
		assert_true(walkerr_known(r->id));
		assert_string_equal(walkerr_marker(r->id), r->marker);
		assert_string_equal(walkerr_key(r->id), r->key);
		assert_string_equal(walkerr_desc(r->id), r->desc);
		assert_string_equal(walkerr_row_key(r->id), r->key);
	}
}

static void test_rows_named_in_their_range(void **state)
{
	(void)state;
	check_rows(generic, sizeof(generic) / sizeof(generic[0]), 0, TP_ERR_BASE(TP_RT_NONE + 1));
	assert_int_equal(TP_ERR_NONE, 0);
	check_rows(runtimes, sizeof(runtimes) / sizeof(runtimes[0]), TP_ERR_BASE(TP_RT_CPYTHON),
		   TP_ERR__COUNT);
	/* CPython's first row starts its range. */
	assert_int_equal(TP_ERR_INTERP_HEAD, TP_ERR_BASE(TP_RT_CPYTHON));
	assert_string_equal(walkerr_marker(TP_ERR_CFRAME), "[thread state unreadable]");
	/* Ruby's too, after CPython's. */
	assert_int_equal(TP_ERR_RB_TLS, TP_ERR_BASE(TP_RT_RUBY));
	assert_true(TP_ERR_CFRAME < TP_ERR_BASE(TP_RT_RUBY));
	assert_string_equal(walkerr_marker(TP_ERR_RB_NO_EC), "[no Ruby thread]");
	assert_true(walkerr_is_cut(TP_ERR_DEPTH) && walkerr_is_cut(TP_ERR_STEPS));
	assert_false(walkerr_is_cut(TP_ERR_FRAME) || walkerr_is_cut(TP_ERR_NO_TSTATE));
}

static void test_keys_unique(void **state)
{
	(void)state;
	unsigned int n = 0;
	for (unsigned int i = 0; i < TP_ERR__COUNT; i++) {
		if (!walkerr_known(i))
			continue;
		n++;
		for (unsigned int j = i + 1; j < TP_ERR__COUNT; j++)
			if (walkerr_known(j))
				assert_string_not_equal(walkerr_key(i), walkerr_key(j));
	}
	assert_int_equal(n, sizeof(generic) / sizeof(generic[0]) +
				sizeof(runtimes) / sizeof(runtimes[0]));
}

static void test_ids_between_rows_name_nothing(void **state)
{
	(void)state;
	unsigned int gaps[] = {TP_ERR__GENERIC_END,	    TP_ERR_BASE(TP_RT_CPYTHON) - 1,
			       TP_ERR_BASE(TP_RT_RUBY) - 1, TP_ERR__COUNT,
			       TP_ERR__COUNT + 3,	    65535};
	for (size_t i = 0; i < sizeof(gaps) / sizeof(gaps[0]); i++) {
		assert_false(walkerr_known(gaps[i]));
		assert_string_equal(walkerr_marker(gaps[i]), "[unknown error]");
		assert_string_equal(walkerr_key(gaps[i]), "unknown");
		assert_string_equal(walkerr_desc(gaps[i]), "a failure this taipan does not know");
		assert_null(walkerr_row_key(gaps[i]));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rows_named_in_their_range),
	    cmocka_unit_test(test_keys_unique),
	    cmocka_unit_test(test_ids_between_rows_name_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
