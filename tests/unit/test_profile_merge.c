/* test_profile_merge.c - unit tests for profile_merge: the merged profile
 * reads as if one profile had aggregated both, frames are re-interned,
 * time spans join, src stays as it was, and every allocation failure leaves
 * a consistent profile and no leak. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "profile/profile.h"
#include "profile_build.h"

/* Allocation failures on demand: see alloc_inject.h. */
#include "alloc_inject.h"

/* --- profiles to merge ------------------------------------------------------------ */

/* Three threads, each of its own process. */
#define THREAD(p, name)                                                                            \
	{                                                                                          \
		.pid = (p), .tid = (p) + 1, .thread_name = (name), .comm = "python3",              \
		.runtime = "python", .runtime_version = "3.12.1",                                  \
		.version_alias = "python_version", .lock_name = "gil",                             \
		.cgroup = "/system.slice/app.service"                                              \
	}
static const struct prof_labels main_100 = THREAD(100, "main");
static const struct prof_labels w1_200 = THREAD(200, "w-1");
static const struct prof_labels w2_300 = THREAD(300, "w-2");

/* Interned in a different order than b's, so that ids differ. */
static struct profile *profile_a(void)
{
	struct profile *p = profile_new();
	assert_non_null(p);
	uint32_t main_ = pb_py(p, "main", "app.py", 10, 1);
	uint32_t work = pb_py(p, "work", "app.py", 20, 1);
	uint32_t rd = pb_frame(p, (struct prof_frame){.name = "do_syscall_64",
						      .first_line = 1,
						      .kind = PROF_FRAME_KERNEL,
						      .module = "[kernel]"});
	pb_add(p, &main_100, 5, 2, main_, work);
	pb_add(p, &main_100, 2, 3, main_, work, rd);
	pb_add(p, &w1_200, 1, 1, main_);
	profile_set_timing(p, 10000000, 1000000000000ULL, 2000000000ULL);
	return p;
}

static struct profile *profile_b(void)
{
	struct profile *p = profile_new();
	assert_non_null(p);
	uint32_t other = pb_py(p, "other", "lib.py", 3, 1);
	uint32_t work = pb_py(p, "work", "app.py", 20, 1);
	uint32_t main_ = pb_py(p, "main", "app.py", 10, 1);
	uint32_t work21 = pb_py(p, "work", "app.py", 21, 1);
	pb_add(p, &main_100, 3, 2, main_, work); /* the same stack and labels as in a */
	pb_add(p, &w1_200, 4, 2, main_, work21); /* a new line */
	pb_add(p, &main_100, 7, 2, main_, other);
	pb_add(p, &w2_300, 1, 0); /* no frames */
	profile_set_timing(p, 10000000, 1000000000000ULL + 2000000000ULL, 1500000000ULL);
	return p;
}

/* A profile as sorted text, one "labels|frames count" line per sample, to
 * compare profiles whatever their ids and order. */
static char *canon(const struct profile *p)
{
	size_t n = profile_sample_count(p);
	char **lines = calloc(n ? n : 1, sizeof(*lines));
	assert_non_null(lines);
	size_t total = 1;
	for (size_t i = 0; i < n; i++) {
		const struct prof_sample *s = profile_sample(p, i);
		char buf[1024];
		int o =
		    snprintf(buf, sizeof(buf), "%u/%u/%s/%s/%s/%s|", s->labels.pid, s->labels.tid,
			     s->labels.thread_name, s->labels.comm, s->labels.runtime_version,
			     s->labels.cgroup ? s->labels.cgroup : "-");
		for (uint32_t j = 0; j < s->nframes; j++) {
			const struct prof_frame *f = profile_frame(p, s->frames[j]);
			o += snprintf(buf + o, sizeof(buf) - (size_t)o, "%s@%s:%d/%d/%s;", f->name,
				      f->file ? f->file : "-", f->line, (int)f->kind,
				      f->module ? f->module : "-");
		}
		snprintf(buf + o, sizeof(buf) - (size_t)o, " %llu\n", (unsigned long long)s->count);
		lines[i] = strdup(buf);
		assert_non_null(lines[i]);
		total += strlen(buf);
	}
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && strcmp(lines[j - 1], lines[j]) > 0; j--) {
			char *t = lines[j];
			lines[j] = lines[j - 1];
			lines[j - 1] = t;
		}
	char *out = calloc(1, total);
	assert_non_null(out);
	for (size_t i = 0; i < n; i++) {
		strcat(out, lines[i]);
		free(lines[i]);
	}
	free(lines);
	return out;
}

