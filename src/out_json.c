/* out_json.c - JSON strings for the encoders: repairing text that is not
 * UTF-8, and string literals that may sit inside an HTML <script>.
 *
 * jansson refuses a string that is not valid UTF-8, and what taipan reads
 * out of a target is whatever bytes were there. Dropping such a frame would
 * lose samples, so the bad bytes are replaced instead.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "out_json.h"

/* The length of the valid UTF-8 sequence at s (1 to 4), or 0 when the bytes
 * there are not one: stray continuation bytes, overlong forms, surrogates,
 * code points past U+10FFFF and sequences cut short. */
static size_t utf8_seq_len(const unsigned char *s)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	/* The second byte's range is what rules out overlongs, surrogates
	 * (ED A0..BF) and code points past U+10FFFF (F4 90..). */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0; /* also stops at the terminating NUL */
	return n;
}

/* A copy of s with each invalid byte replaced by U+FFFD, or NULL when out of
 * memory. */
static char *utf8_repair(const char *s)
{
	static const char replacement[] = "\xef\xbf\xbd";
	size_t len = strlen(s);
	/* Each bad byte grows to three. */
	char *out = malloc(len * 3 + 1);
	if (!out)
		return NULL;
	const unsigned char *r = (const unsigned char *)s;
	char *w = out;
	while (*r) {
		size_t n = utf8_seq_len(r);
		if (n) {
			memcpy(w, r, n);
			w += n;
			r += n;
		} else {
			memcpy(w, replacement, 3);
			w += 3;
			r++;
		}
	}
	*w = '\0';
	return out;
}

json_t *out_json_string(const char *s)
{
	if (!s)
		s = "";
	json_t *j = json_string(s);
	if (j)
		return j;
	/* json_string fails on invalid UTF-8 or on allocation: repair and try
	 * once more; a second failure can only be memory. */
	char *fixed = utf8_repair(s);
	if (!fixed)
		return NULL;
	j = json_string(fixed);
	free(fixed);
	return j;
}

int out_json_put_html_string(FILE *out, const char *s)
{
	json_t *j = out_json_string(s);
	if (!j)
		return -ENOMEM;
	char *text = json_dumps(j, JSON_ENCODE_ANY | JSON_ENSURE_ASCII | JSON_COMPACT);
	json_decref(j);
	if (!text)
		return -ENOMEM;

	/* JSON_ENSURE_ASCII left only ASCII; of that, '<' '>' '&' can only be
	 * inside the string itself, where a \u escape means the same. */
	int err = 0;
	errno = 0;
	for (const char *c = text; *c; c++) {
		int rc;
		if (*c == '<' || *c == '>' || *c == '&')
			rc = fprintf(out, "\\u%04x", (unsigned int)*c);
		else
			rc = putc(*c, out);
		if (rc < 0) {
			err = errno ? -errno : -EIO;
			break;
		}
	}
	free(text);
	return err;
}
