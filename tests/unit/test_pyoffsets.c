/* test_pyoffsets.c - unit tests for the generated layout table and the _Py_DebugOffsets reader.
 *
 * The reader is checked two ways: against synthetic structs built from the
 * generated member positions (malformed input of every kind, no files needed),
 * and against the real _Py_DebugOffsets bytes of each pyenv 3.13+ libpython,
 * whose parsed layout must equal the one gen_offsets.py read from the same
 * library's DWARF. Set TAIPAN_PYENV to use another pyenv versions directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <gelf.h>

#include "taipan_abi.h"
#include "cpython/debugoffsets.h"
#include "cpython/pyoffsets.h"
#include "cpython/pytasks.h"
#include "pyoffsets_dwarf_gen.h"

#define DEFAULT_PYENV "/root/.pyenv/versions"

/* Every field of struct py_layout by name, so that comparisons can say which
 * field differs. The static assert below fails when a field is added to the
 * struct but not here. */
#define LAYOUT_FIELDS(X)                                                                           \
	X(rt_interp_head)                                                                          \
	X(rt_tstate_current)                                                                       \
	X(rt_autotss_key)                                                                          \
	X(interp_next)                                                                             \
	X(interp_tstate_head)                                                                      \
	X(ts_next)                                                                                 \
	X(ts_interp)                                                                               \
	X(ts_frame)                                                                                \
	X(ts_cframe)                                                                               \
	X(cframe_current_frame)                                                                    \
	X(ts_current_frame)                                                                        \
	X(ts_thread_id)                                                                            \
	X(ts_native_thread_id)                                                                     \
	X(frame_back)                                                                              \
	X(frame_code)                                                                              \
	X(frame_lasti)                                                                             \
	X(frame_owner)                                                                             \
	X(frame_gen)                                                                               \
	X(frame_is_entry)                                                                          \
	X(frame_localsplus)                                                                        \
	X(frame_tlbc_index)                                                                        \
	X(code_argcount)                                                                           \
	X(code_varnames)                                                                           \
	X(code_localspluskinds)                                                                    \
	X(code_nlocals)                                                                            \
	X(code_cellvars)                                                                           \
	X(code_freevars)                                                                           \
	X(code_filename)                                                                           \
	X(code_name)                                                                               \
	X(code_qualname)                                                                           \
	X(code_firstlineno)                                                                        \
	X(code_linetable)                                                                          \
	X(code_adaptive)                                                                           \
	X(code_tlbc)                                                                               \
	X(obj_type)                                                                                \
	X(type_name)                                                                               \
	X(type_flags)                                                                              \
	X(tuple_item)                                                                              \
	X(var_size)                                                                                \
	X(bytes_sval)                                                                              \
	X(unicode_length)                                                                          \
	X(unicode_state)                                                                           \
	X(unicode_ascii_size)                                                                      \
	X(unicode_compact_size)                                                                    \
	X(interp_modules)                                                                          \
	X(module_dict)                                                                             \
	X(dict_mask)                                                                               \
	X(dict_table)                                                                              \
	X(dict_keys)                                                                               \
	X(dict_values)                                                                             \
	X(dk_size)                                                                                 \
	X(dk_log2_size)                                                                            \
	X(dk_log2_index_bytes)                                                                     \
	X(dk_kind)                                                                                 \
	X(dk_nentries)                                                                             \
	X(dk_indices)                                                                              \
	X(entry_size)                                                                              \
	X(entry_key)                                                                               \
	X(entry_value)                                                                             \
	X(uentry_size)                                                                             \
	X(uentry_key)                                                                              \
	X(uentry_value)                                                                            \
	X(values_values)                                                                           \
	X(values_capacity)                                                                         \
	X(values_valid)                                                                            \
	X(type_basicsize)                                                                          \
	X(type_dictoffset)                                                                         \
	X(heaptype_cached_keys)                                                                    \
	X(int_ival)                                                                                \
	X(long_digit)                                                                              \
	X(long_tag)                                                                                \
	X(long_digit_size)                                                                         \
	X(float_fval)                                                                              \
	X(cell_ref)                                                                                \
	X(dict_used)                                                                               \
	X(set_used)                                                                                \
	X(list_item)                                                                               \
	X(set_mask)                                                                                \
	X(set_table)                                                                               \
	X(weakref_object)                                                                          \
	X(type_base)                                                                               \
	X(gen_frame)                                                                               \
	X(gen_iframe)                                                                              \
	X(gen_frame_state)                                                                         \
	X(code_code)                                                                               \
	X(frame_stacktop)                                                                          \
	X(frame_stackdepth)                                                                        \
	X(frame_valuestack)                                                                        \
	X(frame_state)                                                                             \
	X(iframe_stacktop)                                                                         \
	X(iframe_stackpointer)                                                                     \
	X(rt_gil)                                                                                  \
	X(interp_gil)                                                                              \
	X(gil_locked)                                                                              \
	X(gil_holder)

