/* linetable.h - the line number being run, from a code object's line table. */
#ifndef TAIPAN_LINETABLE_H
#define TAIPAN_LINETABLE_H

#include <stddef.h>
#include <stdint.h>

enum py_linetable_kind {
	PY_LT_LNOTAB_U8 = 1, /* co_lnotab, unsigned line increments (2.7) */
	PY_LT_LNOTAB = 2,    /* co_lnotab, signed line increments (3.6-3.9) */
	PY_LT_LINETABLE = 3, /* co_linetable of 3.10 */
	PY_LT_LOCATIONS = 4, /* the location table of 3.11+ */
};

/* The line of the instruction at byte offset byte_off into the bytecode
 * (for 3.11+ pass 2 * code-unit index). Returns the line, or -1 when the
 * instruction has no line. Never reads outside table[0..len). */
int py_linetable_line(enum py_linetable_kind kind, const uint8_t *table, size_t len,
		      int firstlineno, uint32_t byte_off);

#endif /* TAIPAN_LINETABLE_H */
