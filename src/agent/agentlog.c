/* agentlog.c - timestamped event lines for the agent, on stderr.
 *
 * The log file is made fd 2 rather than kept as a FILE of our own: the
 * session's warnings (log.c) then go to the same place, a reopen is a single
 * dup2 that other threads never see half done, and nothing here needs a lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/agentlog.h"
#include "util/safefile.h"
#include "util/strutil.h"
#include "util/clock.h"

int agentlog_redirect(const char *path, char *err, size_t errlen)
{
	int fd =
	    safefile_open(path, O_WRONLY | O_APPEND | O_CREAT, 0640, SAFEFILE_LOG, err, errlen);
	if (fd < 0)
		return fd;
	int ret = 0;
	if (dup2(fd, STDERR_FILENO) < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot log to %s: %s", path, strerror(-ret));
	}
	close(fd);
	return ret;
}

size_t agentlog_format(char *buf, size_t len, const struct timespec *ts, const char *msg)
{
	struct tm tm;
	char when[32];
	if (!len)
		return 0;
	gmtime_r(&ts->tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	int n = snprintf(buf, len, "%s.%03ldZ taipan: %s\n", when, ts->tv_nsec / 1000000L, msg);
	if (n < 0) {
		buf[0] = 0;
		return 0;
	}
	if ((size_t)n >= len) {
		/* Cut, but still one line. */
		n = (int)len - 1;
		if (n > 0)
			buf[n - 1] = '\n';
	}
	return (size_t)n;
}

void agentlog(const char *fmt, ...)
{
	char raw[1024], msg[1024], line[1100];
	struct timespec ts;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	/* A message is one line of text: a newline inside it would forge
	 * another line, and a control sequence from a name a target chose
	 * would reach whoever reads the log on a terminal (str_escape). */
	str_escape(msg, sizeof(msg), raw, NULL);
	clock_gettime(CLOCK_REALTIME, &ts);
	size_t n = agentlog_format(line, sizeof(line), &ts, msg);
	/* One write: an O_APPEND file or a pipe takes it whole. A failed
	 * write has nowhere to be reported. */
	ssize_t w = write(STDERR_FILENO, line, n);
	(void)w;
}

/* --- rate-limited lines ---------------------------------------------------------- */

void agentlog_limiter_init(struct agentlog_limiter *l, double every_s)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->mu, NULL);
	l->every = every_s;
}

/* Logs k's count, when there is one. Under l->mu. */
static void say_more(struct agentlog_kind *k, double now)
{
	if (!k->more)
		return;
	agentlog("%lu more like this in the last %.0f s: %s", k->more, now - k->last, k->msg);
	k->more = 0;
	k->last = now;
}

void agentlog_limited(struct agentlog_limiter *l, const char *key, const char *fmt, ...)
{
	char msg[sizeof(l->kinds[0].msg)];
	va_list ap;
	double now = mono_seconds();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&l->mu);
	struct agentlog_kind *k = NULL, *quietest = &l->kinds[0];
	for (unsigned int i = 0; i < AGENTLOG_KINDS && !k; i++) {
		struct agentlog_kind *c = &l->kinds[i];
		if (c->key && !strcmp(c->key, key))
			k = c;
		else if (!c->key || (quietest->key && c->last < quietest->last))
			quietest = c;
	}
	if (k && now - k->last < l->every) {
		k->more++;
		memcpy(k->msg, msg, sizeof(msg));
	} else {
		if (!k) {
			k = quietest;
			say_more(k, now);
			k->key = key;
		} else {
			say_more(k, now);
		}
		k->last = now;
		agentlog("%s", msg);
	}
	pthread_mutex_unlock(&l->mu);
}

void agentlog_limiter_flush(struct agentlog_limiter *l, bool all)
{
	double now = mono_seconds();
	pthread_mutex_lock(&l->mu);
	for (unsigned int i = 0; i < AGENTLOG_KINDS; i++)
		if (l->kinds[i].more && (all || now - l->kinds[i].last >= l->every))
			say_more(&l->kinds[i], now);
	pthread_mutex_unlock(&l->mu);
}

void agentlog_limiter_destroy(struct agentlog_limiter *l)
{
	agentlog_limiter_flush(l, true);
	pthread_mutex_destroy(&l->mu);
}