struct field {
	const char *name;
	size_t off;
};

static const struct field fields[] = {
#define FIELD_ENTRY(f) {#f, offsetof(struct py_layout, f)},
    LAYOUT_FIELDS(FIELD_ENTRY)
#undef FIELD_ENTRY
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

_Static_assert(NFIELDS * sizeof(int32_t) == sizeof(struct py_layout),
	       "LAYOUT_FIELDS must list every field of struct py_layout");

/* Fields _Py_DebugOffsets has no member for: the reader must leave them -1. */
static const char *const no_debug_offset[] = {
    "rt_tstate_current", "rt_autotss_key", "ts_frame",	   "ts_cframe",	    "cframe_current_frame",
    "frame_is_entry",	 "rt_gil",	   "code_nlocals", "code_cellvars", "code_freevars",
};

static int32_t field_get(const struct py_layout *l, const struct field *f)
{
	int32_t v;

	memcpy(&v, (const char *)l + f->off, sizeof(v));
	return v;
}

static unsigned int ver_major(uint64_t hex)
{
	return (hex >> 24) & 0xff;
}

static unsigned int ver_minor(uint64_t hex)
{
	return (hex >> 16) & 0xff;
}

static int ver_ge(uint64_t hex, unsigned int major, unsigned int minor)
{
	return ver_major(hex) > major || (ver_major(hex) == major && ver_minor(hex) >= minor);
}

/* --- the generated table ---------------------------------------------------- */

#define CHECK_FIELD(row, cond, field)                                                              \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			print_error("%s: %s = %d violates %s\n", (row)->source, #field,            \
				    (row)->layout.field, #cond);                                   \
			fail();                                                                    \
		}                                                                                  \
	} while (0)

#define PRESENT(row, field) CHECK_FIELD(row, (row)->layout.field >= 0, field)
#define ABSENT(row, field) CHECK_FIELD(row, (row)->layout.field == -1, field)
#define PRESENT_IF(row, cond, field)                                                               \
	do {                                                                                       \
		if (cond)                                                                          \
			PRESENT(row, field);                                                       \
		else                                                                               \
			ABSENT(row, field);                                                        \
	} while (0)

