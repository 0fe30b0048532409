/* strutil.h - small string helpers (UTF-8, escaping, base names) that
 * modules on both sides of the build
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

/* Copies s into buf (len bytes) with everything a terminal could act on, or
 * a reader of lines could take for structure, escaped visibly, so that a
 * name a target chose prints as the text it is and nothing more. Every
 * output that carries such names uses it: dump, top and the log lines, and
 * each profile format (folded, pprof's strings, the speedscope and HTML
 * flame graph JSON strings), whose readers print them to terminals and
 * pages.
 *   - a backslash becomes "\\", so that every escape below is unambiguous;
 *   - C0 controls (ESC, BEL, newline, ...) and DEL become "\xHH";
 *   - a byte that does not start a valid UTF-8 sequence becomes "\xHH"
 *     (a terminal in a single-byte locale takes 0x9b for CSI);
 *   - C1 controls (U+0080 to U+009F) and the invisible characters that
 *     reorder, hide or break text (U+061C, U+200B to U+200F, U+2028 to
 *     U+202E, U+2060 to U+206F, U+FEFF) become "\uHHHH";
 *   - each ASCII character in also (may be NULL) becomes "\xHH": ";" for
 *     folded stacks, where it separates frames.
 * Anything else, valid UTF-8 included, is copied. NULL s is "".
 * Like snprintf: returns the length of the whole escaped text, and writes as
 * much as fits, NUL-terminated when len > 0, never half an escape or half a
 * UTF-8 sequence. buf may be NULL when len is 0. */
size_t str_escape(char *buf, size_t len, const char *s, const char *also);

/* The escaped s (str_escape) in a malloc'd string the caller frees, or NULL
 * when out of memory. */
char *str_escape_dup(const char *s, const char *also);

/* What follows the last '/' of path, or path itself when it has none.
 * Points into path; NULL stays NULL. */
const char *base_name(const char *path);

#endif /* TAIPAN_STRUTIL_H */
