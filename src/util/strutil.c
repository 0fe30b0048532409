/* strutil.c - UTF-8 checking and repair, escaping for terminals and text,
 * base names. */
#include "util/strutil.h"

#include <stdio.h>
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

/* The code point of the valid n-byte UTF-8 sequence at s. */
static unsigned int utf8_decode(const unsigned char *s, size_t n)
{
	static const unsigned char lead_mask[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
	unsigned int cp = s[0] & lead_mask[n];
	for (size_t i = 1; i < n; i++)
		cp = (cp << 6) | (s[i] & 0x3f);
	return cp;
}

/* Whether code point cp (valid, past ASCII) is printed as "\uHHHH": a C1
 * control, or an invisible character that moves, reorders, hides or joins
 * the text around it, so that a name could show as another: the Arabic
 * letter mark, the zero-width ones and the marks (U+200B to U+200F), the
 * line and paragraph separators, the bidi embeddings, overrides and
 * isolates, the word joiner and invisible operators (U+2060 to U+2064,
 * with the deprecated format controls up to U+206F), and the byte order
 * mark (a zero-width no-break space inside text). */
static bool escape_code_point(unsigned int cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || cp == 0x61c || (cp >= 0x200b && cp <= 0x200f) ||
	       cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2060 && cp <= 0x206f) || cp == 0xfeff;
}

size_t str_escape(char *buf, size_t len, const char *s, const char *also)
{
	const unsigned char *r = (const unsigned char *)(s ? s : "");
	size_t need = 0, at = 0; /* at: bytes written, always < len when len > 0 */
	bool full = len == 0;

	while (*r) {
		char piece[8];
		const char *src = piece;
		size_t n, step;
		if (*r == '\\') {
			memcpy(piece, "\\\\", 2);
			n = 2;
			step = 1;
		} else if (*r < 0x20 || *r == 0x7f || (*r < 0x80 && also && strchr(also, *r))) {
			n = (size_t)snprintf(piece, sizeof(piece), "\\x%02x", *r);
			step = 1;
		} else if (*r < 0x80) {
			src = (const char *)r;
			n = step = 1;
		} else if (!(step = utf8_seq_len(r))) {
			n = (size_t)snprintf(piece, sizeof(piece), "\\x%02x", *r);
			step = 1;
		} else if (escape_code_point(utf8_decode(r, step))) {
			n = (size_t)snprintf(piece, sizeof(piece), "\\u%04x", utf8_decode(r, step));
		} else {
			src = (const char *)r;
			n = step;
		}
		/* Whole pieces only: once one does not fit, nothing more is
		 * written, though the length is still counted. */
		if (!full && at + n < len) {
			memcpy(buf + at, src, n);
			at += n;
		} else {
			full = true;
		}
		need += n;
		r += step;
	}
	if (len)
		buf[at] = '\0';
	return need;
}

char *str_escape_dup(const char *s, const char *also)
{
	size_t n = str_escape(NULL, 0, s, also);
	char *out = malloc(n + 1);
	if (out)
		str_escape(out, n + 1, s, also);
	return out;
}

const char *base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s ? s + 1 : path;
}