static void test_table_rows(void **state)
{
	(void)state;
	assert_true(py_layout_table_len > 0);
	for (unsigned int i = 0; i < py_layout_table_len; i++) {
		const struct py_layout_entry *e = &py_layout_table[i];
		uint64_t v = e->hexversion;

		assert_non_null(e->source);
		assert_non_null(strstr(e->source, "DWARF"));
		/* 3.13+ takes its layout from the target's _Py_DebugOffsets. */
		assert_false(ver_ge(v, 3, 13));
		assert_true(ver_major(v) == 2 || ver_major(v) == 3);
		if (i > 0) /* sorted, one row per minor */
			assert_true(ver_ge(v, ver_major(py_layout_table[i - 1].hexversion),
					   ver_minor(py_layout_table[i - 1].hexversion) + 1));

		for (size_t f = 0; f < NFIELDS; f++) {
			int32_t x = field_get(&e->layout, &fields[f]);

			if (x < -1 || x >= 1 << 16) {
				print_error("%s: %s = %d is no plausible offset\n", e->source,
					    fields[f].name, x);
				fail();
			}
		}

		/* What dump --locals reads: a frame's names and their kinds (a
		 * tuple for each kind before 3.11), and values. */
		PRESENT_IF(e, ver_ge(v, 3, 11), code_localspluskinds);
		PRESENT_IF(e, !ver_ge(v, 3, 11), code_nlocals);
		PRESENT_IF(e, !ver_ge(v, 3, 11), code_cellvars);
		PRESENT_IF(e, !ver_ge(v, 3, 11), code_freevars);
		PRESENT(e, float_fval);
		PRESENT(e, cell_ref);
		PRESENT(e, dict_used);
		PRESENT(e, set_used);
		/* What dump --tasks reads: sets and weak references (the
		 * registries of tasks), base types, coroutines' frames and what
		 * each awaits. */
		PRESENT(e, list_item);
		PRESENT(e, set_mask);
		PRESENT(e, set_table);
		PRESENT(e, weakref_object);
		PRESENT(e, type_base);
		PRESENT_IF(e, !ver_ge(v, 3, 11), gen_frame);
		PRESENT_IF(e, ver_ge(v, 3, 11), gen_iframe);
		PRESENT_IF(e, ver_ge(v, 3, 11), gen_frame_state);
		PRESENT_IF(e, !ver_ge(v, 3, 11), code_code);
		PRESENT_IF(e, !ver_ge(v, 3, 10), frame_stacktop);
		PRESENT_IF(e, !ver_ge(v, 3, 11) && ver_ge(v, 3, 10), frame_stackdepth);
		PRESENT_IF(e, !ver_ge(v, 3, 11), frame_valuestack);
		PRESENT_IF(e, !ver_ge(v, 3, 11) && ver_ge(v, 3, 10), frame_state);
		PRESENT_IF(e, ver_ge(v, 3, 11), iframe_stacktop);
		ABSENT(e, iframe_stackpointer); /* 3.14+, which has no row here */

		/* Everything a walk needs, on every version. */
		PRESENT(e, interp_next);
		PRESENT(e, interp_tstate_head);
		PRESENT(e, ts_next);
		PRESENT(e, ts_interp);
		PRESENT(e, ts_thread_id);
		PRESENT(e, frame_back);
		PRESENT(e, frame_code);
		PRESENT(e, frame_lasti);
		PRESENT(e, frame_localsplus);
		PRESENT(e, code_argcount);
		PRESENT(e, code_varnames);
		PRESENT(e, code_filename);
		PRESENT(e, code_name);
		PRESENT(e, code_firstlineno);
		PRESENT(e, code_linetable);
		PRESENT(e, obj_type);
		PRESENT(e, type_name);
		PRESENT(e, type_flags);
		PRESENT(e, tuple_item);
		PRESENT(e, var_size);
		PRESENT(e, bytes_sval);
		ABSENT(e, ts_current_frame);

		/* _PyRuntimeState appeared in 3.7. */
		PRESENT_IF(e, ver_ge(v, 3, 7), rt_interp_head);
		PRESENT_IF(e, ver_ge(v, 3, 7), rt_autotss_key);
		PRESENT_IF(e, ver_ge(v, 3, 7) && !ver_ge(v, 3, 12), rt_tstate_current);
		/* The frame moved behind cframe in 3.11. */
		PRESENT_IF(e, !ver_ge(v, 3, 11), ts_frame);
		PRESENT_IF(e, ver_ge(v, 3, 11), ts_cframe);
		PRESENT_IF(e, ver_ge(v, 3, 11), cframe_current_frame);
		PRESENT_IF(e, ver_ge(v, 3, 11), ts_native_thread_id);
		PRESENT_IF(e, ver_ge(v, 3, 11), frame_owner);
		PRESENT_IF(e, ver_ge(v, 3, 6) && !ver_ge(v, 3, 11), frame_gen);
		PRESENT_IF(e, ver_ge(v, 3, 11) && !ver_ge(v, 3, 12), frame_is_entry);
		PRESENT_IF(e, ver_ge(v, 3, 11), code_qualname);
		PRESENT_IF(e, ver_ge(v, 3, 11), code_adaptive);
		/* PEP 393 strings: 3.x only here. */
		PRESENT_IF(e, ver_major(v) == 3, unicode_length);
		PRESENT_IF(e, ver_major(v) == 3, unicode_state);
		PRESENT_IF(e, ver_major(v) == 3, unicode_ascii_size);
		PRESENT_IF(e, ver_major(v) == 3, unicode_compact_size);
		if (ver_major(v) == 3)
			CHECK_FIELD(e,
				    e->layout.unicode_compact_size > e->layout.unicode_ascii_size,
				    unicode_compact_size);
		/* The GIL: in _PyRuntime from 3.7, behind each interpreter's
		 * pointer from 3.12; 2.7's and 3.6's is static, unlabelled. */
		PRESENT_IF(e, ver_ge(v, 3, 7) && !ver_ge(v, 3, 12), rt_gil);
		PRESENT_IF(e, ver_ge(v, 3, 12), interp_gil);
		PRESENT_IF(e, ver_ge(v, 3, 7), gil_locked);
		PRESENT_IF(e, ver_ge(v, 3, 7), gil_holder);
		if (ver_ge(v, 3, 7))
			CHECK_FIELD(e, e->layout.gil_locked != e->layout.gil_holder, gil_locked);
	}
}

static void test_find(void **state)
{
	(void)state;
	for (unsigned int i = 0; i < py_layout_table_len; i++) {
		const struct py_layout_entry *e = &py_layout_table[i];

		assert_ptr_equal(py_layout_find(ver_major(e->hexversion), ver_minor(e->hexversion)),
				 e);
	}
	/* No fall-through to a neighbouring row, ever. */
	assert_null(py_layout_find(3, 99));
	assert_null(py_layout_find(3, 13));
	/* 3.14 and 3.15 run on _Py_DebugOffsets alone: the table knows nothing of them. */
	assert_null(py_layout_find(3, 14));
	assert_null(py_layout_find(3, 15));
	assert_null(py_layout_find(4, 0));
	assert_null(py_layout_find(0, 0));
	assert_null(py_layout_find(3 + 256, 8));
	assert_null(py_layout_find(3, 8 + 256));
	assert_non_null(py_layout_find(3, 8));
	assert_non_null(py_layout_find(3, 12));
}

