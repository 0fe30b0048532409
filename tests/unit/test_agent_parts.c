/* test_agent_parts.c - unit tests for what the agent parses and builds: the
 * Pyroscope ingest name and URL, the retry schedule, --listen and ?seconds=,
 * and the log line. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "agent/agentlog.h"
#include "agent/agentsched.h"
#include "agent/httpd.h"
#include "agent/otlp.h"
#include "agent/push.h"

static void test_app_name(void **state)
{
	char buf[128];
	(void)state;
	assert_int_equal(push_app_name(buf, sizeof(buf), "taipan", "web-1.example"), 0);
	assert_string_equal(buf, "taipan{hostname=web-1.example}");
	/* Characters that would end or split the label set become '_'. */
	assert_int_equal(push_app_name(buf, sizeof(buf), "my_app.cpu-x", "a,b=c{d} e"), 0);
	assert_string_equal(buf, "my_app.cpu-x{hostname=a_b_c_d__e}");
	assert_int_equal(push_app_name(buf, sizeof(buf), "app", NULL), 0);
	assert_string_equal(buf, "app{}");
	assert_int_equal(push_app_name(buf, sizeof(buf), "app", ""), 0);
	assert_string_equal(buf, "app{}");
	/* The application name itself is checked, not repaired. */
	assert_int_equal(push_app_name(buf, sizeof(buf), "my app", "h"), -EINVAL);
	assert_int_equal(push_app_name(buf, sizeof(buf), "app{x=y}", "h"), -EINVAL);
	assert_int_equal(push_app_name(buf, sizeof(buf), "", "h"), -EINVAL);
	assert_int_equal(push_app_name(buf, sizeof(buf), NULL, "h"), -EINVAL);
	char longname[102];
	memset(longname, 'a', 101);
	longname[101] = 0;
	assert_int_equal(push_app_name(buf, sizeof(buf), longname, NULL), -EINVAL);
	longname[100] = 0;
	assert_int_equal(push_app_name(buf, 64, longname, "h"), -ENOSPC);
	/* Exactly enough room, and one byte less. */
	assert_int_equal(push_app_name(buf, sizeof("app{hostname=h}"), "app", "h"), 0);
	assert_int_equal(push_app_name(buf, sizeof("app{hostname=h}") - 1, "app", "h"), -ENOSPC);
}

static void test_check_url(void **state)
{
	(void)state;
	assert_int_equal(push_check_url("http://127.0.0.1:4040"), 0);
	assert_int_equal(push_check_url("https://profiles.example.com/pyroscope/"), 0);
	/* Credentials in the URL: ps shows them. */
	assert_int_equal(push_check_url("http://user:secret@host:4040"), -EPERM);
	assert_int_equal(push_check_url("https://user@host"), -EPERM);
	assert_int_equal(push_check_url("http://user:pa/ss@host"), -EPERM);
	assert_int_equal(push_check_url("ftp://host"), -EINVAL);
	assert_int_equal(push_check_url("host:4040"), -EINVAL);
	assert_int_equal(push_check_url("http://"), -EINVAL);
	assert_int_equal(push_check_url("http:///ingest"), -EINVAL);
	assert_int_equal(push_check_url("http://host/?x=1"), -EINVAL);
	assert_int_equal(push_check_url("http://host/#frag"), -EINVAL);
	assert_int_equal(push_check_url("http://host name"), -EINVAL);
}

static void test_redact_url(void **state)
{
	char buf[64];
	(void)state;
	push_redact_url(buf, sizeof(buf), "http://u:secret@host:4040/x");
	assert_string_equal(buf, "http://***@host:4040/x");
	/* An '@' in the password, or a '/', is hidden too: up to the last '@'. */
	push_redact_url(buf, sizeof(buf), "https://u:se@c/ret@host");
	assert_string_equal(buf, "https://***@host");
	push_redact_url(buf, sizeof(buf), "http://host:4040");
	assert_string_equal(buf, "http://host:4040");
	push_redact_url(buf, sizeof(buf), "no scheme@host");
	assert_string_equal(buf, "no scheme@host");
	push_redact_url(buf, 8, "http://u:secret@host");
	assert_string_equal(buf, "http://");
}

