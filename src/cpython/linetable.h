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
 * instruction has no line. Never reads outside table[0..len).
 *
 * The results are those of CPython's PyCode_Addr2Line() for the same table
 * (checked offset by offset against every installed interpreter by
 * tests/unit/test_linetable.c):
 *  - LNOTAB kinds: an empty table gives firstlineno, and an offset past the
 *    end of the table gives the last line reached.
 *  - LINETABLE and LOCATIONS: an empty table, an offset past the end of the
 *    table, a 3.10 entry with line delta -128 and a 3.11+ entry of code 15
 *    all give -1. A 3.11+ offset inside an inline CACHE gives the line of the
 *    entry covering that code unit, that is, of its instruction.
 * A frame that has not started (lasti -1) is the caller's business: CPython
 * reports co_firstlineno for it.
 * Any bytes are safe: the walk is linear in len and never loops forever, and
 * garbage gives an unspecified line >= 0 or -1. table may be NULL when len
 * is 0. The cost is O(len), so callers should cache results per code object.
 */
int py_linetable_line(enum py_linetable_kind kind, const uint8_t *table, size_t len,
		      int firstlineno, uint32_t byte_off);

/* As py_linetable_line(), but an instruction the compiler gave no location
 * (a 3.10 entry with line delta -128, a 3.11+ entry of code 15: the end of a
 * class body storing __static_attributes__, exception cleanup) gives the line
 * of the last instruction before it that has one, else firstlineno: the line
 * a profile shows for a frame stopped there. Past the end it is still -1. */
int py_linetable_line_near(enum py_linetable_kind kind, const uint8_t *table, size_t len,
			   int firstlineno, uint32_t byte_off);

#endif /* TAIPAN_LINETABLE_H */