/* The generated capability rows: ordered, and found for every version the
 * matrix runs, with a newer minor taking the newest row of its major. */
static void test_caps_find(void **state)
{
	(void)state;
	assert_true(py_caps_table_len >= 2);
	for (unsigned int i = 1; i < py_caps_table_len; i++) {
		const struct py_caps *a = &py_caps_table[i - 1], *b = &py_caps_table[i];
		assert_true(a->major < b->major || (a->major == b->major && a->minor < b->minor));
	}
	for (unsigned int i = 0; i < py_caps_table_len; i++) {
		const struct py_caps *c = &py_caps_table[i];
		assert_ptr_equal(py_caps_find(c->major, c->minor), c);
	}
	/* Every layout row has capabilities, and they agree with what the row
	 * can show: a frame chain through tstate->cframe only with its flag. */
	for (unsigned int i = 0; i < py_layout_table_len; i++) {
		const struct py_layout_entry *e = &py_layout_table[i];
		const struct py_caps *c =
		    py_caps_find(ver_major(e->hexversion), ver_minor(e->hexversion));
		assert_non_null(c);
		assert_int_equal(!!(c->lflags & TP_LF_CFRAME), e->layout.ts_cframe >= 0);
		assert_int_equal(!!(c->lflags & TP_LF_SELF_CLASS), e->layout.code_qualname < 0);
	}
	assert_null(py_caps_find(2, 6));
	assert_null(py_caps_find(2, 8));
	assert_null(py_caps_find(3, 5));
	assert_null(py_caps_find(1, 0));
	assert_int_equal(py_caps_find(3, 9)->linetable, PY_LT_LNOTAB);
	assert_true(py_caps_find(3, 10)->lasti_in_units);
	/* A minor newer than every row is read with the newest row of 3.x: its
	 * offsets come from _Py_DebugOffsets, its flags from the newest known
	 * version. */
	assert_ptr_equal(py_caps_find(3, 99), &py_caps_table[py_caps_table_len - 1]);
	assert_true(py_caps_find(3, 15)->lflags & TP_LF_STACKREF);
	assert_false(py_caps_find(3, 13)->lflags & TP_LF_STACKREF);
}

/* --- the _Py_DebugOffsets member table -------------------------------------- */

static int is_size_member(enum py_do_member m)
{
	const char *n = py_debug_offsets_member_name(m);
	size_t len = strlen(n);

	return len > 5 && !strcmp(n + len - 5, ".size");
}

static void test_debug_rows(void **state)
{
	(void)state;
	assert_true(py_debug_offsets_table_len > 0);
	for (unsigned int i = 0; i < py_debug_offsets_table_len; i++) {
		const struct py_debug_offsets_row *r = &py_debug_offsets_table[i];

		assert_non_null(r->source);
		assert_true(ver_ge(r->hexversion, 3, 13));
		if (i > 0)
			assert_true(ver_minor(r->hexversion) >
				    ver_minor(py_debug_offsets_table[i - 1].hexversion));
		assert_true(r->struct_size > 24 && r->struct_size < 1 << 16);
		/* cookie and version come first, then free_threaded. */
		assert_true(r->free_threaded_pos >= 16 &&
			    r->free_threaded_pos + 8 <= r->struct_size);
		for (int m = 0; m < PY_DO_NMEMBERS; m++) {
			int32_t p = r->pos[m];

			/* Absent is -1; 0 would be the cookie, i.e. a member the
			 * generator forgot to write. */
			bool tlbc = m == PY_DO_FRAME_TLBC_INDEX || m == PY_DO_CODE_TLBC;
			if (p == -1 && (m == PY_DO_UNICODE_COMPACTUNICODEOBJECT_SIZE ||
					(tlbc && ver_minor(r->hexversion) < 14)))
				continue; /* members that only later minors have */
			if (p < 24 || p % 8 || p + 8 > r->struct_size) {
				print_error("%s: %s at %d\n", r->source,
					    py_debug_offsets_member_name(m), p);
				fail();
			}
			for (int n = 0; n < m; n++)
				assert_int_not_equal(r->pos[n], p);
		}
	}
	assert_string_equal(py_debug_offsets_member_name(PY_DO_TSTATE_CURRENT_FRAME),
			    "thread_state.current_frame");
	assert_string_equal(py_debug_offsets_member_name(PY_DO_NMEMBERS), "?");
}

/* --- the reader, on synthetic structs ----------------------------------------- */

#define SYN_CAP 4096
#define SYN_SIZE 256 /* the `size` of every synthetic sub-struct */