static uint64_t sum_counts(const struct profile *p)
{
	uint64_t t = 0;
	for (size_t i = 0; i < profile_sample_count(p); i++)
		t += profile_sample(p, i)->count;
	return t;
}

/* --- tests ------------------------------------------------------------------------ */

static void test_merge_adds_up(void **state)
{
	(void)state;
	struct profile *a = profile_a(), *b = profile_b();
	char *b_before = canon(b);

	assert_int_equal(profile_merge(a, b), 0);
	/* What one profile would hold had it seen every sample. */
	struct profile *want = profile_a();
	uint32_t other = pb_py(want, "other", "lib.py", 3, 1);
	uint32_t work = pb_py(want, "work", "app.py", 20, 1);
	uint32_t main_ = pb_py(want, "main", "app.py", 10, 1);
	uint32_t work21 = pb_py(want, "work", "app.py", 21, 1);
	pb_add(want, &main_100, 3, 2, main_, work);
	pb_add(want, &w1_200, 4, 2, main_, work21);
	pb_add(want, &main_100, 7, 2, main_, other);
	pb_add(want, &w2_300, 1, 0);

	char *got = canon(a), *expect = canon(want), *b_after = canon(b);
	assert_string_equal(got, expect);
	assert_int_equal(profile_total(a), 8 + 15);
	assert_int_equal(profile_total(a), sum_counts(a));
	/* Frames are shared, not copied: main, work:20, do_syscall_64, other, work:21. */
	assert_int_equal(profile_frame_count(a), 5);
	assert_int_equal(profile_sample_count(a), 6);
	/* src untouched. */
	assert_string_equal(b_after, b_before);
	assert_int_equal(profile_total(b), 15);
	/* Spans join: a's 2 s, then b's 1.5 s right after. */
	assert_int_equal(profile_start_ns(a), 1000000000000ULL);
	assert_int_equal(profile_duration_ns(a), 3500000000ULL);
	assert_int_equal(profile_period_ns(a), 10000000);

	free(got);
	free(expect);
	free(b_before);
	free(b_after);
	profile_free(want);
	profile_free(a);
	profile_free(b);
}

static void test_merge_into_empty(void **state)
{
	(void)state;
	struct profile *dst = profile_new(), *b = profile_b();
	assert_non_null(dst);
	assert_int_equal(profile_merge(dst, b), 0);
	char *got = canon(dst), *want = canon(b);
	assert_string_equal(got, want);
	assert_int_equal(profile_start_ns(dst), profile_start_ns(b));
	assert_int_equal(profile_duration_ns(dst), profile_duration_ns(b));
	assert_int_equal(profile_period_ns(dst), profile_period_ns(b));
	/* Twice: the counts double, nothing else changes. */
	assert_int_equal(profile_merge(dst, b), 0);
	assert_int_equal(profile_total(dst), 2 * profile_total(b));
	assert_int_equal(profile_sample_count(dst), profile_sample_count(b));
	assert_int_equal(profile_frame_count(dst), profile_frame_count(b));
	free(got);
	free(want);
	profile_free(dst);
	profile_free(b);
}

static void test_merge_spans_and_edges(void **state)
{
	(void)state;
	struct profile *a = profile_a(), *empty = profile_new();
	assert_non_null(empty);
	/* An empty profile without a span changes nothing. */
	assert_int_equal(profile_merge(a, empty), 0);
	assert_int_equal(profile_total(a), 8);
	assert_int_equal(profile_duration_ns(a), 2000000000ULL);
	/* An earlier span inside: the start moves back, the end stays. */
	profile_set_timing(empty, 0, 1000000000000ULL - 500000000ULL, 1000000000ULL);
	assert_int_equal(profile_merge(a, empty), 0);
	assert_int_equal(profile_start_ns(a), 1000000000000ULL - 500000000ULL);
	assert_int_equal(profile_duration_ns(a), 2500000000ULL);
	assert_int_equal(profile_period_ns(a), 10000000); /* dst's kept */
	/* Bad arguments. */
	assert_int_equal(profile_merge(a, a), -EINVAL);
	assert_int_equal(profile_merge(NULL, a), -EINVAL);
	assert_int_equal(profile_merge(a, NULL), -EINVAL);
	profile_free(a);
	profile_free(empty);
}

