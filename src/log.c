/* log.c - the one place that writes diagnostics. */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

static enum log_level level = LOG_NORMAL;

void log_set_level(enum log_level l)
{
	level = l;
}

enum log_level log_get_level(void)
{
	return level;
}

static void emit(const char *prefix, const char *fmt, va_list ap)
{
	fprintf(stderr, "taipan: %s", prefix);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
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