struct synthetic {
	unsigned char buf[SYN_CAP];
	size_t len;
	const struct py_debug_offsets_row *row;
	char err[256];
	struct py_layout out;
	uint64_t hex;
	bool ft;
};

static void put_u64(struct synthetic *s, int32_t pos, uint64_t v)
{
	assert_true(pos >= 0 && (size_t)pos + 8 <= sizeof(s->buf));
	memcpy(s->buf + pos, &v, sizeof(v));
}

/* The value the synthetic struct holds for an offset member: distinct per
 * member and inside SYN_SIZE. */
static uint64_t syn_value(enum py_do_member m)
{
	return 8 + 8 * ((uint64_t)m % 30);
}

/* A well-formed _Py_DebugOffsets laid out as row r, claiming `version`. */
static void synthetic_init_row(struct synthetic *s, const struct py_debug_offsets_row *r,
			       uint64_t version)
{

	memset(s, 0, sizeof(*s));
	s->row = r;
	assert_true((size_t)r->struct_size <= sizeof(s->buf));
	s->len = r->struct_size;
	memcpy(s->buf, PY_DEBUG_OFFSETS_COOKIE, PY_DEBUG_OFFSETS_COOKIE_LEN);
	put_u64(s, PY_DEBUG_OFFSETS_VERSION_POS, version);
	put_u64(s, r->free_threaded_pos, 0);
	for (int m = 0; m < PY_DO_NMEMBERS; m++)
		if (r->pos[m] >= 0)
			put_u64(s, r->pos[m], is_size_member(m) ? SYN_SIZE : syn_value(m));
}

/* The same for the newest row. */
static void synthetic_init(struct synthetic *s, uint64_t version)
{
	synthetic_init_row(s, &py_debug_offsets_table[py_debug_offsets_table_len - 1], version);
}

static int synthetic_parse(struct synthetic *s)
{
	return py_debug_offsets_parse(s->buf, s->len, &s->out, &s->hex, &s->ft, s->err,
				      sizeof(s->err));
}

static uint64_t newest_hex(void)
{
	return py_debug_offsets_table[py_debug_offsets_table_len - 1].hexversion;
}

#define EXPECT_EINVAL(s, needle)                                                                   \
	do {                                                                                       \
		assert_int_equal(synthetic_parse(s), -EINVAL);                                     \
		if (!strstr((s)->err, (needle))) {                                                 \
			print_error("message \"%s\" lacks \"%s\"\n", (s)->err, (needle));          \
			fail();                                                                    \
		}                                                                                  \
		assert_null(strchr((s)->err, '\n'));                                               \
	} while (0)

static void test_synthetic_ok(void **state)
{
	struct synthetic s;

	(void)state;
	synthetic_init(&s, newest_hex());
	assert_int_equal(synthetic_parse(&s), 0);
	assert_string_equal(s.err, "");
	assert_int_equal(s.hex, newest_hex());
	assert_int_equal(s.out.ts_current_frame, syn_value(PY_DO_TSTATE_CURRENT_FRAME));
	assert_int_equal(s.out.frame_code, syn_value(PY_DO_FRAME_EXECUTABLE));
	assert_int_equal(s.out.code_varnames, syn_value(PY_DO_CODE_LOCALSPLUSNAMES));
	assert_int_equal(s.out.var_size, syn_value(PY_DO_TUPLE_OB_SIZE));
	assert_int_equal(s.out.rt_interp_head, syn_value(PY_DO_RUNTIME_INTERPRETERS_HEAD));
	for (size_t i = 0; i < sizeof(no_debug_offset) / sizeof(no_debug_offset[0]); i++)
		for (size_t f = 0; f < NFIELDS; f++)
			if (!strcmp(fields[f].name, no_debug_offset[i]))
				assert_int_equal(field_get(&s.out, &fields[f]), -1);
	if (s.row->pos[PY_DO_UNICODE_COMPACTUNICODEOBJECT_SIZE] < 0)
		assert_int_equal(s.out.unicode_compact_size, s.out.unicode_ascii_size + 16);

	/* A buffer longer than the struct is fine: callers read a page. */
	s.len = sizeof(s.buf);
	assert_int_equal(synthetic_parse(&s), 0);
}

