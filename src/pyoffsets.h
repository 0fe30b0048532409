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

#include <stdint.h>

struct py_layout {
	/* _PyRuntimeState (3.7+) */
	int32_t rt_interp_head;	   /* interpreters.head */
	int32_t rt_tstate_current; /* gilstate.tstate_current (3.7-3.11) */
	int32_t rt_autotss_key;	   /* gilstate.autoTSSkey (3.7-3.11) / autoTSSkey (3.12+) */
	/* PyInterpreterState */
	int32_t interp_next;
	int32_t interp_tstate_head; /* tstate_head (<= 3.10) / threads.head (3.11+) */
	/* PyThreadState */
	int32_t ts_next;
	int32_t ts_interp;
	int32_t ts_frame;	      /* frame (<= 3.10) */
	int32_t ts_cframe;	      /* cframe (3.11, 3.12) */
	int32_t cframe_current_frame; /* _PyCFrame.current_frame (3.11, 3.12) */
	int32_t ts_current_frame;     /* current_frame (3.13+) */
	int32_t ts_thread_id;
	int32_t ts_native_thread_id; /* 3.11+ */
	/* PyFrameObject (<= 3.10) or _PyInterpreterFrame (3.11+) */
	int32_t frame_back;	  /* f_back / previous */
	int32_t frame_code;	  /* f_code / f_executable */
	int32_t frame_lasti;	  /* f_lasti / prev_instr / instr_ptr */
	int32_t frame_owner;	  /* owner (3.11+) */
	int32_t frame_is_entry;	  /* is_entry (3.11) */
	int32_t frame_localsplus; /* f_localsplus (<= 3.10) / localsplus */
	/* PyCodeObject */
	int32_t code_argcount;
	int32_t code_varnames; /* co_varnames (<= 3.10) / co_localsplusnames (3.11+) */
	int32_t code_filename;
	int32_t code_name;
	int32_t code_qualname; /* 3.11+ */
	int32_t code_firstlineno;
	int32_t code_linetable; /* co_lnotab (<= 3.9) / co_linetable (3.10+) */
	int32_t code_adaptive;	/* co_code_adaptive (3.11+) */
	/* objects */
	int32_t obj_type;	    /* PyObject.ob_type */
	int32_t type_name;	    /* PyTypeObject.tp_name (char *) */
	int32_t type_flags;	    /* PyTypeObject.tp_flags */
	int32_t tuple_item;	    /* PyTupleObject.ob_item */
	int32_t var_size;	    /* PyVarObject.ob_size */
	int32_t bytes_sval;	    /* PyBytesObject.ob_sval (3.x) / PyStringObject.ob_sval (2.7) */
	int32_t unicode_length;	    /* PyASCIIObject.length (3.x) */
	int32_t unicode_state;	    /* PyASCIIObject.state (3.x) */
	int32_t unicode_ascii_size; /* sizeof(PyASCIIObject) (3.x) */
	int32_t unicode_compact_size; /* sizeof(PyCompactUnicodeObject) (3.x) */
};

/* One row of the generated table. */
struct py_layout_entry {
	uint32_t hexversion; /* PY_VERSION_HEX of the build the row was read from */
	const char *source;  /* where the numbers came from */
	struct py_layout layout;
};

extern const struct py_layout_entry py_layout_table[];
extern const unsigned int py_layout_table_len;

/* The row for major.minor, or NULL: a version with no row is refused, it never
 * falls through to a neighbouring row. */
const struct py_layout_entry *py_layout_find(unsigned int major, unsigned int minor);

#endif /* TAIPAN_PYOFFSETS_H */
