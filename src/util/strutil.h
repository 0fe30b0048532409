/* strutil.h - small string helpers that modules on both sides of the build
 * need (the profile, the encoders, the process classifier, the commands).
 * It depends on nothing of taipan's, so anything may include it. */
#ifndef TAIPAN_STRUTIL_H
#define TAIPAN_STRUTIL_H

#include <stdbool.h>
#include <stddef.h>

/* The length of the valid UTF-8 sequence at s (1 to 4), or 0 when the bytes
 * there are not one: stray continuation bytes, overlong forms, surrogates,
 * code points past U+10FFFF and sequences cut short (by the terminating NUL
 * too, which is never read past). s must point at a byte that is not NUL. */
size_t utf8_seq_len(const unsigned char *s);

/* Whether the NUL-terminated s is all valid UTF-8. */
bool utf8_valid(const char *s);

/* A malloc'd copy of s with each byte that does not start a valid sequence
 * replaced by U+FFFD (the caller frees it), or NULL when out of memory. */
char *utf8_repair(const char *s);

/* What follows the last '/' of path, or path itself when it has none.
 * Points into path; NULL stays NULL. */
const char *base_name(const char *path);

#endif /* TAIPAN_STRUTIL_H */