static void test_synthetic_newer_minor(void **state)
{
	struct synthetic s;
	uint64_t newer = newest_hex() + (1u << 16);

	(void)state;
	synthetic_init(&s, newer);
	assert_int_equal(synthetic_parse(&s), 0);
	assert_int_equal(s.hex, newer);
	assert_non_null(strstr(s.err, "no member table"));
	/* No generated row for it: the GIL's offsets come from the members,
	 * locked and last_holder relative to the GIL in the interpreter. */
	uint64_t base = 8, locked = 40, holder = 32;
	put_u64(&s, s.row->pos[PY_DO_INTERP_GIL], base);
	put_u64(&s, s.row->pos[PY_DO_INTERP_GIL_LOCKED], locked);
	put_u64(&s, s.row->pos[PY_DO_INTERP_GIL_HOLDER], holder);
	assert_int_equal(synthetic_parse(&s), 0);
	assert_int_equal(s.out.interp_gil, syn_value(PY_DO_INTERP_CEVAL_GIL));
	assert_int_equal(s.out.gil_locked, locked - base);
	assert_int_equal(s.out.gil_holder, holder - base);
	/* Members that do not lie inside the GIL give no GIL. */
	put_u64(&s, s.row->pos[PY_DO_INTERP_GIL_LOCKED], base);
	assert_int_equal(synthetic_parse(&s), 0);
	assert_int_equal(s.out.gil_locked, -1);
	assert_int_equal(s.out.interp_gil, -1);
	put_u64(&s, s.row->pos[PY_DO_INTERP_GIL_LOCKED], locked);

	/* ...but its values are checked all the same. */
	put_u64(&s, s.row->pos[PY_DO_TSTATE_SIZE], 300);
	EXPECT_EINVAL(&s, "thread_state.size 300 is not a plausible size");
}

static void test_bad_cookie(void **state)
{
	struct synthetic s;

	(void)state;
	synthetic_init(&s, newest_hex());
	s.buf[1] = 'D';
	EXPECT_EINVAL(&s, "_Py_DebugOffsets cookie mismatch");
	memset(s.buf, 0, 8);
	EXPECT_EINVAL(&s, "cookie mismatch");
}

static void test_truncated(void **state)
{
	struct synthetic s;

	(void)state;
	synthetic_init(&s, newest_hex());
	s.len = 0;
	EXPECT_EINVAL(&s, "truncated");
	s.len = 15;
	EXPECT_EINVAL(&s, "truncated: 15 bytes");
	s.len = s.row->struct_size - 1;
	EXPECT_EINVAL(&s, "truncated");
	assert_int_equal(s.hex, newest_hex()); /* known by then, for messages */
	assert_int_equal(
	    py_debug_offsets_parse(NULL, 100, &s.out, &s.hex, NULL, s.err, sizeof(s.err)), -EINVAL);
}

static void test_offset_beyond_size(void **state)
{
	struct synthetic s;

	(void)state;
	synthetic_init(&s, newest_hex());
	put_u64(&s, s.row->pos[PY_DO_TSTATE_SIZE], 312);
	put_u64(&s, s.row->pos[PY_DO_TSTATE_CURRENT_FRAME], 9999);
	EXPECT_EINVAL(&s, "thread_state.current_frame 9999 outside thread_state size 312");

	synthetic_init(&s, newest_hex());
	put_u64(&s, s.row->pos[PY_DO_CODE_FILENAME], SYN_SIZE);
	EXPECT_EINVAL(&s, "code_object.filename 256 outside code_object size 256");

	synthetic_init(&s, newest_hex());
	put_u64(&s, s.row->pos[PY_DO_UNICODE_ASCIIOBJECT_SIZE], 0);
	EXPECT_EINVAL(&s, "unicode_object.asciiobject_size 0 is not a size");
}

static void test_implausible_size(void **state)
{
	struct synthetic s;

	(void)state;
	synthetic_init(&s, newest_hex());
	put_u64(&s, s.row->pos[PY_DO_RUNTIME_SIZE], 2u << 20);
	EXPECT_EINVAL(&s, "runtime_state.size 2097152 is not a plausible size");

	synthetic_init(&s, newest_hex());
	put_u64(&s, s.row->pos[PY_DO_CODE_SIZE], 0);
	EXPECT_EINVAL(&s, "code_object.size 0 is not a plausible size");
}

/* A free-threaded build is read from its own offsets, says so, and takes
 * the supplement of free-threaded builds; when its offsets do not validate,
 * the message names the build. */
