/* fuzz_linetable.c - libFuzzer target: the line-table decoders of every kind.
 *
 * Input: u8 kind (taken modulo 4), i32 firstlineno, u32 byte offset, then the
 * table. The table is copied to a buffer of exactly its size, so a read past
 * its end is an AddressSanitizer error, and decoded at the given offset and
 * at a spread of others.
 */
#include <stdlib.h>
#include <string.h>

#include "cpython/linetable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum py_linetable_kind kinds[] = {PY_LT_LNOTAB_U8, PY_LT_LNOTAB,
						       PY_LT_LINETABLE, PY_LT_LOCATIONS};
	int32_t first;
	uint32_t off;

	if (size < 9)
		return 0;
	enum py_linetable_kind kind = kinds[data[0] & 3];
	memcpy(&first, data + 1, 4);
	memcpy(&off, data + 5, 4);
	size_t len = size - 9;
	uint8_t *t = len ? malloc(len) : NULL;
	if (len && !t)
		return 0;
	if (len)
		memcpy(t, data + 9, len);

	uint32_t offs[] = {off, 0, 1, 2, (uint32_t)len, (uint32_t)len * 2, UINT32_MAX, off / 2};
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		int line = py_linetable_line(kind, t, len, first, offs[i]);
		if (line < -1)
			abort();
	}
	free(t);
	return 0;
}
