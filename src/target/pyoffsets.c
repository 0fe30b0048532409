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