static void test_free_threaded(void **state)
{
	const struct py_debug_offsets_row *r313 = &py_debug_offsets_table[0];
	struct synthetic s;

	(void)state;
	assert_int_equal(r313->hexversion >> 16, 0x030d);
	synthetic_init_row(&s, r313, r313->hexversion);
	assert_int_equal(synthetic_parse(&s), 0);
	assert_false(s.ft);
	int32_t gil_keys = s.out.dict_keys, gil_digit = s.out.long_digit;

	/* The supplement of the free-threaded build: a 32-byte object
	 * header moves a dict's keys and an int's digits by 16 bytes. */
	put_u64(&s, s.row->free_threaded_pos, 1);
	assert_int_equal(synthetic_parse(&s), 0);
	assert_true(s.ft);
	assert_int_equal(s.out.frame_code, syn_value(PY_DO_FRAME_EXECUTABLE));
	assert_int_equal(s.out.obj_type, syn_value(PY_DO_PYOBJECT_OB_TYPE));
	assert_true(gil_keys > 0 && gil_digit > 0);
	assert_int_equal(s.out.dict_keys, gil_keys + 16);
	assert_int_equal(s.out.long_digit, gil_digit + 16);

	put_u64(&s, s.row->pos[PY_DO_CODE_FILENAME], SYN_SIZE);
	EXPECT_EINVAL(&s, "3.13 (free-threaded): _Py_DebugOffsets: code_object.filename");
	synthetic_init_row(&s, r313, r313->hexversion);
	put_u64(&s, s.row->free_threaded_pos, 1);
	put_u64(&s, s.row->pos[PY_DO_CODE_SIZE], 0);
	EXPECT_EINVAL(&s, "3.13 (free-threaded): code_object.size 0 is not a plausible size");
	assert_true(s.ft);

	put_u64(&s, s.row->free_threaded_pos, 7);
	EXPECT_EINVAL(&s, "free_threaded is 7");
	assert_false(s.ft);

	/* 3.14t and later keep bytecode per thread: the free-threaded build
	 * gives where a frame's copy index and a code object's copies are;
	 * a GIL build of the same minor says 0 for both, which is none. */
	synthetic_init(&s, newest_hex());
	put_u64(&s, s.row->pos[PY_DO_FRAME_TLBC_INDEX], 0);
	put_u64(&s, s.row->pos[PY_DO_CODE_TLBC], 0);
	assert_int_equal(synthetic_parse(&s), 0);
	assert_false(s.ft);
	assert_int_equal(s.out.frame_tlbc_index, -1);
	assert_int_equal(s.out.code_tlbc, -1);
	/* A GIL build never reads them: garbage there is no reason to refuse. */
	put_u64(&s, s.row->pos[PY_DO_CODE_TLBC], SYN_SIZE + 1);
	assert_int_equal(synthetic_parse(&s), 0);
	assert_int_equal(s.out.code_tlbc, -1);
	put_u64(&s, s.row->pos[PY_DO_CODE_TLBC], 0);
	/* A free-threaded build that says 0 would be walked with wrong
	 * lines: refused. */
	put_u64(&s, s.row->free_threaded_pos, 1);
	EXPECT_EINVAL(&s, "no offset for interpreter_frame.tlbc_index or code_object.co_tlbc");
	assert_true(s.ft);
	put_u64(&s, s.row->pos[PY_DO_FRAME_TLBC_INDEX], syn_value(PY_DO_FRAME_TLBC_INDEX));
	EXPECT_EINVAL(&s, "no offset for interpreter_frame.tlbc_index or code_object.co_tlbc");
	put_u64(&s, s.row->pos[PY_DO_CODE_TLBC], syn_value(PY_DO_CODE_TLBC));
	assert_int_equal(synthetic_parse(&s), 0);
	assert_int_equal(s.out.frame_tlbc_index, syn_value(PY_DO_FRAME_TLBC_INDEX));
	assert_int_equal(s.out.code_tlbc, syn_value(PY_DO_CODE_TLBC));
	/* Like every offset, one outside its struct is refused. */
	put_u64(&s, s.row->pos[PY_DO_CODE_TLBC], SYN_SIZE);
	EXPECT_EINVAL(&s, "(free-threaded): _Py_DebugOffsets: code_object.co_tlbc");
}

static void test_bad_version(void **state)
{
	struct synthetic s;

	(void)state;
	synthetic_init(&s, 0x030c01f0); /* 3.12 never had _Py_DebugOffsets */
	EXPECT_EINVAL(&s, "no member table for 3.12");
	synthetic_init(&s, 0x040000f0);
	EXPECT_EINVAL(&s, "Python 4 is not supported");
	synthetic_init(&s, 0x1030d00f0ull);
	EXPECT_EINVAL(&s, "is not a PY_VERSION_HEX");
}

/* --- the reader, on real builds --------------------------------------------------- */

/* Copies up to cap bytes of the file's _PyRuntime (found through .dynsym) into
 * buf. Returns the byte count, or a negative errno with the reason, without the
 * path, in why. */