static void test_parse_credentials(void **state)
{
	char *user, *password;
	char a[] = "ingest:pa:ss@word\n", b[] = "nopassword", c[] = ":pw", d[] = "u:p\tq",
	     e[] = "u:\r\n", f[] = "u:p\nsecond line";
	(void)state;
	assert_int_equal(push_parse_credentials(a, &user, &password), 0);
	assert_string_equal(user, "ingest");
	assert_string_equal(password, "pa:ss@word");
	assert_int_equal(push_parse_credentials(b, &user, &password), -EINVAL);
	assert_int_equal(push_parse_credentials(c, &user, &password), -EINVAL);
	assert_int_equal(push_parse_credentials(d, &user, &password), -EINVAL);
	assert_int_equal(push_parse_credentials(e, &user, &password), 0);
	assert_string_equal(user, "u");
	assert_string_equal(password, "");
	assert_int_equal(push_parse_credentials(f, &user, &password), -EINVAL);
}

static void test_ingest_url(void **state)
{
	char buf[512];
	(void)state;
	assert_int_equal(push_ingest_url(buf, sizeof(buf), "http://127.0.0.1:4040",
					 "taipan{hostname=h1}", 1700000000, 1700000015, 100),
			 0);
	assert_string_equal(buf, "http://127.0.0.1:4040/ingest?name=taipan%7Bhostname%3Dh1%7D"
				 "&from=1700000000&until=1700000015&spyName=taipan&sampleRate=100"
				 "&format=pprof");
	/* A prefix is kept, trailing slashes are not. */
	assert_int_equal(
	    push_ingest_url(buf, sizeof(buf), "https://p.example/pyro//", "a.b_c-d{}", 1, 2, 1000),
	    0);
	assert_string_equal(buf, "https://p.example/pyro/ingest?name=a.b_c-d%7B%7D&from=1&until=2"
				 "&spyName=taipan&sampleRate=1000&format=pprof");
	assert_int_equal(push_ingest_url(buf, 20, "http://127.0.0.1:4040", "x{}", 1, 2, 100),
			 -ENOSPC);
}

static void test_backoff_schedule(void **state)
{
	(void)state;
	/* jitter 0.5 is the plain schedule: doubling from 1 s, capped. */
	const double want[] = {1, 2, 4, 8, 16, 30, 30, 30};
	for (unsigned int i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_true(push_backoff(i + 1, 0.5) == want[i]);
	assert_true(push_backoff(1000, 0.5) == PUSH_MAX_BACKOFF);
	assert_true(push_backoff(0, 0.5) == 1.0);
	/* Jitter spreads each step over [0.75, 1.25) of it, never overlapping
	 * the next step's range, so the waits still grow. */
	assert_true(push_backoff(1, 0.0) == 0.75);
	assert_true(push_backoff(1, 0.9999) < 1.25);
	assert_true(push_backoff(2, 0.0) > push_backoff(1, 0.9999));
	assert_true(push_backoff(3, 0.0) > push_backoff(2, 0.9999));
	/* Out-of-range jitter is clamped. */
	assert_true(push_backoff(1, -3.0) == 0.75);
	assert_true(push_backoff(1, 7.0) < 1.25);
	/* The whole retry budget of a window stays bounded: about a minute. */
	double total = 0;
	for (unsigned int i = 1; i < PUSH_MAX_ATTEMPTS; i++)
		total += push_backoff(i, 0.9999);
	assert_true(total < 90);
}

static void test_parse_seconds(void **state)
{
	unsigned int s = 0;
	(void)state;
	assert_int_equal(httpd_parse_seconds(NULL, &s), 0);
	assert_int_equal(s, 30);
	assert_int_equal(httpd_parse_seconds("", &s), 0);
	assert_int_equal(s, 30);
	assert_int_equal(httpd_parse_seconds("1", &s), 0);
	assert_int_equal(s, 1);
	assert_int_equal(httpd_parse_seconds("300", &s), 0);
	assert_int_equal(s, 300);
	assert_int_equal(httpd_parse_seconds("000007", &s), 0);
	assert_int_equal(s, 7);
	const char *bad[] = {"0", "301", "-1", "1.5", "abc", "3s", " 3", "0000007", "99999999999"};
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(httpd_parse_seconds(bad[i], &s), -EINVAL);
}

static void test_parse_listen(void **state)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char text[64];
	(void)state;

	assert_int_equal(httpd_parse_listen("127.0.0.1:9100", &ss, &len), 0);
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(len, sizeof(*a4));
	assert_int_equal(ntohs(a4->sin_port), 9100);
	assert_string_equal(inet_ntop(AF_INET, &a4->sin_addr, text, sizeof(text)), "127.0.0.1");

	assert_int_equal(httpd_parse_listen("localhost:0", &ss, &len), 0);
	assert_string_equal(inet_ntop(AF_INET, &a4->sin_addr, text, sizeof(text)), "127.0.0.1");
	assert_int_equal(ntohs(a4->sin_port), 0);

	assert_int_equal(httpd_parse_listen("0.0.0.0:65535", &ss, &len), 0);
	assert_int_equal(ntohs(a4->sin_port), 65535);

	assert_int_equal(httpd_parse_listen("[::1]:9100", &ss, &len), 0);
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_int_equal(len, sizeof(*a6));
	assert_int_equal(ntohs(a6->sin6_port), 9100);
	assert_string_equal(inet_ntop(AF_INET6, &a6->sin6_addr, text, sizeof(text)), "::1");

	const char *bad[] = {
	    "9100",	  ":9100",	     "::1:9100",     "[::1]9100",	 "[::1]:",
	    "127.0.0.1:", "127.0.0.1:65536", "1.2.3.4:80x",  "host.example:80",	 "[127.0.0.1]:80",
	    "1.2.3:80",	  "[]:80",	     "127.0.0.1:-1", "127.0.0.1:123456", ""};
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(httpd_parse_listen(bad[i], &ss, &len), -EINVAL);
	}
}

