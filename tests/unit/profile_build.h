/* profile_build.h - building the unit tests' profiles: frames interned and
 * stacks added, each step asserted. Include it after <cmocka.h>. */
#ifndef TAIPAN_PROFILE_BUILD_H
#define TAIPAN_PROFILE_BUILD_H

#include <stdarg.h>
#include <stdint.h>

#include "profile/profile.h"

/* The most frames pb_add() takes. */
#define PB_MAX_FRAMES 16

/* The id of frame f in p. */
static inline uint32_t pb_frame(struct profile *p, struct prof_frame f)
{
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

#endif /* TAIPAN_PROFILE_BUILD_H */
