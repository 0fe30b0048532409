/* rboffsets.c - the layout of a Ruby version (rboffsets.h). */
#include "ruby/rboffsets.h"

const struct rb_offsets *rb_offsets_find(unsigned int major, unsigned int minor)
{
	for (size_t i = 0; i < rb_offsets_count; i++)
		if (rb_offsets_table[i].major == major && rb_offsets_table[i].minor == minor)
			return &rb_offsets_table[i];
	return NULL;
}
