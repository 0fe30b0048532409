/* pyoffsets.c - looks up the generated CPython layout table by version. */
#include <stdbool.h>
#include <stddef.h>

#include "cpython/pyoffsets.h"

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

bool py_layout_supplement(unsigned int major, unsigned int minor, bool free_threaded,
			  struct py_layout *l)
{
	for (unsigned int i = 0; i < py_layout_supp_table_len; i++) {
		const struct py_layout_entry *e = &py_layout_supp_table[i];
		if (e->hexversion >> 24 != major || ((e->hexversion >> 16) & 0xff) != minor ||
		    e->free_threaded != free_threaded)
			continue;
#define SUPP_NONE(field)
#define SUPP_OFFSET(field)
#define SUPP_OFFSET_FT(field)
#define SUPP_SIZEOF(field)
#define SUPP_SIZEOF_OPTIONAL(field)
#define SUPP_TABLE(field) l->field = e->layout.field;
#define SUPP_FIELD(field, how, member) SUPP_##how(field)
		PY_LAYOUT_FIELDS(SUPP_FIELD)
#undef SUPP_FIELD
#undef SUPP_TABLE
#undef SUPP_SIZEOF_OPTIONAL
#undef SUPP_SIZEOF
#undef SUPP_OFFSET_FT
#undef SUPP_OFFSET
#undef SUPP_NONE
		return true;
	}
	return false;
}
