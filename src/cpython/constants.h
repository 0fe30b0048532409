/* constants.h - the constants of CPython that taipan's walkers and symbolizer
 * depend on, in one place for BPF and user space alike.
 *
 * Offsets are never here: they come from the generated table or from the
 * target's _Py_DebugOffsets (src/cpython/pyoffsets.h). These are the few values that
 * are not offsets, each with where CPython defines it.
 */
#ifndef TAIPAN_CPYTHON_CONSTANTS_H
#define TAIPAN_CPYTHON_CONSTANTS_H

/* Include/object.h: Py_TPFLAGS_TYPE_SUBCLASS, set on every type whose
 * instances are classes. Bit 31 since 2.x. */
#define PY_TPFLAGS_TYPE_SUBCLASS (1UL << 31)

/* Include/internal/pycore_frame.h (3.12+): frames with owner >= 3 belong to
 * the C stack: shims, entry frames, and on 3.15 the sentinel base frame.
 * The enumerator's name changed (FRAME_OWNED_BY_CSTACK, then
 * FRAME_OWNED_BY_INTERPRETER), the boundary stayed 3. */
#define PY_OWNER_NOT_PYTHON 3
/* FRAME_OWNED_BY_GENERATOR (3.11+): a generator's or coroutine's frame,
 * embedded in it (gi_iframe). */
#define PY_OWNER_GENERATOR 1

/* Include/cpython/unicodeobject.h, PyASCIIObject.state of a GIL build
 * (3.3 to 3.15): interned takes 2 bits (3.3-3.13; 3.14 keeps the
 * position), then kind (3 bits), compact, ascii. */
#define PY_STATE_KIND_SHIFT 2
#define PY_STATE_KIND_MASK 7
#define PY_STATE_COMPACT_SHIFT 5
#define PY_STATE_ASCII_SHIFT 6
/* The free-threaded build (Py_GIL_DISABLED) of 3.14 and later makes
 * interned a whole byte, to be read atomically, so kind, compact and ascii
 * follow at bit 8 (the same three bits, in the same order, 6 higher). 3.13t
 * keeps the GIL build's bits: its header has no such #ifdef. */
#define PY_STATE_FT_SHIFT 6
#define PY_STATE_FT_SINCE_MINOR 14

/* 3.14t and later: thread-local bytecode (gh-115999). A frame's instr_ptr
 * may point into its thread's copy of the code, co_tlbc->entries[
 * tlbc_index], and _Py_DebugOffsets must say where both are. */
#define PY_FT_TLBC_SINCE_MINOR 14

/* Include/object.h of a free-threaded build: ob_ref_local (uint32_t) and
 * ob_ref_shared (Py_ssize_t, the count shifted left by 2 above 2 flag
 * bits) are the 12 bytes just before ob_type. */
#define PY_FT_REF_LOCAL_BEFORE_TYPE 12
#define PY_FT_REF_SHARED_BEFORE_TYPE 8
#define PY_FT_REF_SHARED_SHIFT 2

/* Include/object.h: Py_TPFLAGS_MANAGED_DICT (3.11+, bpo-45340) and
 * Py_TPFLAGS_INLINE_VALUES (3.13+, gh-115776). Used only with the layouts
 * that have them (enum py_objdict). */
#define PY_TPFLAGS_MANAGED_DICT (1UL << 4)
#define PY_TPFLAGS_INLINE_VALUES (1UL << 2)
/* Include/internal/pycore_object.h: MANAGED_DICT_OFFSET of a GIL build,
 * the managed dict (or 3.12's dict-or-values) 3 words before the object
 * (3.11+), and 3.11's values pointer 4 words before it
 * (_PyObject_ValuesPointer). */
#define PY_MANAGED_DICT_OFFSET (-3 * 8)
/* ...and of a free-threaded build (3.13t+), which has no GC links before
 * the object, only the managed dict and weak references: 1 word before it. */
#define PY_FT_MANAGED_DICT_OFFSET (-1 * 8)
#define PY_MANAGED_VALUES_OFFSET_311 (-4 * 8)

/* Include/internal/pycore_dict.h (3.11+): dk_kind DICT_KEYS_GENERAL, whose
 * entries have a hash; unicode and split keys have none. */
#define PY_DICT_KEYS_GENERAL 0

#endif /* TAIPAN_CPYTHON_CONSTANTS_H */