/* The Authorization header against the token of --auth-token-file. */
static void test_bearer(void **state)
{
	const char *tok = "s3cret-token-0123";
	(void)state;
	assert_true(httpd_bearer_ok("Bearer s3cret-token-0123", tok));
	assert_true(httpd_bearer_ok("bearer   s3cret-token-0123  ", tok));
	const char *bad[] = {NULL,
			     "",
			     "Bearer",
			     "Bearer ",
			     "Basic s3cret-token-0123",
			     "Bearer s3cret-token-012",
			     "Bearer s3cret-token-01234",
			     "Bearer S3cret-token-0123",
			     "Bearers3cret-token-0123",
			     "s3cret-token-0123"};
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(httpd_bearer_ok(bad[i], tok));
}

static void test_log_line(void **state)
{
	char buf[128];
	struct timespec ts = {.tv_sec = 1700000000, .tv_nsec = 123456789};
	(void)state;
	size_t n = agentlog_format(buf, sizeof(buf), &ts, "listening on http://127.0.0.1:9100");
	assert_string_equal(
	    buf, "2023-11-14T22:13:20.123Z taipan: listening on http://127.0.0.1:9100\n");
	assert_int_equal(n, strlen(buf));
	/* Cut to fit, still one line. */
	n = agentlog_format(buf, 40, &ts, "a message much longer than what fits in the buffer");
	assert_int_equal(n, 39);
	assert_int_equal(strlen(buf), 39);
	assert_int_equal(buf[38], '\n');
	assert_int_equal(agentlog_format(buf, 0, &ts, "x"), 0);
}

/* The agent's schedule on a made-up clock: windows of 10 s from t=100. */
static void test_agent_schedule(void **state)
{
	(void)state;
	struct agent_sched s;
	struct agent_due d;

	agent_sched_init(&s, 100, 10);
	/* The first snapshot is due at once; nothing else. */
	assert_int_equal(agent_sched_wait_ms(&s, 100, INFINITY, 250), 1);
	d = agent_sched_due(&s, 100, INFINITY, false);
	assert_true(d.snapshot);
	assert_false(d.cut);
	assert_false(d.close_window);
	/* Next: the snapshot at 101 (1 s, capped at the poll limit). */
	assert_int_equal(agent_sched_wait_ms(&s, 100, INFINITY, 250), 250);
	assert_int_equal(agent_sched_wait_ms(&s, 100, INFINITY, 5000), 1001);
	/* A request that ends first is what the wait is for. */
	assert_int_equal(agent_sched_wait_ms(&s, 100, 100.5, 5000), 501);
	/* A request ends: a cut, but the window goes on. */
	d = agent_sched_due(&s, 100.5, 100.5, false);
	assert_true(d.cut);
	assert_false(d.close_window);
	assert_false(d.snapshot);
	/* The window's end: cut and closed, once. */
	d = agent_sched_due(&s, 110, INFINITY, false);
	assert_true(d.cut && d.close_window && d.snapshot);
	d = agent_sched_due(&s, 110.25, INFINITY, false);
	assert_false(d.cut || d.close_window || d.snapshot);
	assert_int_equal(agent_sched_wait_ms(&s, 110.25, INFINITY, 60000), 751);
	/* 35 s late (a stalled host): one close, and the next window ends on
	 * the original phase, at 150. */
	d = agent_sched_due(&s, 145, INFINITY, false);
	assert_true(d.close_window);
	d = agent_sched_due(&s, 149.9, INFINITY, false);
	assert_false(d.close_window);
	d = agent_sched_due(&s, 150, INFINITY, false);
	assert_true(d.close_window);
	/* Past a deadline already: no wait at all. */
	assert_int_equal(agent_sched_wait_ms(&s, 150, 149, 250), 0);
	/* Stopping closes the window and takes the counters, whenever. */
	d = agent_sched_due(&s, 150.01, INFINITY, true);
	assert_true(d.cut && d.close_window && d.snapshot);
}

