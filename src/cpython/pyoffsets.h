/* pyoffsets.h - CPython struct layouts: the generated table and the
 * _Py_DebugOffsets reader fill the same struct.
 *
 * Every offset is in bytes from the start of the named struct, or -1 where the
 * version has no such field. No number here is typed by hand: the table in
 * pyoffsets_table.c is written by tools/gen_offsets.py from the DWARF of real
 * builds, and 3.13+ layouts come from _Py_DebugOffsets in the target.
 */
#ifndef TAIPAN_PYOFFSETS_H
#define TAIPAN_PYOFFSETS_H

#include <stdbool.h>
#include <stdint.h>

#include "cpython/abi.h"
#include "cpython/linetable.h"

/* The fields of struct py_layout, in order: one list that the struct, the
 * capture files (src/cpython/capture.c), the _Py_DebugOffsets reader
 * (src/cpython/debugoffsets.c) and tools/gen_offsets.py read.
 *
 * X(field, HOW, MEMBER): HOW is how 3.13+ fills the field from the
 * _Py_DebugOffsets member PY_DO_MEMBER: OFFSET (an offset inside the member's
 * struct), SIZEOF (the size of a related struct), SIZEOF_OPTIONAL (the same,
 * but a version may lack the member), OFFSET_FT (an offset only free-threaded
 * builds have: 0 in a GIL build, and the field stays -1), NONE (no 3.13+ build has the field:
 * it stays -1, and MEMBER is NONE), or TABLE (_Py_DebugOffsets lacks it:
 * 3.13+ takes it from the generated row of the same minor,
 * py_layout_supp_table, and without one it stays -1; MEMBER is NONE). */
