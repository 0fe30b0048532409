/* log.h - messages to stderr, prefixed with the program name. */
#ifndef TAIPAN_LOG_H
#define TAIPAN_LOG_H

#include <stdbool.h>

enum log_level { LOG_QUIET = 0, LOG_NORMAL = 1, LOG_VERBOSE = 2 };

void log_set_level(enum log_level l);
enum log_level log_get_level(void);

/* Always printed: "taipan: error: …". */
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed unless quiet: "taipan: warning: …". */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed unless quiet: "taipan: …". */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed with -v. */
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* TAIPAN_LOG_H */
