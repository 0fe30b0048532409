/* test_topstats.c - unit tests for top's own/total counts: leaf and
 * recursion rules, the thread filter, sorting, resets and sliding windows. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "profile/profile.h"
#include "profile_build.h"
#include "profile/topstats.h"

struct fixture {
	struct profile *p;
	uint32_t a1, a2, b, c, k, mark;
};

/* Threads 1 to 3 of process 1, by tid. */
static const struct prof_labels thread[] = {
    [1] = {.pid = 1, .tid = 1, .thread_name = "main"},
    [2] = {.pid = 1, .tid = 2, .thread_name = "worker"},
    [3] = {.pid = 1, .tid = 3, .thread_name = "worker"},
};

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	assert_non_null(fx);
	fx->p = profile_new();
	assert_non_null(fx->p);
	/* A on two lines is one function. */
	fx->a1 = pb_py(fx->p, "A", "x.py", 1, 0);
	fx->a2 = pb_py(fx->p, "A", "x.py", 2, 0);
	fx->b = pb_py(fx->p, "B", "x.py", 10, 0);
	fx->c = pb_py(fx->p, "C", "y.py", 20, 0);
	fx->k = pb_frame(fx->p,
			 (struct prof_frame){.name = "do_syscall_64", .kind = PROF_FRAME_KERNEL});
	fx->mark =
	    pb_frame(fx->p, (struct prof_frame){.name = "[truncated]", .kind = PROF_FRAME_MARKER});
	/* Root first. */
	pb_add(fx->p, &thread[1], 3, 3, fx->c, fx->b, fx->a1);
	pb_add(fx->p, &thread[2], 1, 3, fx->c, fx->b, fx->a2);
	pb_add(fx->p, &thread[1], 2, 3, fx->c, fx->b, fx->b);  /* recursion */
	pb_add(fx->p, &thread[2], 4, 3, fx->c, fx->a1, fx->k); /* in a system call under A */
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	profile_free(fx->p);
	free(fx);
	return 0;
}

static const struct top_row *row(const struct topstats *ts, const char *name)
{
	const struct top_row *const *rows;
	size_t n = topstats_rows(ts, &rows);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(rows[i]->name, name))
			return rows[i];
	return NULL;
}

static void test_own_and_total(void **state)
{
	struct fixture *fx = *state;
	struct topstats *ts = topstats_new(0);
	const struct top_row *const *rows;
	assert_non_null(ts);

	assert_int_equal(topstats_compute(ts, fx->p, 0, TOP_SORT_OWN), 0);
	assert_int_equal(topstats_view_samples(ts), 10);
	assert_int_equal(topstats_window_samples(ts), 10);
	assert_int_equal(topstats_rows(ts, &rows), 3);
	/* A: the leaf of 3 + 1 + 4 (the kernel frame does not count). */
	assert_int_equal(row(ts, "A")->own, 8);
	assert_int_equal(row(ts, "A")->total, 8);
	assert_string_equal(row(ts, "A")->file, "x.py");
	/* B: once per sample, recursion or not. */
	assert_int_equal(row(ts, "B")->own, 2);
	assert_int_equal(row(ts, "B")->total, 6);
	assert_int_equal(row(ts, "C")->own, 0);
	assert_int_equal(row(ts, "C")->total, 10);
	assert_null(row(ts, "do_syscall_64"));
	assert_string_equal(rows[0]->name, "A");
	assert_string_equal(rows[1]->name, "B");
	assert_string_equal(rows[2]->name, "C");

	assert_int_equal(topstats_compute(ts, fx->p, 0, TOP_SORT_TOTAL), 0);
	assert_int_equal(topstats_rows(ts, &rows), 3);
	assert_string_equal(rows[0]->name, "C");
	assert_string_equal(rows[1]->name, "A");
	assert_string_equal(rows[2]->name, "B");

	const struct top_thread *th;
	assert_int_equal(topstats_threads(ts, &th), 2);
	assert_int_equal(th[0].tid, 1);
	assert_int_equal(th[0].samples, 5);
	assert_string_equal(th[0].name, "main");
	assert_int_equal(th[1].tid, 2);
	assert_int_equal(th[1].samples, 5);
	topstats_free(ts);
}

