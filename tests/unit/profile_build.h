/* profile_build.h - building the unit tests' profiles: frames interned and
 * stacks added, each step asserted. Include it after <cmocka.h>. */
#ifndef TAIPAN_PROFILE_BUILD_H
#define TAIPAN_PROFILE_BUILD_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "profile/profile.h"

/* The most frames pb_add() takes. */
#define PB_MAX_FRAMES 16

/* The id of frame f in p; an interpreted frame without a runtime is
 * Python's, as the session names them. */
static inline uint32_t pb_frame(struct profile *p, struct prof_frame f)
{
	if (f.kind == PROF_FRAME_INTERP && !f.runtime)
		f.runtime = "python";
	int id = profile_intern_frame(p, &f);
	assert_true(id >= 0);
	return (uint32_t)id;
}

/* The id of a Python frame in p. */
static inline uint32_t pb_py(struct profile *p, const char *name, const char *file, int line,
			     int first_line)
{
	return pb_frame(p, (struct prof_frame){
			       .name = name, .file = file, .line = line, .first_line = first_line});
}

/* Adds count samples of a stack to p, labelled lb: the n frame ids that
 * follow n, root first. */
static inline void pb_add(struct profile *p, const struct prof_labels *lb, uint64_t count, int n,
			  ...)
{
	uint32_t ids[PB_MAX_FRAMES];
	va_list ap;
	assert_true(n >= 0 && n <= PB_MAX_FRAMES);
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		ids[i] = va_arg(ap, uint32_t);
	va_end(ap);
	assert_int_equal(profile_add(p, ids, (uint32_t)n, lb, count), 0);
}

/* What a hostile target names things: a window title, a cleared screen, a
 * C1 CSI, a right-to-left override, the Arabic letter mark, a zero-width
 * space, a byte order mark; and the same escaped (str_escape). */
#define EVIL_FN                                                                                    \
	"\x1b]0;pwned\x07\xe2\x80\xae"                                                             \
	"evil"
#define EVIL_FN_ESC "\\x1b]0;pwned\\x07\\u202eevil"
#define EVIL_FILE                                                                                  \
	"/tmp/\xd8\x9c\xe2\x80\x8b"                                                                \
	"x.py"
#define EVIL_FILE_ESC "/tmp/\\u061c\\u200bx.py"
#define EVIL_THREAD                                                                                \
	"\x1b[2J\xc2\x9b"                                                                          \
	"31m"
#define EVIL_THREAD_ESC "\\x1b[2J\\u009b31m"
#define EVIL_COMM                                                                                  \
	"\xef\xbb\xbf"                                                                             \
	"py"
#define EVIL_COMM_ESC "\\ufeffpy"
#define EVIL_MODULE "/tmp/\x1b[2Jlib.so"
#define EVIL_MODULE_ESC "/tmp/\\x1b[2Jlib.so"

/* A profile whose every name a reader prints is hostile. */
static inline struct profile *pb_evil_profile(void)
{
	struct profile *p = profile_new();
	assert_non_null(p);
	uint32_t py = pb_py(p, EVIL_FN, EVIL_FILE, 3, 1);
	uint32_t nat = pb_frame(p, (struct prof_frame){.name = EVIL_FN,
						       .module = EVIL_MODULE,
						       .addr = 0x1234,
						       .kind = PROF_FRAME_NATIVE});
	struct prof_labels l = {.pid = 7,
				.tid = 8,
				.thread_name = EVIL_THREAD,
				.comm = EVIL_COMM,
				.runtime = "python", .runtime_version = "3.12", .version_alias = "python_version", .lock_name = "gil",
				.cgroup = "/" EVIL_THREAD};
	pb_add(p, &l, 1, 2, py, nat);
	return p;
}

/* No character of the hostile names is left as it is in s (of len bytes,
 * newlines allowed where newline is true). A failure gives where, not s:
 * the test's own output goes to a terminal too. */
static inline void pb_assert_no_raw_controls(const char *s, size_t len, bool newline)
{
	static const char *const raw[] = {"\xc2\x9b", "\xe2\x80\xae", "\xd8\x9c", "\xe2\x80\x8b",
					  "\xef\xbb\xbf"};
	static const char *const what[] = {"U+009B", "U+202E", "U+061C", "U+200B", "U+FEFF"};
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c < 0x20 && !(newline && c == '\n')) || c == 0x7f)
			fail_msg("raw control 0x%02x at byte %zu of %zu", c, i, len);
	}
	for (size_t k = 0; k < sizeof(raw) / sizeof(raw[0]); k++)
		if (memmem(s, len, raw[k], strlen(raw[k])))
			fail_msg("raw %s at byte %zu of %zu", what[k],
				 (size_t)((const char *)memmem(s, len, raw[k], strlen(raw[k])) - s),
				 len);
}

#endif /* TAIPAN_PROFILE_BUILD_H */
