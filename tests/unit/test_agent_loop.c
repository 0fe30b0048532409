/* test_agent_loop.c - unit tests for the agent's loop and its sinks
 * (agent/agent.c, agent/sink.h), over a session with a fake sampler: what
 * the loop asks of each sink and in what order, the cut once a turn, the
 * windows, and the keys of GET /stats. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent/agent.h"
#include "agent/push.h"
#include "core/session.h"
#include "core/walkerr.h"
/* Only its sampler is used here, not its helpers for samples. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "fake_sampler.h"
#pragma GCC diagnostic pop

/* A sink that writes down what it is asked, one letter a call. */
struct rec {
	char calls[64];
	size_t n;
	const char *key; /* its /stats key */
	int pieces;
	double end; /* next_end */
	bool cut_in_take;
	char *log; /* shared by the sinks: "A.stop B.stop" order */
};

static void note(struct rec *r, char c)
{
	if (r->n + 1 < sizeof(r->calls))
		r->calls[r->n++] = c;
}

static void rec_window(void *impl, const struct profile *w)
{
	(void)w;
	note(impl, 'w');
}

static void rec_take(void *impl, double now, struct sink_loop *l)
{
	struct rec *r = impl;
	(void)now;
	note(r, 't');
	if (r->cut_in_take) {
		/* A span that starts now: the loop cuts, once a turn. */
		l->cut(l);
		l->cut(l);
	}
}

static void rec_piece(void *impl, const struct profile *piece, struct sink_loop *l)
{
	struct rec *r = impl;
	(void)piece, (void)l;
	note(r, 'p');
	r->pieces++;
}

static double rec_next_end(void *impl)
{
	return ((struct rec *)impl)->end;
}

static void rec_due(void *impl, double now, bool stopping)
{
	(void)now;
	note(impl, stopping ? 'D' : 'd');
}

static int rec_stats(void *impl, json_t *o)
{
	return json_object_set_new(o, ((struct rec *)impl)->key, json_integer(1));
}

static void rec_totals(void *impl, char *words, size_t wlen, char *line, size_t llen)
{
	struct rec *r = impl;
	snprintf(words, wlen, ", %s words", r->key);
	snprintf(line, llen, "%s line", r->key);
}

static void rec_stop(void *impl, bool drain)
{
	struct rec *r = impl;
	note(r, drain ? 'S' : 's');
	strcat(r->log, r->key);
}

static void rec_free(void *impl)
{
	note(impl, 'f');
}

static const struct sink_ops rec_ops = {
    .window = rec_window,
    .take = rec_take,
    .piece = rec_piece,
    .next_end = rec_next_end,
    .due = rec_due,
    .stats = rec_stats,
    .totals = rec_totals,
    .stop = rec_stop,
    .free = rec_free,
};

static volatile sig_atomic_t stop_signal, hup;

struct fixture {
	struct session *s;
	struct agent *a;
	char log[64];
};

static int setup(void **state)
{
	static struct fixture fx;
	char err[512];
	memset(&fx, 0, sizeof(fx));
	struct session_opts o = {.rate_hz = 100, .system_wide = true, .open_sampler = fake_open};
	assert_int_equal(session_new(&o, &fx.s, err, sizeof(err)), 0);
	assert_int_equal(session_start(fx.s, err, sizeof(err)), 0);
	struct agent_opts ao = {
	    .window = 15, .rate = 100, .stats = true, .stop_signal = &stop_signal, .hup = &hup};
	assert_int_equal(agent_new(&ao, fx.s, &fx.a), 0);
	stop_signal = hup = 0;
	*state = &fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	agent_free(fx->a);
	session_free(fx->s);
	return 0;
}

/* A stop signal: one last turn, in which everything is due, then the sinks
 * stop, the last added first. */