static void test_thread_filter(void **state)
{
	struct fixture *fx = *state;
	struct topstats *ts = topstats_new(0);
	assert_non_null(ts);

	assert_int_equal(topstats_compute(ts, fx->p, 1, TOP_SORT_OWN), 0);
	assert_int_equal(topstats_view_samples(ts), 5);
	assert_int_equal(topstats_window_samples(ts), 10);
	assert_int_equal(row(ts, "A")->own, 3);
	assert_int_equal(row(ts, "B")->own, 2);
	assert_int_equal(row(ts, "B")->total, 5);
	assert_int_equal(row(ts, "C")->total, 5);
	/* Every thread is still listed, for the next filter. */
	const struct top_thread *th;
	assert_int_equal(topstats_threads(ts, &th), 2);

	/* A thread with nothing in view: no rows. */
	const struct top_row *const *rows;
	assert_int_equal(topstats_compute(ts, fx->p, 99, TOP_SORT_OWN), 0);
	assert_int_equal(topstats_rows(ts, &rows), 0);
	assert_int_equal(topstats_view_samples(ts), 0);
	topstats_free(ts);
}

static void test_markers_are_rows(void **state)
{
	struct fixture *fx = *state;
	struct topstats *ts = topstats_new(0);
	assert_non_null(ts);
	pb_add(fx->p, &thread[3], 5, 2, fx->mark, fx->c);
	assert_int_equal(topstats_compute(ts, fx->p, 3, TOP_SORT_OWN), 0);
	assert_int_equal(row(ts, "C")->own, 5);
	assert_int_equal(row(ts, "[truncated]")->total, 5);
	assert_null(row(ts, "[truncated]")->file);
	topstats_free(ts);
}

/* Native code has rows of its own, by function and module: a C leaf owns
 * its samples, whatever address in it they hit, and the Python function
 * that called it keeps the total. Unnamed code is one row per module. */
static void test_native_rows(void **state)
{
	struct fixture *fx = *state;
	struct topstats *ts = topstats_new(0);
	assert_non_null(ts);
	const char *libpy = "/usr/lib/libpython3.12.so.1.0", *libz = "/usr/lib/libz.so.1";
	uint32_t m1 = pb_frame(fx->p, (struct prof_frame){.name = "sre_ucs1_match",
							  .module = libpy,
							  .addr = 0x34fc94,
							  .kind = PROF_FRAME_NATIVE});
	uint32_t m2 = pb_frame(fx->p, (struct prof_frame){.name = "sre_ucs1_match",
							  .module = libpy,
							  .addr = 0x34fd00,
							  .kind = PROF_FRAME_NATIVE});
	/* The same name in another module is another function. */
	uint32_t other = pb_frame(fx->p, (struct prof_frame){.name = "sre_ucs1_match",
							     .module = libz,
							     .addr = 0x100,
							     .kind = PROF_FRAME_NATIVE});
	uint32_t z1 = pb_frame(fx->p, (struct prof_frame){.name = "libz.so.1+0x10764",
							  .module = libz,
							  .addr = 0x10764,
							  .kind = PROF_FRAME_NATIVE});
	uint32_t z2 = pb_frame(fx->p, (struct prof_frame){.name = "libz.so.1+0x20000",
							  .module = libz,
							  .addr = 0x20000,
							  .kind = PROF_FRAME_NATIVE});
	pb_add(fx->p, &thread[3], 5, 3, fx->c, m1, fx->k);
	pb_add(fx->p, &thread[3], 2, 2, fx->c, m2);
	pb_add(fx->p, &thread[3], 1, 2, fx->c, other);
	pb_add(fx->p, &thread[3], 3, 2, fx->b, z1);
	pb_add(fx->p, &thread[3], 4, 2, fx->b, z2);
	assert_int_equal(topstats_compute(ts, fx->p, 3, TOP_SORT_OWN), 0);

	const struct top_row *const *rows;
	assert_int_equal(topstats_rows(ts, &rows), 5);
	/* [unnamed] (libz) 7, sre_ucs1_match (libpython) 7, ... */
	const struct top_row *m = NULL, *o = NULL, *z = NULL;
	for (size_t i = 0; i < 5; i++) {
		if (rows[i]->module == NULL)
			continue;
		if (!strcmp(rows[i]->name, "[unnamed]"))
			z = rows[i];
		else if (!strcmp(rows[i]->module, libpy))
			m = rows[i];
		else
			o = rows[i];
	}
	assert_non_null(m);
	assert_non_null(o);
	assert_non_null(z);
	assert_int_equal(m->own, 7); /* the kernel frame under it does not count */
	assert_int_equal(m->total, 7);
	assert_string_equal(m->name, "sre_ucs1_match");
	assert_null(m->file);
	assert_int_equal(m->first_line, 0);
	assert_int_equal(o->own, 1);
	assert_string_equal(o->module, libz);
	assert_int_equal(z->own, 7);
	assert_string_equal(z->module, libz);
	/* The Python callers keep their totals and own nothing. */
	assert_int_equal(row(ts, "C")->own, 0);
	assert_int_equal(row(ts, "C")->total, 8);
	assert_int_equal(row(ts, "B")->own, 0);
	assert_int_equal(row(ts, "B")->total, 7);
	assert_null(row(ts, "C")->module);
	topstats_free(ts);
}