#define PY_LAYOUT_FIELDS(X)                                                                        \
	/* _PyRuntimeState (3.7+) */                                                               \
	X(rt_interp_head, OFFSET, RUNTIME_INTERPRETERS_HEAD) /* interpreters.head */               \
	X(rt_tstate_current, NONE, NONE) /* gilstate.tstate_current (3.7-3.11) */                  \
	X(rt_autotss_key, NONE, NONE)	 /* gilstate.autoTSSkey (3.7-3.11) / autoTSSkey (3.12+) */ \
	/* PyInterpreterState */                                                                   \
	X(interp_next, OFFSET, INTERP_NEXT)                                                        \
	X(interp_tstate_head, OFFSET,                                                              \
	  INTERP_THREADS_HEAD) /* tstate_head (<= 3.10) / threads.head (3.11+) */                  \
	/* PyThreadState */                                                                        \
	X(ts_next, OFFSET, TSTATE_NEXT)                                                            \
	X(ts_interp, OFFSET, TSTATE_INTERP)                                                        \
	X(ts_frame, NONE, NONE)		    /* frame (<= 3.10) */                                  \
	X(ts_cframe, NONE, NONE)	    /* cframe (3.11, 3.12) */                              \
	X(cframe_current_frame, NONE, NONE) /* _PyCFrame.current_frame (3.11, 3.12) */             \
	X(ts_current_frame, OFFSET, TSTATE_CURRENT_FRAME) /* current_frame (3.13+) */              \
	X(ts_thread_id, OFFSET, TSTATE_THREAD_ID)                                                  \
	X(ts_native_thread_id, OFFSET, TSTATE_NATIVE_THREAD_ID) /* 3.11+ */                        \
	/* PyFrameObject (<= 3.10) or _PyInterpreterFrame (3.11+) */                               \
	X(frame_back, OFFSET, FRAME_PREVIOUS)		 /* f_back / previous */                   \
	X(frame_code, OFFSET, FRAME_EXECUTABLE)		 /* f_code / f_executable */               \
	X(frame_lasti, OFFSET, FRAME_INSTR_PTR)		 /* f_lasti / prev_instr / instr_ptr */    \
	X(frame_owner, OFFSET, FRAME_OWNER)		 /* owner (3.11+) */                       \
	X(frame_gen, NONE, NONE)			 /* f_gen (3.6-3.10) */                    \
	X(frame_is_entry, NONE, NONE)			 /* is_entry (3.11) */                     \
	X(frame_localsplus, OFFSET, FRAME_LOCALSPLUS)	 /* f_localsplus (<= 3.10) / localsplus */ \
	X(frame_tlbc_index, OFFSET_FT, FRAME_TLBC_INDEX) /* tlbc_index (3.14t+) */                 \
	/* PyCodeObject */                                                                         \
	X(code_argcount, OFFSET, CODE_ARGCOUNT)                                                    \
	X(code_varnames, OFFSET,                                                                   \
	  CODE_LOCALSPLUSNAMES) /* co_varnames (<= 3.10) / co_localsplusnames (3.11+) */           \
	X(code_localspluskinds, OFFSET, CODE_LOCALSPLUSKINDS) /* co_localspluskinds (3.11+) */     \
	X(code_nlocals, NONE, NONE)			      /* co_nlocals (<= 3.10) */           \
	X(code_cellvars, NONE, NONE)			      /* co_cellvars (<= 3.10) */          \
	X(code_freevars, NONE, NONE)			      /* co_freevars (<= 3.10) */          \
	X(code_filename, OFFSET, CODE_FILENAME)                                                    \
	X(code_name, OFFSET, CODE_NAME)                                                            \
	X(code_qualname, OFFSET, CODE_QUALNAME) /* 3.11+ */                                        \
	X(code_firstlineno, OFFSET, CODE_FIRSTLINENO)                                              \
	X(code_linetable, OFFSET, CODE_LINETABLE) /* co_lnotab (<= 3.9) / co_linetable (3.10+) */  \
	X(code_adaptive, OFFSET, CODE_CO_CODE_ADAPTIVE) /* co_code_adaptive (3.11+) */             \
	X(code_tlbc, OFFSET_FT, CODE_TLBC)		/* co_tlbc (3.14t+) */                     \
	/* objects */                                                                              \
	X(obj_type, OFFSET, PYOBJECT_OB_TYPE) /* PyObject.ob_type */                               \
	X(type_name, OFFSET, TYPE_TP_NAME)    /* PyTypeObject.tp_name (char *) */                  \
	X(type_flags, OFFSET, TYPE_TP_FLAGS)  /* PyTypeObject.tp_flags */                          \
	X(tuple_item, OFFSET, TUPLE_OB_ITEM)  /* PyTupleObject.ob_item */                          \
	X(var_size, OFFSET, TUPLE_OB_SIZE)    /* PyVarObject.ob_size (3.13+: the tuple's) */       \
	X(bytes_sval, OFFSET,                                                                      \
	  BYTES_OB_SVAL) /* PyBytesObject.ob_sval (3.x) / PyStringObject.ob_sval (2.7) */          \
	X(unicode_length, OFFSET, UNICODE_LENGTH)		/* PyASCIIObject.length (3.x) */   \
	X(unicode_state, OFFSET, UNICODE_STATE)			/* PyASCIIObject.state (3.x) */    \
	X(unicode_ascii_size, SIZEOF, UNICODE_ASCIIOBJECT_SIZE) /* sizeof(PyASCIIObject) (3.x) */  \
	X(unicode_compact_size, SIZEOF_OPTIONAL,                                                   \
	  UNICODE_COMPACTUNICODEOBJECT_SIZE) /* sizeof(PyCompactUnicodeObject) (3.x) */            \
	/* What thread names need (src/cpython/pythreads.c): sys.modules, dicts, */                \
	/* instance attributes and ints. From the table for every version. */                      \
	X(interp_modules, TABLE, NONE)	    /* modules (<= 3.11) / imports.modules */              \
	X(module_dict, TABLE, NONE)	    /* PyModuleObject.md_dict */                           \
	X(dict_mask, TABLE, NONE)	    /* PyDictObject.ma_mask (2.7) */                       \
	X(dict_table, TABLE, NONE)	    /* PyDictObject.ma_table (2.7) */                      \
	X(dict_keys, TABLE, NONE)	    /* PyDictObject.ma_keys (3.6+) */                      \
	X(dict_values, TABLE, NONE)	    /* PyDictObject.ma_values (3.6+) */                    \
	X(dk_size, TABLE, NONE)		    /* PyDictKeysObject.dk_size (3.6-3.10) */              \
	X(dk_log2_size, TABLE, NONE)	    /* dk_log2_size (3.11+) */                             \
	X(dk_log2_index_bytes, TABLE, NONE) /* dk_log2_index_bytes (3.11+) */                      \
	X(dk_kind, TABLE, NONE)		    /* dk_kind (3.11+) */                                  \
	X(dk_nentries, TABLE, NONE)	    /* dk_nentries (3.6+) */                               \
	X(dk_indices, TABLE, NONE)	    /* dk_indices (3.6+) */                                \
	X(entry_size, TABLE, NONE)	/* sizeof(PyDictKeyEntry) / sizeof(PyDictEntry) (2.7) */   \
	X(entry_key, TABLE, NONE)	/* me_key */                                               \
	X(entry_value, TABLE, NONE)	/* me_value */                                             \
	X(uentry_size, TABLE, NONE)	/* sizeof(PyDictUnicodeEntry) (3.11+) */                   \
	X(uentry_key, TABLE, NONE)	/* PyDictUnicodeEntry.me_key (3.11+) */                    \
	X(uentry_value, TABLE, NONE)	/* PyDictUnicodeEntry.me_value (3.11+) */                  \
	X(values_values, TABLE, NONE)	/* PyDictValues.values (3.11+) */                          \
	X(values_capacity, TABLE, NONE) /* PyDictValues.capacity (3.13+) */                        \
	X(values_valid, TABLE, NONE)	/* PyDictValues.valid (3.13+) */                           \
	X(type_basicsize, TABLE, NONE)	/* PyTypeObject.tp_basicsize */                            \
	X(type_dictoffset, TABLE, NONE) /* PyTypeObject.tp_dictoffset */                           \
	X(heaptype_cached_keys, TABLE, NONE) /* PyHeapTypeObject.ht_cached_keys (3.6+) */          \
	X(int_ival, TABLE, NONE)	     /* PyIntObject.ob_ival (2.7) */                       \
	X(long_digit, TABLE, NONE)	     /* PyLongObject ob_digit (3.x) */                     \
	X(long_tag, TABLE, NONE)	     /* PyLongObject long_value.lv_tag (3.12+) */          \
	X(long_digit_size, TABLE, NONE)	     /* sizeof(digit) (3.x): 4 for 30-bit digits */        \
	/* What dump --locals reads of values (src/cpython/pylocals.c). */                         \
	X(float_fval, TABLE, NONE) /* PyFloatObject.ob_fval */                                     \
	X(cell_ref, TABLE, NONE)   /* PyCellObject.ob_ref */                                       \
	X(dict_used, TABLE, NONE)  /* PyDictObject.ma_used */                                      \
	X(set_used, TABLE, NONE)   /* PySetObject.used */                                          \
	/* What dump --tasks reads (src/cpython/pytasks.c): sets, weak */                          \
	/* references, base types, coroutines and what they await. */                              \
	X(list_item, TABLE, NONE)	    /* PyListObject.ob_item */                             \
	X(set_mask, TABLE, NONE)	    /* PySetObject.mask */                                 \
	X(set_table, TABLE, NONE)	    /* PySetObject.table */                                \
	X(weakref_object, TABLE, NONE)	    /* PyWeakReference.wr_object */                        \
	X(type_base, TABLE, NONE)	    /* PyTypeObject.tp_base */                             \
	X(gen_frame, TABLE, NONE)	    /* PyGenObject.gi_frame (<= 3.10) */                   \
	X(gen_iframe, TABLE, NONE)	    /* PyGenObject.gi_iframe (3.11+, embedded) */          \
	X(gen_frame_state, TABLE, NONE)	    /* PyGenObject.gi_frame_state (3.11+, int8) */         \
	X(code_code, TABLE, NONE)	    /* co_code (<= 3.10) */                                \
	X(frame_stacktop, TABLE, NONE)	    /* PyFrameObject.f_stacktop (<= 3.9) */                \
	X(frame_stackdepth, TABLE, NONE)    /* PyFrameObject.f_stackdepth (3.10) */                \
	X(frame_valuestack, TABLE, NONE)    /* PyFrameObject.f_valuestack (<= 3.10) */             \
	X(frame_state, TABLE, NONE)	    /* PyFrameObject.f_state (3.10, int8) */               \
	X(iframe_stacktop, TABLE, NONE)	    /* _PyInterpreterFrame.stacktop (3.11-3.13, int) */    \
	X(iframe_stackpointer, TABLE, NONE) /* _PyInterpreterFrame.stackpointer (3.14+) */         \
	/* The GIL (struct _gil_runtime_state): from the table; for a 3.14+ */                     \
	/* without a row, from _Py_DebugOffsets (debugoffsets.c). */                               \
	X(rt_gil, TABLE, NONE)	   /* _PyRuntimeState.ceval.gil (3.7-3.11) */                      \
	X(interp_gil, TABLE, NONE) /* PyInterpreterState.ceval.gil, a pointer (3.12+) */           \
	X(gil_locked, TABLE, NONE) /* _gil_runtime_state.locked (3.7+) */                          \
	X(gil_holder, TABLE, NONE) /* _gil_runtime_state.last_holder (3.7+) */

