/* strutil.c - UTF-8 checking and repair, base names. */
#include "util/strutil.h"

#include <stdlib.h>
#include <string.h>

size_t utf8_seq_len(const unsigned char *s)
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

bool utf8_valid(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n;
	while (*u && (n = utf8_seq_len(u)))
		u += n;
	return !*u;
}

char *utf8_repair(const char *s)
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

const char *base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s ? s + 1 : path;
}