static void test_merge_alloc_failures(void **state)
{
	(void)state;
#ifndef INJECT_ALLOC_FAILURES
	print_message("skipping: allocation failures cannot be injected under ASan\n");
	skip();
#else
	struct profile *b = profile_b();
	long n;
	for (n = 0; n < 10000; n++) {
		alloc_failed = 0;
		alloc_live = 0;
		alloc_counting = true;
		struct profile *a = profile_a();
		uint64_t start = profile_start_ns(a), dur = profile_duration_ns(a);
		alloc_countdown = n;
		int rc = profile_merge(a, b);
		alloc_countdown = -1;
		if (!alloc_failed) {
			assert_int_equal(rc, 0);
			assert_int_equal(profile_total(a), 23);
			profile_free(a);
			alloc_counting = false;
			assert_int_equal(alloc_live, 0);
			break;
		}
		assert_int_equal(rc, -ENOMEM);
		/* Whatever got in is consistent; the span waits for success. */
		assert_int_equal(profile_total(a), sum_counts(a));
		assert_true(profile_total(a) >= 8 && profile_total(a) < 23);
		assert_int_equal(profile_start_ns(a), start);
		assert_int_equal(profile_duration_ns(a), dur);
		profile_free(a);
		alloc_counting = false;
		assert_int_equal(alloc_live, 0);
	}
	assert_true(n > 5); /* the failures did hit the merge */
	profile_free(b);
#endif
}

/* --- events (profile_keep_events) ------------------------------------------------- */

/* Adds count (and off_ns) to the stack ids[0..n) of p under lb at at_ns:
 * its sample's index. */
static size_t add_timed(struct profile *p, const struct prof_labels *lb, const uint32_t *ids,
			uint32_t n, uint64_t count, uint64_t off_ns, uint64_t at_ns)
{
	size_t idx;
	assert_int_equal(profile_add_at(p, ids, n, lb, 0, 0, &idx), 0);
	profile_bump_at(p, idx, count, off_ns, at_ns);
	return idx;
}

/* Each add is an event of its sample, in order, with its time; their sums
 * are the sample's values. Past the limit an add goes into its sample's
 * latest event, but a sample's first is always kept. */
static void test_events_kept_and_bounded(void **state)
{
	(void)state;
	struct profile *p = profile_new();
	assert_non_null(p);
	uint32_t f = pb_py(p, "work", "app.py", 20, 1);
	uint32_t g = pb_py(p, "other", "app.py", 30, 1);
	/* An add before events are kept is no event. */
	size_t before = add_timed(p, &main_100, &g, 1, 3, 0, 50);
	assert_int_equal(profile_sample(p, before)->nevents, 0);
	profile_keep_events(p, 3);
	assert_true(profile_keeps_events(p));
	size_t a = add_timed(p, &main_100, &f, 1, 1, 0, 100);
	add_timed(p, &main_100, &f, 1, 1, 500, 200);
	profile_bump(p, a, 2, 0); /* untimed */
	/* The limit (3) is reached: this one goes into the latest event. */
	add_timed(p, &main_100, &f, 1, 1, 7, 400);
	/* A new sample still keeps its first; then it merges too. */
	size_t b = add_timed(p, &w1_200, &f, 1, 1, 0, 300);
	add_timed(p, &w1_200, &f, 1, 4, 0, 310);
	/* Nothing added is no event. */
	profile_bump_at(p, b, 0, 0, 999);
	/* The sample that had values before it could keep events keeps none. */
	profile_bump_at(p, before, 1, 0, 600);

	const struct prof_sample *s = profile_sample(p, a);
	assert_int_equal(s->count, 5);
	assert_int_equal(s->off_ns, 507);
	assert_int_equal(s->nevents, 3);
	assert_int_equal(s->events[0].at_ns, 100);
	assert_int_equal(s->events[0].count, 1);
	assert_int_equal(s->events[1].at_ns, 200);
	assert_int_equal(s->events[1].off_ns, 500);
	assert_int_equal(s->events[2].at_ns, 0);
	assert_int_equal(s->events[2].count, 3); /* 2, and the merged 1 */
	assert_int_equal(s->events[2].off_ns, 7);
	s = profile_sample(p, b);
	assert_int_equal(s->count, 5);
	assert_int_equal(s->nevents, 1);
	assert_int_equal(s->events[0].at_ns, 300);
	assert_int_equal(s->events[0].count, 5);
	assert_int_equal(profile_sample(p, before)->nevents, 0);
	assert_int_equal(profile_sample(p, before)->count, 4);
	assert_int_equal(profile_events_merged(p), 2);
	assert_int_equal(profile_total(p), 14);
	profile_free(p);
}

/* A merge carries src's events, untimed ones at src's start, into a dst
 * that keeps them; the CPU view carries those of samples on the CPU. */
