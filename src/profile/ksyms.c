/* ksyms.c - kernel text symbols from /proc/kallsyms, sorted for address lookup.
 *
 * kallsyms has ~100-200k lines and the kernel formats each one on read, so
 * the file is read once, into one buffer sized for it (procfs_read_file()),
 * and parsed in place: names are NUL-terminated inside that buffer, which the
 * table keeps.
 */
#include "profile/ksyms.h"
#include "proc/procfs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct ksym {
	uint64_t addr;
	const char *name; /* inside ksyms.buf; buffer order is file order */
	int rank;	  /* among aliases at one address, lower wins */
};

struct ksyms {
	struct ksym *v; /* sorted by addr, one entry per address */
	size_t n;
	char *buf;
};

/* Which types to keep, and the preference among aliases at one address:
 * global text, local text, then weak. Data symbols are dropped: kernel stack
 * addresses are always text. -1 for a type to skip. */
static int type_rank(char t)
{
	switch (t) {
	case 'T':
		return 0;
	case 't':
		return 1;
	case 'W':
		return 2;
	case 'w':
		return 3;
	default:
		return -1;
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Parses "ADDR TYPE NAME[\t[MODULE]]" in [p, eol), NUL-terminating NAME in
 * place. Returns false for a malformed line. */
static bool parse_line(char *p, char *eol, struct ksym *out, char *type)
{
	uint64_t addr = 0;
	int digits = 0, d;
	char *name;

	for (; p < eol && (d = hexval(*p)) >= 0; p++, digits++)
		addr = addr << 4 | d;
	if (digits == 0 || digits > 16 || eol - p < 4 || p[0] != ' ' || p[2] != ' ')
		return false;
	*type = p[1];
	name = p + 3;
	for (p = name; p < eol && *p != '\t' && *p != ' '; p++)
		;
	if (p == name)
		return false;
	/* The module part, if any, is left behind the terminator. */
	*p = '\0';
	out->addr = addr;
	out->name = name;
	return true;
}

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* Names lie in the buffer in file order: this keeps aliases in the
	 * order the kernel listed them. */
	return x->name < y->name ? -1 : x->name > y->name;
}

struct ksyms *ksyms_load(const char *path)
{
	bool sorted = true, nonzero = false;
	struct ksyms *ks;
	size_t len = 0, lines = 0, n = 0, j;
	char *buf = NULL, *p, *eol;
	int err;

	/* 8 MiB: all of a distribution kernel's symbols in one read. */
	err = procfs_read_file(path ? path : "/proc/kallsyms", 8 << 20, &buf, &len);
	if (err) {
		errno = -err;
		return NULL;
	}
	for (p = buf; (p = memchr(p, '\n', buf + len - p)); p++)
		lines++;
	lines++; /* a last line without a newline */

	ks = calloc(1, sizeof(*ks));
	if (ks)
		ks->v = malloc(lines * sizeof(*ks->v));
	if (!ks || !ks->v) {
		free(ks);
		free(buf);
		errno = ENOMEM;
		return NULL;
	}
	ks->buf = buf;

	for (p = buf; p < buf + len; p = eol + 1) {
		struct ksym *s = &ks->v[n];
		char type;

		eol = memchr(p, '\n', buf + len - p);
		if (!eol)
			eol = buf + len;
		if (!parse_line(p, eol, s, &type))
			continue;
		/* kptr_restrict hides addresses as zeros, for every line. */
		if (s->addr)
			nonzero = true;
		s->rank = type_rank(type);
		if (s->rank < 0)
			continue;
		if (n && s->addr < ks->v[n - 1].addr)
			sorted = false;
		n++;
	}
	if (!nonzero) {
		err = n ? EPERM : ENOENT;
		goto fail;
	}
	if (n == 0) {
		err = ENOENT;
		goto fail;
	}
	/* The core kernel is listed in order; only module symbols may break
	 * it, so the sort is usually skipped. */
	if (!sorted)
		qsort(ks->v, n, sizeof(*ks->v), ksym_cmp);

	/* One entry per address: the best-ranked alias, first listed on ties. */
	for (size_t i = j = 1; i < n; i++) {
		if (ks->v[i].addr != ks->v[j - 1].addr)
			ks->v[j++] = ks->v[i];
		else if (ks->v[i].rank < ks->v[j - 1].rank)
			ks->v[j - 1] = ks->v[i];
	}
	ks->n = j;
	return ks;

fail:
	ksyms_free(ks);
	errno = err;
	return NULL;
}

void ksyms_free(struct ksyms *ks)
{
	if (!ks)
		return;
	free(ks->v);
	free(ks->buf);
	free(ks);
}

const char *ksyms_lookup(const struct ksyms *ks, uint64_t addr, uint64_t *off)
{
	size_t lo = 0, hi = ks->n;

	/* The first entry whose address is above addr; the one before it is
	 * the answer. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ks->v[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	if (off)
		*off = addr - ks->v[lo - 1].addr;
	return ks->v[lo - 1].name;
}
