/* pystr.c - a CPython str read out of the target as UTF-8 (pystr.h). */
#include <string.h>

#include "cpython/pystr.h"

/* Appends code point cp to out as UTF-8 if it fits in the room left;
 * returns the bytes written, 0 when it does not fit. */
static size_t put_utf8(char *out, size_t room, uint32_t cp)
{
	char b[4];
	size_t n;
	if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
		cp = 0xfffd;
	if (cp < 0x80) {
		b[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | (cp >> 6));
		b[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | (cp >> 12));
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		b[0] = (char)(0xf0 | (cp >> 18));
		b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	if (n > room)
		return 0;
	memcpy(out, b, n);
	return n;
}

/* Characters decoded from one read of raw data; the most header bytes read. */
#define CHUNK 1024
#define HDR 128

/* A field of buf (len bytes read), or 0 when outside it. */
static uint64_t field(const uint8_t *buf, size_t len, int32_t off, size_t size)
{
	uint64_t v = 0;
	if (off >= 0 && (size_t)off + size <= len)
		memcpy(&v, buf + off, size);
	return v;
}

int pystr_read(const struct pyproc *pp, pystr_reader rd, void *ctx, uint64_t obj, size_t max_chars,
	       char *buf, size_t cap, bool *cut)
{
	const struct py_layout *l = &pp->layout;
	uint8_t h[HDR];
	*cut = false;
	if (!obj || cap < 2)
		return -1;
	if (l->unicode_state < 0) { /* 2.7: PyStringObject, its header then its bytes */
		if (l->bytes_sval <= 0 || l->bytes_sval > HDR ||
		    rd(ctx, obj, h, (size_t)l->bytes_sval))
			return -1;
		int64_t n = (int64_t)field(h, (size_t)l->bytes_sval, l->var_size, 8);
		if (n < 0)
			return -1;
		size_t want = (uint64_t)n < max_chars ? (size_t)n : max_chars;
		if (want >= cap)
			want = cap - 1;
		*cut = want < (uint64_t)n;
		if (want && rd(ctx, obj + (uint64_t)l->bytes_sval, buf, want))
			return -1;
		buf[want] = 0;
		return (int)want;
	}
	/* PyASCIIObject's size: every str has that much, length and state
	 * included. */
	size_t hl = (size_t)l->unicode_ascii_size;
	if (l->unicode_ascii_size <= 0 || l->unicode_compact_size <= 0 || hl > HDR ||
	    rd(ctx, obj, h, hl))
		return -1;
	int64_t len = (int64_t)field(h, hl, l->unicode_length, 8);
	uint32_t state = (uint32_t)field(h, hl, l->unicode_state, 4);
	bool ascii;
	unsigned int kind = pyproc_str_kind(pp, state, &ascii);
	if (len < 0 || !kind)
		return -1;
	uint64_t data = obj + (uint64_t)(ascii ? l->unicode_ascii_size : l->unicode_compact_size);
	/* No more characters than the buffer can take: each is a byte at least. */
	size_t nch = (uint64_t)len < max_chars ? (size_t)len : max_chars;
	if (nch > cap - 1)
		nch = cap - 1;
	size_t o = 0, i = 0;
	uint8_t raw[CHUNK * 4];
	while (i < nch) {
		size_t k = nch - i < CHUNK ? nch - i : CHUNK;
		if (rd(ctx, data + (uint64_t)(i * kind), raw, k * kind))
			return -1;
		for (size_t j = 0; j < k; j++) {
			uint32_t cp = 0;
			if (kind == 1)
				cp = raw[j];
			else if (kind == 2)
				cp = (uint32_t)raw[2 * j] | ((uint32_t)raw[2 * j + 1] << 8);
			else
				memcpy(&cp, raw + 4 * j, 4);
			size_t w = put_utf8(buf + o, cap - 1 - o, cp);
			if (!w) {
				buf[o] = 0;
				*cut = true;
				return (int)o;
			}
			o += w;
		}
		i += k;
	}
	buf[o] = 0;
	*cut = i < (uint64_t)len;
	return (int)o;
}
