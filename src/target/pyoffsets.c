/* pyoffsets.c - looks up the generated CPython layout table by version. */
#include <stddef.h>

#include "target/pyoffsets.h"

const struct py_layout_entry *py_layout_find(unsigned int major, unsigned int minor)
{
	for (unsigned int i = 0; i < py_layout_table_len; i++) {
		const struct py_layout_entry *e = &py_layout_table[i];

		if (e->hexversion >> 24 == major && ((e->hexversion >> 16) & 0xff) == minor)
			return e;
	}
	return NULL;
}

const struct py_caps *py_caps_find(unsigned int major, unsigned int minor)
{
	const struct py_caps *best = NULL;
	for (unsigned int i = 0; i < py_caps_table_len; i++) {
		const struct py_caps *c = &py_caps_table[i];
		if (c->major == major && c->minor <= minor)
			best = c;
	}
	/* 2.7 is the only 2.x there is. */
	if (best && major == 2 && minor != best->minor)
		return NULL;
	return best;
}