static void test_otlp_endpoint(void **state)
{
	(void)state;
	char buf[128];
	assert_int_equal(otlp_endpoint(buf, sizeof(buf), "http://127.0.0.1:4318"), 0);
	assert_string_equal(buf, "http://127.0.0.1:4318/v1development/profiles");
	assert_int_equal(otlp_endpoint(buf, sizeof(buf), "https://otel.example.com/prefix//"), 0);
	assert_string_equal(buf, "https://otel.example.com/prefix/v1development/profiles");
	assert_int_equal(otlp_endpoint(buf, sizeof(buf), "http://u:pw@host"), -EINVAL);
	assert_int_equal(otlp_endpoint(buf, sizeof(buf), "http://host/?x=1"), -EINVAL);
	assert_int_equal(otlp_endpoint(buf, sizeof(buf), "grpc://host:4317"), -EINVAL);
	assert_int_equal(otlp_endpoint(buf, sizeof("http://h/v1development/profiles"), "http://h"),
			 0);
	assert_int_equal(
	    otlp_endpoint(buf, sizeof("http://h/v1development/profiles") - 1, "http://h"), -ENOSPC);
}

static void test_otlp_headers(void **state)
{
	(void)state;
	char *lines[4], why[128];
	size_t n;
	char a[] = "Authorization:   Bearer abc def  \r\n# a comment\n\nX-Scope-OrgID:t1\n";
	assert_int_equal(otlp_parse_headers(a, lines, 4, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 2);
	assert_string_equal(lines[0], "Authorization: Bearer abc def");
	assert_string_equal(lines[1], "X-Scope-OrgID:t1");
	char empty[] = "";
	assert_int_equal(otlp_parse_headers(empty, lines, 4, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 0);

	char nocolon[] = "X-A: 1\nno colon here\n";
	assert_int_equal(otlp_parse_headers(nocolon, lines, 4, &n, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "line 2: want 'Key: Value', Key a header name");
	char badkey[] = "X A: 1\n";
	assert_int_equal(otlp_parse_headers(badkey, lines, 4, &n, why, sizeof(why)), -EINVAL);
	char nokey[] = ": 1\n";
	assert_int_equal(otlp_parse_headers(nokey, lines, 4, &n, why, sizeof(why)), -EINVAL);
	char ctl[] = "X-A: a\033[2Jb\n";
	assert_int_equal(otlp_parse_headers(ctl, lines, 4, &n, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "line 1: a control character in the value");
	char own[] = "content-encoding: identity\n";
	assert_int_equal(otlp_parse_headers(own, lines, 4, &n, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "line 1: Content-Encoding is taipan's to set");
	char many[] = "A: 1\nB: 2\nC: 3\n";
	assert_int_equal(otlp_parse_headers(many, lines, 2, &n, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "more than 2 headers");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_app_name),
	    cmocka_unit_test(test_check_url),
	    cmocka_unit_test(test_ingest_url),
	    cmocka_unit_test(test_backoff_schedule),
	    cmocka_unit_test(test_parse_seconds),
	    cmocka_unit_test(test_parse_listen),
	    cmocka_unit_test(test_bearer),
	    cmocka_unit_test(test_log_line),
	    cmocka_unit_test(test_agent_schedule),
	    cmocka_unit_test(test_redact_url),
	    cmocka_unit_test(test_parse_credentials),
	    cmocka_unit_test(test_otlp_endpoint),
	    cmocka_unit_test(test_otlp_headers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
