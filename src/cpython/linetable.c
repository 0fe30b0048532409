/* linetable.c - decoders for CPython's line tables, 2.7 to 3.15. */
#include "cpython/linetable.h"

#include <limits.h>
#include <stdbool.h>

/*
 * The tables are copied out of another process and may be torn, stale or
 * garbage, so every walk is bounded by len and advances at least one byte per
 * step. Lines are summed in uint32_t: CPython sums them in a C int, so the
 * modular sum gives the same result for every real table, and garbage cannot
 * cause signed overflow. Addresses are summed in uint64_t, which no table
 * shorter than 2^56 bytes can overflow.
 */

/* A summed line as a result: CPython never produces negative lines, so a
 * negative sum can only come from garbage and is reported as "no line". */
static int as_line(uint32_t line)
{
	return line <= INT_MAX ? (int)line : -1;
}

/* The byte as the signed char CPython reads it, without implementation-defined
 * conversions. */
static uint32_t sbyte(uint8_t b)
{
	return b < 0x80 ? b : (uint32_t)b - 256u;
}

/*
 * co_lnotab, <= 3.9: (addr_incr, line_incr) pairs; the line in effect at
 * byte_off is firstlineno plus the increments of every pair whose cumulative
 * address is <= byte_off (PyCode_Addr2Line). Past the end of the table that is
 * the last line reached, and an empty table gives firstlineno. An odd trailing
 * byte is ignored, as CPython does (size / 2 pairs).
 */
static int lnotab_line(const uint8_t *t, size_t len, int firstlineno, uint32_t byte_off,
		       bool signed_incr)
{
	uint32_t line = (uint32_t)firstlineno;
	uint64_t addr = 0;

	for (size_t i = 0; i + 1 < len; i += 2) {
		addr += t[i];
		if (addr > byte_off)
			break;
		line += signed_incr ? sbyte(t[i + 1]) : t[i + 1];
	}
	return as_line(line);
}

/*
 * co_linetable, 3.10: (byte_delta, line_delta) pairs, each covering the
 * address range [end, end + byte_delta) with a line delta of -128 meaning the
 * range has no line (without changing the running line). This is the range
 * walk of 3.10's _PyCode_CheckLineNumber(): consume pairs while the range end
 * is <= byte_off; zero-length ranges only move the line. Running off the end
 * of the table, empty tables included, means no line (-1), as in CPython.
 */
static int linetable310_line(const uint8_t *t, size_t len, int firstlineno, uint32_t byte_off,
			     bool near)
{
	uint32_t line = (uint32_t)firstlineno;
	uint64_t end = 0;
	bool has_line = false;
	size_t i = 0;

	while (end <= byte_off) {
		if (len - i < 2)
			return -1;
		end += t[i];
		if (t[i + 1] == 0x80) {
			has_line = false;
		} else {
			line += sbyte(t[i + 1]);
			has_line = true;
		}
		i += 2;
	}
	return has_line || near ? as_line(line) : -1;
}

/* Varints of the 3.11+ table: 6-bit chunks, least significant first, bit 6 set
 * when another chunk follows. Six chunks hold any 32-bit value; CPython
 * accumulates in an unsigned int, so bits past 32 are dropped as here. Reads
 * only [p, lim) and stops after six chunks whatever the bytes say. */
static uint32_t read_varint(const uint8_t *p, const uint8_t *lim)
{
	uint32_t val = 0;

	for (unsigned int shift = 0; p < lim && shift < 36; shift += 6) {
		uint8_t b = *p++;

		val |= (uint32_t)(b & 63) << shift;
		if (!(b & 64))
			break;
	}
	return val;
}

static uint32_t read_svarint(const uint8_t *p, const uint8_t *lim)
{
	uint32_t v = read_varint(p, lim);

	return (v & 1) ? 0u - (v >> 1) : v >> 1;
}

/*
 * Location table, 3.11+ (Objects/locations.md). An entry is a header byte with
 * bit 7 set, code (b >> 3) & 15 and (b & 7) + 1 code units, followed by bytes
 * with bit 7 clear. Only the line matters here:
 *   0-9   short form, same line;
 *   10-12 one-line form, line += code - 10;
 *   13    no columns, line += svarint;
 *   14    long form, line += svarint (end line and columns follow);
 *   15    no location: the entry has no line, the running line is unchanged.
 * The entry after a header starts at the next byte with bit 7 set, exactly how
 * CPython's advance() finds it, so a garbage byte can never stall the walk. The
 * result is the line of the entry covering code unit byte_off / 2 (an inline
 * CACHE unit belongs to its instruction's entry); past the end, or for an
 * empty table, there is none and the result is -1, as in CPython.
 */
static int locations_line(const uint8_t *t, size_t len, int firstlineno, uint32_t byte_off,
			  bool near)
{
	const uint8_t *p = t, *lim = t + len;
	uint32_t line = (uint32_t)firstlineno;
	uint64_t cu = byte_off / 2, end = 0;

	while (p < lim) {
		const uint8_t *next = p + 1;
		unsigned int code = (*p >> 3) & 15;

		while (next < lim && !(*next & 0x80))
			next++;
		if (code == 13 || code == 14)
			line += read_svarint(p + 1, next);
		else if (code >= 10 && code <= 12)
			line += code - 10;
		end += (*p & 7) + 1;
		if (cu < end)
			return code == 15 && !near ? -1 : as_line(line);
		p = next;
	}
	return -1;
}

static int line_of_kind(enum py_linetable_kind kind, const uint8_t *table, size_t len,
			int firstlineno, uint32_t byte_off, bool near)
{
	static const uint8_t none[1];

	if (!table) {
		/* Keeps pointer arithmetic off NULL, which is undefined even +0. */
		table = none;
		len = 0;
	}
	switch (kind) {
	case PY_LT_LNOTAB_U8:
		return lnotab_line(table, len, firstlineno, byte_off, false);
	case PY_LT_LNOTAB:
		return lnotab_line(table, len, firstlineno, byte_off, true);
	case PY_LT_LINETABLE:
		return linetable310_line(table, len, firstlineno, byte_off, near);
	case PY_LT_LOCATIONS:
		return locations_line(table, len, firstlineno, byte_off, near);
	}
	return -1;
}

int py_linetable_line(enum py_linetable_kind kind, const uint8_t *table, size_t len,
		      int firstlineno, uint32_t byte_off)
{
	return line_of_kind(kind, table, len, firstlineno, byte_off, false);
}

int py_linetable_line_near(enum py_linetable_kind kind, const uint8_t *table, size_t len,
			   int firstlineno, uint32_t byte_off)
{
	return line_of_kind(kind, table, len, firstlineno, byte_off, true);
}
