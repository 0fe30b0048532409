/* pylocals.h - the variables of a Python frame of a live process, with
 * values for the simple types and type and length for containers: what
 * `taipan dump --locals` prints (doc/design/python-stacks.md, "Locals").
 *
 * Nothing is called in the target and no chain is followed without a
 * bound: a frame's names and slots, one object a slot points to (and the
 * cell it may be), and that object's own fields.
 */
#ifndef TAIPAN_CPYTHON_PYLOCALS_H
#define TAIPAN_CPYTHON_PYLOCALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/runtime.h"
#include "cpython/pyproc.h"

/* Variables read of one frame at most, and reads spent on them. */
#define PYLOCALS_MAX 256
#define PYLOCALS_READS 4096
/* Characters of a str and bytes of a bytes object shown; more are cut
 * ("..."). */
#define PYLOCALS_STR_CHARS 80
#define PYLOCALS_BYTES 48

/* The variables of the frame at frame (a PyFrameObject before 3.11, else a
 * _PyInterpreterFrame) running code, into out[0..max), in the code's order
 * (arguments first), unbound ones left out. Returns how many, *cut set
 * when some were left out (past max, or unreadable); -ENOTSUP when the
 * layout lacks what it needs; -ESRCH when the process is gone; -EFAULT
 * when the code object's names cannot be read. */
int pylocals_read(const struct pyproc *pp, uint64_t code, uint64_t frame, struct rt_local *out,
		  size_t max, bool *cut);

/* value as Python's repr() writes a float, into buf. */
void pylocals_float_repr(double value, char *buf, size_t cap);

#endif /* TAIPAN_CPYTHON_PYLOCALS_H */