static void test_events_merged_and_viewed(void **state)
{
	(void)state;
	struct profile *src = profile_new(), *dst = profile_new();
	assert_non_null(src);
	assert_non_null(dst);
	profile_keep_events(src, 100);
	profile_keep_events(dst, 100);
	profile_set_timing(src, 10, 5000, 1000);
	profile_set_mode(src, PROF_MODE_WALL);
	uint32_t f = pb_py(src, "work", "app.py", 20, 1);
	struct prof_labels run = main_100, sleep = main_100;
	run.state = PROF_STATE_RUNNING;
	sleep.state = PROF_STATE_SLEEPING;
	add_timed(src, &run, &f, 1, 1, 0, 5100);
	add_timed(src, &run, &f, 1, 2, 0, 0);
	add_timed(src, &sleep, &f, 1, 1, 300, 5200);
	assert_int_equal(profile_merge(dst, src), 0);
	assert_int_equal(profile_merge(dst, src), 0);
	assert_int_equal(profile_sample_count(dst), 2);
	for (size_t i = 0; i < 2; i++) {
		const struct prof_sample *s = profile_sample(dst, i);
		if (s->labels.state == PROF_STATE_RUNNING) {
			assert_int_equal(s->nevents, 4);
			assert_int_equal(s->events[0].at_ns, 5100);
			assert_int_equal(s->events[1].at_ns, 5000);
			assert_int_equal(s->events[1].count, 2);
			assert_int_equal(s->events[2].at_ns, 5100);
			assert_int_equal(s->count, 6);
		} else {
			assert_int_equal(s->nevents, 2);
			assert_int_equal(s->events[1].off_ns, 300);
			assert_int_equal(s->off_ns, 600);
		}
	}
	struct profile *cpu = profile_cpu_view(dst);
	assert_non_null(cpu);
	assert_true(profile_keeps_events(cpu));
	assert_int_equal(profile_sample_count(cpu), 1);
	assert_int_equal(profile_sample(cpu, 0)->nevents, 4);
	assert_int_equal(profile_sample(cpu, 0)->events[3].count, 2);
	/* A dst that keeps no events takes the values only. */
	struct profile *plain = profile_new();
	assert_non_null(plain);
	assert_int_equal(profile_merge(plain, src), 0);
	for (size_t i = 0; i < profile_sample_count(plain); i++)
		assert_int_equal(profile_sample(plain, i)->nevents, 0);
	assert_int_equal(profile_total(plain), 4);
	profile_free(plain);
	profile_free(cpu);
	profile_free(src);
	profile_free(dst);
}

/* Out of memory for an event: the add goes into the sample's latest event,
 * or, for a first, the sample keeps none; the values stay whole. */
static void test_events_alloc_failures(void **state)
{
	(void)state;
#ifndef INJECT_ALLOC_FAILURES
	print_message("skipping: allocation failures cannot be injected under ASan\n");
	skip();
#else
	struct profile *p = profile_new();
	assert_non_null(p);
	profile_keep_events(p, 100);
	uint32_t f = pb_py(p, "work", "app.py", 20, 1);
	uint32_t g = pb_py(p, "other", "app.py", 30, 1);
	size_t a = add_timed(p, &main_100, &f, 1, 1, 0, 100); /* cap 1 */
	size_t b;
	assert_int_equal(profile_add_at(p, &g, 1, &main_100, 0, 0, &b), 0);
	alloc_countdown = 0;
	profile_bump_at(p, a, 1, 0, 200); /* needs room for 2 */
	alloc_countdown = 0;
	profile_bump_at(p, b, 1, 0, 200); /* needs room for 1 */
	alloc_countdown = -1;
	profile_bump_at(p, b, 1, 0, 300);
	assert_int_equal(profile_sample(p, a)->nevents, 1);
	assert_int_equal(profile_sample(p, a)->events[0].count, 2);
	assert_int_equal(profile_sample(p, b)->nevents, 0);
	assert_int_equal(profile_sample(p, b)->count, 2);
	assert_int_equal(profile_events_merged(p), 1);
	profile_free(p);
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_merge_adds_up),
	    cmocka_unit_test(test_merge_into_empty),
	    cmocka_unit_test(test_merge_spans_and_edges),
	    cmocka_unit_test(test_merge_alloc_failures),
	    cmocka_unit_test(test_events_kept_and_bounded),
	    cmocka_unit_test(test_events_merged_and_viewed),
	    cmocka_unit_test(test_events_alloc_failures),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