struct py_layout {
#define PY_LAYOUT_FIELD(name, how, member) int32_t name;
	PY_LAYOUT_FIELDS(PY_LAYOUT_FIELD)
#undef PY_LAYOUT_FIELD
};

/* One row of the generated table. */
struct py_layout_entry {
	uint32_t hexversion; /* PY_VERSION_HEX of the build the row was read from */
	const char *source;  /* where the numbers came from */
	bool free_threaded;  /* a free-threaded build's layout (supplementary rows only) */
	struct py_layout layout;
};

extern const struct py_layout_entry py_layout_table[];
extern const unsigned int py_layout_table_len;

/* For 3.13+, one row per minor and kind of build (GIL, free-threaded) with
 * the TABLE fields (the rest -1): what _Py_DebugOffsets does not say. */
extern const struct py_layout_entry py_layout_supp_table[];
extern const unsigned int py_layout_supp_table_len;

/* Copies the TABLE fields of major.minor's supplementary row for that kind
 * of build (free-threaded or not) into *l; fields of a minor with no row stay
 * as they are. Returns whether there was one. */
bool py_layout_supplement(unsigned int major, unsigned int minor, bool free_threaded,
			  struct py_layout *l);

/* What a version's walk needs beyond its offsets: the walker's TP_LF_* flags,
 * the line-table format, and whether the frame position counts code units.
 * Generated with the layouts, from tools/gen_offsets.py's CAPS, which checks
 * each row against the DWARF of the builds it covers. A row applies from its
 * version up to the next row of the same major. */