static long read_pyruntime(const char *path, unsigned char *buf, size_t cap, char *why,
			   size_t whylen)
{
	Elf *elf = NULL;
	Elf_Scn *scn = NULL;
	long ret = -ENOENT;
	int fd;

	snprintf(why, whylen, "no _PyRuntime in .dynsym");
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		return -errno;
	}
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf) {
		snprintf(why, whylen, "%s", elf_errmsg(-1));
		ret = -EINVAL;
		goto out;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			GElf_Shdr th;
			Elf_Scn *target;
			Elf_Data *td;
			const char *name;
			size_t at, n;

			if (!gelf_getsym(d, i, &sym))
				break;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name || strcmp(name, "_PyRuntime"))
				continue;
			target = elf_getscn(elf, sym.st_shndx);
			if (!target || !gelf_getshdr(target, &th) || th.sh_type == SHT_NOBITS ||
			    sym.st_value < th.sh_addr || sym.st_value >= th.sh_addr + th.sh_size) {
				snprintf(why, whylen, "_PyRuntime has no file data");
				ret = -ENODATA;
				goto out;
			}
			td = elf_getdata(target, NULL);
			at = sym.st_value - th.sh_addr;
			if (!td || at >= td->d_size) {
				snprintf(why, whylen, "cannot read _PyRuntime's section");
				ret = -EIO;
				goto out;
			}
			n = td->d_size - at < cap ? td->d_size - at : cap;
			memcpy(buf, (const char *)td->d_buf + at, n);
			ret = (long)n;
			goto out;
		}
	}
out:
	elf_end(elf);
	close(fd);
	return ret;
}

static void test_real_debug_offsets(void **state)
{
	const char *root = getenv("TAIPAN_PYENV");
	const char *ci = getenv("CI");
	size_t nrows = sizeof(py_dwarf_layouts) / sizeof(py_dwarf_layouts[0]);
	unsigned int checked = 0;

	(void)state;
	if (!root || !*root)
		root = DEFAULT_PYENV;
	for (size_t i = 0; i < nrows; i++) {
		const struct py_dwarf_layout *d = &py_dwarf_layouts[i];
		unsigned char buf[SYN_CAP];
		char path[4096], why[512], err[256];
		struct py_layout out;
		uint64_t hex;
		long n;

		snprintf(path, sizeof(path), "%s/%s", root, d->pyenv_lib);
		n = read_pyruntime(path, buf, sizeof(buf), why, sizeof(why));
		/* Not installed, or not readable by this user (pyenv under
		 * /root when make quick runs without root): skipped. */
		if ((n == -ENOENT || n == -EACCES) && access(path, R_OK)) {
			if (ci && !strcmp(ci, "true")) {
				print_error("CI=true and %s: %s\n", path, why);
				fail();
			}
			print_message("skipping %s: %s\n", path, why);
			continue;
		}
		if (n < 0) {
			print_error("%s: %s\n", path, why);
			fail();
		}
		if (py_debug_offsets_parse(buf, (size_t)n, &out, &hex, NULL, err, sizeof(err))) {
			print_error("%s: %s\n", path, err);
			fail();
		}
		assert_string_equal(err, "");
		assert_int_equal(hex, d->entry.hexversion);

		for (size_t f = 0; f < NFIELDS; f++) {
			int32_t got = field_get(&out, &fields[f]);
			int32_t want = field_get(&d->entry.layout, &fields[f]);
			int none = 0;

			for (size_t k = 0; k < sizeof(no_debug_offset) / sizeof(no_debug_offset[0]);
			     k++)
				none |= !strcmp(fields[f].name, no_debug_offset[k]);
			if (none ? got != -1 : got != want) {
				print_error("%s: %s is %d from _Py_DebugOffsets, %d from DWARF\n",
					    path, fields[f].name, got, want);
				fail();
			}
		}
		checked++;
	}
	if (!checked)
		skip();
}

/* The generated TaskObj rows (dump --tasks before 3.14): one per minor from
 * 3.8 to 3.13, in order, each field inside the object and after the
 * Future's loop; a task's coroutine, name and waiter after its state. */
static void test_async_table(void **state)
{
	(void)state;
	assert_int_equal(py_async_table_len, 6);
	for (unsigned int i = 0; i < py_async_table_len; i++) {
		const struct py_async_layout *a = &py_async_table[i];
		assert_int_equal(ver_major(a->hexversion), 3);
		assert_int_equal(ver_minor(a->hexversion), 8 + i);
		assert_non_null(strstr(a->source, "_asyncio"));
		assert_int_equal(a->task_loop, 16);
		assert_true(a->task_state > a->task_loop && a->task_state < 256);
		assert_true(a->task_fut_waiter > a->task_state);
		assert_int_equal(a->task_coro, a->task_fut_waiter + 8);
		assert_int_equal(a->task_name, a->task_coro + 8);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table_rows),	       cmocka_unit_test(test_find),
	    cmocka_unit_test(test_caps_find),	       cmocka_unit_test(test_debug_rows),
	    cmocka_unit_test(test_synthetic_ok),       cmocka_unit_test(test_synthetic_newer_minor),
	    cmocka_unit_test(test_bad_cookie),	       cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_offset_beyond_size), cmocka_unit_test(test_implausible_size),
	    cmocka_unit_test(test_free_threaded),      cmocka_unit_test(test_bad_version),
	    cmocka_unit_test(test_real_debug_offsets), cmocka_unit_test(test_async_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