static void test_reset(void **state)
{
	struct fixture *fx = *state;
	struct topstats *ts = topstats_new(0);
	const struct top_row *const *rows;
	assert_non_null(ts);

	assert_int_equal(topstats_reset(ts, fx->p), 0);
	assert_int_equal(topstats_compute(ts, fx->p, 0, TOP_SORT_OWN), 0);
	assert_int_equal(topstats_rows(ts, &rows), 0);
	assert_int_equal(topstats_view_samples(ts), 0);
	/* An old stack again, and a new one. */
	pb_add(fx->p, &thread[1], 2, 3, fx->c, fx->b, fx->a1);
	pb_add(fx->p, &thread[2], 1, 2, fx->c, fx->b);
	assert_int_equal(topstats_compute(ts, fx->p, 0, TOP_SORT_OWN), 0);
	assert_int_equal(topstats_view_samples(ts), 3);
	assert_int_equal(row(ts, "A")->own, 2);
	assert_int_equal(row(ts, "B")->own, 1);
	assert_int_equal(row(ts, "C")->total, 3);
	/* Ticks do not move a since-reset view. */
	assert_int_equal(topstats_tick(ts, fx->p), 0);
	assert_int_equal(topstats_compute(ts, fx->p, 0, TOP_SORT_OWN), 0);
	assert_int_equal(topstats_view_samples(ts), 3);
	topstats_free(ts);
}

static void test_sliding_window(void **state)
{
	struct fixture *fx = *state;
	struct topstats *ts = topstats_new(2); /* the last two ticks */
	assert_non_null(ts);

	/* Before the window is full, it reaches back to the start. */
	assert_int_equal(topstats_tick(ts, fx->p), 0);
	assert_int_equal(topstats_compute(ts, fx->p, 0, TOP_SORT_OWN), 0);
	assert_int_equal(topstats_view_samples(ts), 10);
	pb_add(fx->p, &thread[1], 7, 2, fx->c, fx->b);
	assert_int_equal(topstats_tick(ts, fx->p), 0);
	assert_int_equal(topstats_compute(ts, fx->p, 0, TOP_SORT_OWN), 0);
	assert_int_equal(topstats_view_samples(ts), 17);
	/* Third tick: the first tick's snapshot (10 samples) is the base. */
	pb_add(fx->p, &thread[2], 1, 1, fx->c);
	assert_int_equal(topstats_tick(ts, fx->p), 0);
	assert_int_equal(topstats_compute(ts, fx->p, 0, TOP_SORT_OWN), 0);
	assert_int_equal(topstats_view_samples(ts), 8);
	assert_int_equal(row(ts, "B")->own, 7);
	assert_int_equal(row(ts, "C")->own, 1);
	assert_null(row(ts, "A"));
	/* Two more ticks with nothing new: empty. */
	assert_int_equal(topstats_tick(ts, fx->p), 0);
	assert_int_equal(topstats_tick(ts, fx->p), 0);
	assert_int_equal(topstats_compute(ts, fx->p, 0, TOP_SORT_OWN), 0);
	assert_int_equal(topstats_view_samples(ts), 0);
	/* A reset empties the window as well. */
	pb_add(fx->p, &thread[2], 1, 1, fx->c);
	assert_int_equal(topstats_reset(ts, fx->p), 0);
	assert_int_equal(topstats_compute(ts, fx->p, 0, TOP_SORT_OWN), 0);
	assert_int_equal(topstats_view_samples(ts), 0);
	topstats_free(ts);
	topstats_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_own_and_total, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_thread_filter, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_markers_are_rows, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_native_rows, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reset, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sliding_window, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