/* Where a Python object's instance attributes are (its __dict__). */
enum py_objdict {
	/* A PyDictObject * at tp_dictoffset (<= 3.10, and every type without
	 * Py_TPFLAGS_MANAGED_DICT later). */
	PY_OD_DICTOFFSET = 0,
	/* Py_TPFLAGS_MANAGED_DICT (bpo-45340): the dict pointer 3 words before
	 * the object, the values pointer 4 words before it (3.11). */
	PY_OD_MANAGED_VALUES_PTR,
	/* One PyDictOrValues 3 words before the object: a dict, or values
	 * tagged with bit 0 set (gh-95245, 3.12). */
	PY_OD_MANAGED_TAGGED,
	/* The dict pointer 3 words before the object (1 word in a
	 * free-threaded build, which has no GC links there); values inline
	 * after it, at tp_basicsize, when the type has
	 * Py_TPFLAGS_INLINE_VALUES (gh-115776, 3.13+). */
	PY_OD_MANAGED_INLINE,
};

struct py_caps {
	unsigned int major, minor;
	uint32_t lflags;
	enum py_linetable_kind linetable;
	bool lasti_in_units;
	enum py_objdict objdict;
};

extern const struct py_caps py_caps_table[];
extern const unsigned int py_caps_table_len;

/* The capabilities of major.minor: the newest row at or below it of the same
 * major, or NULL for a version older than every row (2.6, 3.5). */
const struct py_caps *py_caps_find(unsigned int major, unsigned int minor);

/* The row for major.minor, or NULL: a version with no row is refused, it never
 * falls through to a neighbouring row. */
const struct py_layout_entry *py_layout_find(unsigned int major, unsigned int minor);

#endif /* TAIPAN_PYOFFSETS_H */
