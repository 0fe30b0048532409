/* test_log.c - unit tests for the diagnostics (log.c) and the agent's event
 * log (agentlog.c): lines written from several threads at once each arrive
 * whole, and a message too long for one line is cut to one line. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/agentlog.h"
#include "util/log.h"

#define NTHREADS 4
#define NLINES 2000

/* Captures what is written to fd 2 between capture_begin and capture_end in
 * a temporary file. */
struct capture {
	int saved;
	int fd;
};

static void capture_begin(struct capture *c)
{
	char path[] = "/tmp/taipan-test-log-XXXXXX";
	c->fd = mkstemp(path);
	assert_true(c->fd >= 0);
	unlink(path);
	c->saved = dup(STDERR_FILENO);
	assert_true(c->saved >= 0);
	assert_int_equal(dup2(c->fd, STDERR_FILENO), STDERR_FILENO);
}

/* Restores fd 2 and returns what was written, NUL-terminated. */
static char *capture_end(struct capture *c)
{
	assert_int_equal(dup2(c->saved, STDERR_FILENO), STDERR_FILENO);
	close(c->saved);
	off_t len = lseek(c->fd, 0, SEEK_END);
	assert_true(len >= 0);
	char *text = malloc((size_t)len + 1);
	assert_non_null(text);
	assert_int_equal(pread(c->fd, text, (size_t)len, 0), len);
	text[len] = 0;
	close(c->fd);
	return text;
}

/* Every thread writes the same long padding, so that a line written in
 * pieces has room to be split by another. */
static const char pad[] = "................................................................"
			  "................................................................";

struct writer {
	int id;
	bool agent; /* agentlog() rather than log_info() */
	pthread_barrier_t *start;
};

static void *write_lines(void *arg)
{
	const struct writer *w = arg;
	pthread_barrier_wait(w->start);
	for (int i = 0; i < NLINES; i++) {
		if (w->agent)
			agentlog("thread %d line %d %s", w->id, i, pad);
		else
			log_info("thread %d line %d %s", w->id, i, pad);
	}
	return NULL;
}

/* Checks that text is NTHREADS * NLINES whole lines, each thread's lines in
 * order. A line of agentlog() starts with its timestamp. */
static void check_lines(char *text, const bool *agent)
{
	int next[NTHREADS] = {0};
	int nlines = 0;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int id = -1, i = -1, used = 0;
		const char *msg = strstr(line, "taipan: ");
		if (!msg || sscanf(msg, "taipan: thread %d line %d %n", &id, &i, &used) != 2 ||
		    id < 0 || id >= NTHREADS) {
			print_error("not a whole line: \"%s\"\n", line);
			fail();
		}
		/* Only a timestamp before the message, and only for agentlog. */
		assert_true(agent[id] ? msg - line == 25 : msg == line);
		assert_string_equal(msg + used, pad);
		assert_int_equal(i, next[id]);
		next[id]++;
		nlines++;
	}
	assert_int_equal(nlines, NTHREADS * NLINES);
}

static void run_writers(const bool *agent)
{
	pthread_t t[NTHREADS];
	struct writer w[NTHREADS];
	pthread_barrier_t start;
	struct capture c;

	assert_int_equal(pthread_barrier_init(&start, NULL, NTHREADS), 0);
	capture_begin(&c);
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct writer){.id = i, .agent = agent[i], .start = &start};
		assert_int_equal(pthread_create(&t[i], NULL, write_lines, &w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	char *text = capture_end(&c);
	pthread_barrier_destroy(&start);
	check_lines(text, agent);
	free(text);
}

static void test_log_lines_whole(void **state)
{
	const bool agent[NTHREADS] = {false, false, false, false};
	(void)state;
	log_set_level(LOG_NORMAL);
	run_writers(agent);
}

/* The agent: its event lines and the session's warnings, on the same fd. */
static void test_agentlog_and_log_lines_whole(void **state)
{
	const bool agent[NTHREADS] = {true, false, true, false};
	(void)state;
	log_set_level(LOG_NORMAL);
	run_writers(agent);
}

static void test_long_message_cut_to_one_line(void **state)
{
	struct capture c;
	size_t len = 10000;
	char *big = malloc(len + 1);
	(void)state;

	assert_non_null(big);
	memset(big, 'x', len);
	big[len] = 0;
	log_set_level(LOG_NORMAL);
	capture_begin(&c);
	log_warn("%s", big);
	log_info("after");
	char *text = capture_end(&c);
	char *nl = strchr(text, '\n');
	assert_non_null(nl);
	assert_true(strncmp(text, "taipan: warning: xxx", 20) == 0);
	assert_true((size_t)(nl + 1 - text) <= 4096);
	assert_string_equal(nl + 1, "taipan: after\n");
	free(text);
	free(big);
}

/* A name the target chose arrives as text: one line, nothing for the
 * terminal to act on. */
static void test_names_escaped(void **state)
{
	struct capture c;
	(void)state;

	log_set_level(LOG_NORMAL);
	capture_begin(&c);
	log_error("pid 4242 (%s): %s", "\x1b]0;pwned\x07", "a\nb\\c\xc2\x9b");
	char *text = capture_end(&c);
	assert_string_equal(text,
			    "taipan: error: pid 4242 (\\x1b]0;pwned\\x07): a\\x0ab\\\\c\\u009b\n");
	free(text);
}

/* The agent's log (timestamped, to its file or the journal) escapes the
 * same way: a name a target chose cannot forge a line or a control
 * sequence there either. */
static void test_agentlog_escaped(void **state)
{
	struct capture c;
	(void)state;

	capture_begin(&c);
	agentlog("refused pid %d (%s)", 7, "\x1b[2J\nFile \"/etc/shadow\"");
	char *text = capture_end(&c);
	const char *msg = strstr(text, " taipan: ");
	assert_non_null(msg);
	assert_string_equal(msg, " taipan: refused pid 7 (\\x1b[2J\\x0aFile \"/etc/shadow\")\n");
	assert_null(strchr(text, '\x1b'));
	free(text);
}

/* Quiet drops all but errors; verbose adds debug lines. */
static void test_levels(void **state)
{
	struct capture c;
	(void)state;

	capture_begin(&c);
	log_set_level(LOG_QUIET);
	log_info("info quiet");
	log_warn("warn quiet");
	log_debug("debug quiet");
	log_error("error %d", 1);
	log_set_level(LOG_NORMAL);
	log_debug("debug normal");
	log_warn("warn normal");
	log_set_level(LOG_VERBOSE);
	log_debug("debug verbose");
	log_set_level(LOG_NORMAL);
	char *text = capture_end(&c);
	assert_string_equal(text, "taipan: error: error 1\n"
				  "taipan: warning: warn normal\n"
				  "taipan: debug verbose\n");
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_log_lines_whole),
	    cmocka_unit_test(test_agentlog_and_log_lines_whole),
	    cmocka_unit_test(test_long_message_cut_to_one_line),
	    cmocka_unit_test(test_levels),
	    cmocka_unit_test(test_names_escaped),
	    cmocka_unit_test(test_agentlog_escaped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