static void test_last_turn(void **state)
{
	struct fixture *fx = *state;
	struct rec a = {.key = "a_key", .end = INFINITY, .log = fx->log};
	struct rec b = {.key = "b_key", .end = INFINITY, .cut_in_take = true, .log = fx->log};
	assert_int_equal(agent_add_sink(fx->a, (struct sink){.ops = &rec_ops, .impl = &a}), 0);
	assert_int_equal(agent_add_sink(fx->a, (struct sink){.ops = &rec_ops, .impl = &b}), 0);

	stop_signal = SIGTERM;
	assert_int_equal(agent_run(fx->a), 0);
	/* The stopping turn cuts first (the window closes): one piece each,
	 * however often a sink asks for a cut in it. The window has no
	 * samples: given to no sink. */
	assert_string_equal(a.calls, "ptDS");
	assert_string_equal(b.calls, "ptDS");
	assert_int_equal(a.pieces, 1);
	assert_string_equal(fx->log, "b_keya_key");

	char *text = agent_stats_json(fx->a);
	assert_non_null(text);
	json_t *o = json_loads(text, 0, NULL);
	assert_non_null(o);
	assert_int_equal(json_integer_value(json_object_get(o, "windows")), 1);
	assert_int_equal(json_integer_value(json_object_get(o, "windows_empty")), 1);
	assert_int_equal(json_integer_value(json_object_get(o, "rate_hz")), 100);
	json_decref(o);
	/* The sinks' keys after the agent's, in the order they were added. */
	char *ka = strstr(text, "\"a_key\""), *kb = strstr(text, "\"b_key\"");
	assert_true(ka && kb && ka < kb && strstr(text, "\"windows_empty\"") < ka);
	free(text);
}

/* GET /stats: every key the agent has always had, in their order, with
 * the pushes' (or their zeros without --push) after the agent's. */
static void test_stats_keys(void **state)
{
	static const char *const keys[] = {
	    "uptime_seconds",
	    "rate_hz",
	    "window_seconds",
	    "samples",
	    "lost_samples",
	    "lost_ring_full",
	    "lost_unknown_process",
	    "truncated_stacks",
	    "task_reads",
	    "task_read_failures",
	    "task_read_ms",
	    "task_awaits",
	    "walk_errors",
	    "native_walks",
	    "native_merge_failures",
	    "native_jit",
	    "native_new_code",
	    "native_nowhere",
	    "native_table_files",
	    "native_table_bytes",
	    "native_rules",
	    "memory_limit_bytes",
	    "memory_used_bytes",
	    "memory_peak_bytes",
	    "memory_refused",
	    "native_fds",
	    "processes_tracked",
	    "processes_seen",
	    "processes_unsupported",
	    "windows",
	    "windows_empty",
	    "push_enabled",
	    "windows_pushed",
	    "push_failures",
	    "dropped_windows",
	    "push_backlog",
	};
	struct fixture *fx = *state;
	struct sink push;
	char err[256];
	assert_int_equal(push_sink_new(NULL, &push, err, sizeof(err)), 0);
	assert_null(push.ops->window); /* no --push: no windows aggregated */
	assert_int_equal(agent_add_sink(fx->a, push), 0);

	char *text = agent_stats_json(fx->a);
	assert_non_null(text);
	json_t *o = json_loads(text, JSON_DECODE_ANY, NULL);
	assert_non_null(o);
	assert_int_equal(json_object_size(o), sizeof(keys) / sizeof(keys[0]));
	const char *at = text;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		char quoted[64];
		snprintf(quoted, sizeof(quoted), "\"%s\":", keys[i]);
		const char *k = strstr(at, quoted);
		if (!k)
			fail_msg("/stats: %s missing or out of order in %s", keys[i], text);
		at = k + 1;
	}
	assert_true(json_is_false(json_object_get(o, "push_enabled")));
	/* A key a walk-error id, but for the ids between two ranges' rows. */
	json_t *we = json_object_get(o, "walk_errors");
	assert_true(json_is_object(we));
	size_t known = 0;
	for (unsigned int i = 1; i < TP_ERR__COUNT; i++)
		known += walkerr_known(i);
	assert_int_equal(json_object_size(we), known);
	assert_null(json_object_get(we, "unknown"));
	assert_non_null(json_object_get(we, "no_fsbase"));
	assert_non_null(json_object_get(we, "cframe"));
	assert_non_null(json_object_get(json_object_get(o, "native_walks"), "ok"));
	json_decref(o);
	free(text);
}

static void test_too_many_sinks(void **state)
{
	struct fixture *fx = *state;
	char log[8] = "";
	struct rec r[AGENT_MAX_SINKS + 1];
	memset(r, 0, sizeof(r));
	for (int i = 0; i <= AGENT_MAX_SINKS; i++) {
		r[i].key = "k";
		r[i].log = log;
		int want = i < AGENT_MAX_SINKS ? 0 : -ENOSPC;
		assert_int_equal(
		    agent_add_sink(fx->a, (struct sink){.ops = &rec_ops, .impl = &r[i]}), want);
	}
	/* The one refused is freed at once: the agent owned it. */
	assert_string_equal(r[AGENT_MAX_SINKS].calls, "f");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_last_turn, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stats_keys, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_too_many_sinks, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
