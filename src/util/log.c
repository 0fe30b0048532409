/* log.c - the one place that writes diagnostics. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "util/strutil.h"

/* The longest line written, newline included: PIPE_BUF, the most a pipe
 * takes whole. Longer messages are cut. */
#define LOG_LINE_MAX 4096

static enum log_level level = LOG_NORMAL;

void log_set_level(enum log_level l)
{
	level = l;
}

enum log_level log_get_level(void)
{
	return level;
}

/* Writes "taipan: PREFIXMESSAGE\n" to fd 2 in one write(2). The agent logs
 * from several threads, and a line written in pieces can be split by
 * another thread's line; one write to a pipe or a file is not. It goes to
 * the descriptor, not through stdio, as agentlog() does: both follow the
 * agent's log file when it is dup2'ed over fd 2. MESSAGE is escaped
 * (str_escape): it often names what a target chose (a process or thread
 * name, a file it mapped), which must reach the terminal as text. */
static void emit(const char *prefix, const char *fmt, va_list ap)
{
	char msg[LOG_LINE_MAX], line[LOG_LINE_MAX];
	int saved = errno; /* logging leaves errno as it was */
	if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0)
		msg[0] = '\0';
	int n = snprintf(line, sizeof(line) - 1, "taipan: %s", prefix);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(line) - 1)
		str_escape(line + (size_t)n, sizeof(line) - 1 - (size_t)n, msg, NULL);
	n = (int)strlen(line); /* cut, but still one line */
	line[n++] = '\n';
	for (size_t off = 0; off < (size_t)n;) {
		ssize_t w = write(STDERR_FILENO, line + off, (size_t)n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break; /* nowhere to report it */
		off += (size_t)w;
	}
	errno = saved;
}

void log_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit("error: ", fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	if (level < LOG_NORMAL)
		return;
	va_list ap;
	va_start(ap, fmt);
	emit("warning: ", fmt, ap);
	va_end(ap);
}

void log_info(const char *fmt, ...)
{
	if (level < LOG_NORMAL)
		return;
	va_list ap;
	va_start(ap, fmt);
	emit("", fmt, ap);
	va_end(ap);
}

void log_debug(const char *fmt, ...)
{
	if (level < LOG_VERBOSE)
		return;
	va_list ap;
	va_start(ap, fmt);
	emit("", fmt, ap);
	va_end(ap);
}
