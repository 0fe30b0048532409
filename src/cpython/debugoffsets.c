/* debugoffsets.c - reads CPython's _Py_DebugOffsets (3.13+) into a struct py_layout.
 *
 * The bytes come from the target, so nothing in them is trusted: every number
 * is checked against the struct size that sits next to it before it reaches
 * the BPF side, where a wrong offset would turn every sample into garbage
 * without a single error.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cpython/debugoffsets.h"
#include "cpython/constants.h"

/* No CPython struct comes near this; _PyRuntimeState, the largest, is ~300 KiB
 * in 3.13-3.15. A bigger "size" means the bytes are not what we think. */
#define MAX_STRUCT_SIZE (1u << 20)

/* Every sub-struct taipan reads contains pointers, so on x86-64 its size is a
 * multiple of 8. This catches most misreads when the positions of an older
 * minor are applied to a newer one. */
#define STRUCT_ALIGN 8

/* Size of each member of _Py_DebugOffsets: they are all uint64_t. */
#define MEMBER_SIZE 8

static const char *const member_sub[PY_DO_NMEMBERS] = {
#define PY_DO_SUB(id, sub, member) [PY_DO_##id] = #sub,
    PY_DO_MEMBERS(PY_DO_SUB)
#undef PY_DO_SUB
};

static const char *const member_name[PY_DO_NMEMBERS] = {
#define PY_DO_NAME(id, sub, member) [PY_DO_##id] = #sub "." #member,
    PY_DO_MEMBERS(PY_DO_NAME)
#undef PY_DO_NAME
};

static const char *const member_field[PY_DO_NMEMBERS] = {
#define PY_DO_FIELD(id, sub, member) [PY_DO_##id] = #member,
    PY_DO_MEMBERS(PY_DO_FIELD)
#undef PY_DO_FIELD
};

enum use_kind {
	USE_OFFSET, /* an offset into the sub-struct's target: < size */
	USE_SIZEOF, /* the size of a related struct: > 0 and <= size */
	/* an offset that only free-threaded builds have: 0 (and a row without
	 * the member) means none, and the field stays -1 */
	USE_OFFSET_FT,
};

/* Which struct py_layout field each member fills. */
struct member_use {
	enum py_do_member member;
	size_t field; /* offsetof(struct py_layout, ...) */
	enum use_kind kind;
	bool optional; /* a row may lack it; the field then stays -1 */
};

#define FIELD(f) offsetof(struct py_layout, f)

/* From PY_LAYOUT_FIELDS (cpython/pyoffsets.h), which says for each field
 * which member fills it and how. */
#define USE_AS_NONE(field, member)
#define USE_AS_TABLE(field, member) /* from py_layout_supplement() */
#define USE_AS_OFFSET(field, member) {PY_DO_##member, FIELD(field), USE_OFFSET, false},
#define USE_AS_OFFSET_FT(field, member) {PY_DO_##member, FIELD(field), USE_OFFSET_FT, true},
#define USE_AS_SIZEOF(field, member) {PY_DO_##member, FIELD(field), USE_SIZEOF, false},
/* Only 3.15+ has compactunicodeobject_size; see the fallback in
 * py_debug_offsets_parse(). */
#define USE_AS_SIZEOF_OPTIONAL(field, member) {PY_DO_##member, FIELD(field), USE_SIZEOF, true},
#define PY_LAYOUT_USE(field, how, member) USE_AS_##how(field, member)
static const struct member_use uses[] = {PY_LAYOUT_FIELDS(PY_LAYOUT_USE)};
#undef PY_LAYOUT_USE

_Static_assert(sizeof(struct py_layout) % sizeof(int32_t) == 0,
	       "struct py_layout holds int32_t fields only");

const char *py_debug_offsets_member_name(enum py_do_member m)
{
	if ((unsigned int)m >= PY_DO_NMEMBERS)
		return "?";
	return member_name[m];
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes the reason to err and returns -EINVAL, so that each check reads as
 * one `return fail(...)`. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static uint64_t read_u64(const unsigned char *buf, size_t pos)
{
	uint64_t v;

	memcpy(&v, buf + pos, sizeof(v)); /* the struct is packed u64s, but buf may be unaligned */
	return v;
}

static void set_field(struct py_layout *l, size_t field, int32_t v)
{
	memcpy((char *)l + field, &v, sizeof(v));
}

static int32_t get_field(const struct py_layout *l, size_t field)
{
	int32_t v;

	memcpy(&v, (const char *)l + field, sizeof(v));
	return v;
}

/* The `size` member of m's sub-struct, or PY_DO_NMEMBERS if it has none. */
static enum py_do_member size_member_of(enum py_do_member m)
{
	for (int i = 0; i < PY_DO_NMEMBERS; i++)
		if (!strcmp(member_sub[i], member_sub[m]) && !strcmp(member_field[i], "size"))
			return i;
	return PY_DO_NMEMBERS;
}

/* The row for minor version `minor` of 3.x: an exact match, or for a minor
 * newer than every row the newest row (*fallback set). NULL otherwise: a
 * minor between two rows, or older than the first, has no trustworthy
 * positions. */
static const struct py_debug_offsets_row *pick_row(unsigned int minor, bool *fallback)
{
	const struct py_debug_offsets_row *newest = NULL;

	*fallback = false;
	for (unsigned int i = 0; i < py_debug_offsets_table_len; i++) {
		const struct py_debug_offsets_row *r = &py_debug_offsets_table[i];
		unsigned int rmajor = r->hexversion >> 24, rminor = (r->hexversion >> 16) & 0xff;

		if (rmajor != 3)
			continue;
		if (rminor == minor)
			return r;
		if (!newest || r->hexversion > newest->hexversion)
			newest = r;
	}
	if (newest && minor > ((newest->hexversion >> 16) & 0xff)) {
		*fallback = true;
		return newest;
	}
	return NULL;
}

/* Reads member m of the row and checks it against its sub-struct's size,
 * which the caller has validated; *val gets the value. */
static int read_member(const unsigned char *buf, const struct py_debug_offsets_row *row,
		       enum py_do_member m, enum use_kind kind, uint64_t *val, char *err,
		       size_t errlen)
{
	enum py_do_member sm = size_member_of(m);
	uint64_t size, v;

	if (sm == PY_DO_NMEMBERS || row->pos[sm] < 0)
		return fail(err, errlen,
			    "_Py_DebugOffsets: %s has no size member to check it against",
			    member_name[m]);
	size = read_u64(buf, row->pos[sm]);
	v = read_u64(buf, row->pos[m]);
	if (kind == USE_SIZEOF) {
		if (v == 0 || v > size)
			return fail(err, errlen,
				    "_Py_DebugOffsets: %s %llu is not a size within %s size %llu",
				    member_name[m], (unsigned long long)v, member_sub[m],
				    (unsigned long long)size);
	} else if (v >= size) {
		return fail(err, errlen, "_Py_DebugOffsets: %s %llu outside %s size %llu",
			    member_name[m], (unsigned long long)v, member_sub[m],
			    (unsigned long long)size);
	}
	*val = v;
	return 0;
}

int py_debug_offsets_parse(const void *buf, size_t len, struct py_layout *out, uint64_t *hexversion,
			   bool *free_threaded, char *err, size_t errlen)
{
	const unsigned char *b = buf;
	const struct py_debug_offsets_row *row;
	unsigned int major, minor, rminor;
	uint64_t version, ft, v = 0;
	bool fallback;
	const char *build;
	int ret;

	if (err && errlen)
		err[0] = '\0';
	if (!buf || !out || !hexversion)
		return fail(err, errlen, "_Py_DebugOffsets: no buffer");
	*hexversion = 0;
	if (free_threaded)
		*free_threaded = false;

	if (len < PY_DEBUG_OFFSETS_VERSION_POS + MEMBER_SIZE)
		return fail(err, errlen,
			    "_Py_DebugOffsets truncated: %zu bytes, the cookie and version need %d",
			    len, PY_DEBUG_OFFSETS_VERSION_POS + MEMBER_SIZE);
	if (memcmp(b, PY_DEBUG_OFFSETS_COOKIE, PY_DEBUG_OFFSETS_COOKIE_LEN))
		return fail(err, errlen, "_Py_DebugOffsets cookie mismatch: not \"%s\"",
			    PY_DEBUG_OFFSETS_COOKIE);

	version = read_u64(b, PY_DEBUG_OFFSETS_VERSION_POS);
	if (version > UINT32_MAX)
		return fail(err, errlen, "_Py_DebugOffsets version %#llx is not a PY_VERSION_HEX",
			    (unsigned long long)version);
	*hexversion = version;
	major = version >> 24;
	minor = (version >> 16) & 0xff;
	if (major != 3)
		return fail(err, errlen,
			    "_Py_DebugOffsets version %#llx: Python %u is not supported",
			    (unsigned long long)version, major);

	row = pick_row(minor, &fallback);
	if (!row)
		return fail(err, errlen,
			    "_Py_DebugOffsets version %#llx: no member table for 3.%u, and 3.%u is "
			    "not newer than every known version",
			    (unsigned long long)version, minor, minor);
	rminor = (row->hexversion >> 16) & 0xff;
	if (row->struct_size <= 0 || len < (size_t)row->struct_size)
		return fail(err, errlen, "_Py_DebugOffsets truncated: %zu bytes, 3.%u needs %d",
			    len, rminor, row->struct_size);

	/* A free-threaded build (PEP 703) says so here. Its object header is
	 * 32 bytes instead of 16, which moves every field after it; the offsets
	 * below already say where they are, so only what _Py_DebugOffsets does
	 * not describe differs (the supplement: a row of its own, below). */
	if (row->free_threaded_pos < 0)
		return fail(err, errlen,
			    "_Py_DebugOffsets: the 3.%u row has no free_threaded position", rminor);
	ft = read_u64(b, row->free_threaded_pos);
	if (ft > 1)
		return fail(err, errlen, "_Py_DebugOffsets: free_threaded is %llu, not 0 or 1",
			    (unsigned long long)ft);
	if (free_threaded)
		*free_threaded = ft == 1;
	build = ft ? " (free-threaded)" : "";

	/* Every position must lie inside the bytes the row says the struct has:
	 * a broken generated row must not read past the caller's buffer. */
	for (int m = 0; m < PY_DO_NMEMBERS; m++) {
		if (row->pos[m] < 0)
			continue;
		if ((size_t)row->pos[m] + MEMBER_SIZE > (size_t)row->struct_size)
			return fail(
			    err, errlen,
			    "_Py_DebugOffsets: the 3.%u row puts %s at %d, past its size %d",
			    rminor, member_name[m], row->pos[m], row->struct_size);
		if (strcmp(member_field[m], "size"))
			continue;
		v = read_u64(b, row->pos[m]);
		if (v == 0 || v >= MAX_STRUCT_SIZE || v % STRUCT_ALIGN)
			return fail(err, errlen,
				    "_Py_DebugOffsets of 3.%u%s: %s %llu is not a plausible size",
				    minor, build, member_name[m], (unsigned long long)v);
	}

	/* Every field is an int32_t, and all-ones is -1: "no such field". */
	memset(out, 0xff, sizeof(*out));
	for (size_t i = 0; i < sizeof(uses) / sizeof(uses[0]); i++) {
		const struct member_use *u = &uses[i];

		if (u->kind == USE_OFFSET_FT && !ft)
			continue; /* a GIL build's are 0, and never read */
		if (row->pos[u->member] < 0) {
			if (u->optional)
				continue;
			return fail(err, errlen, "_Py_DebugOffsets: the 3.%u row lacks %s", rminor,
				    member_name[u->member]);
		}
		ret = read_member(b, row, u->member, u->kind, &v, err, errlen);
		if (ret) {
			/* Name the build: the reason alone does not say which. */
			if (err && errlen) {
				char why[256];
				snprintf(why, sizeof(why), "%s", err);
				snprintf(err, errlen, "3.%u%s: %s", minor, build, why);
			}
			return ret;
		}
		if (u->kind == USE_OFFSET_FT && !v)
			continue; /* none */
		set_field(out, u->field, (int32_t)v);
	}
	/* A free-threaded 3.14+ runs thread-local bytecode: without where a
	 * frame's copy is, every line of a thread but the first would be
	 * wrong. */
	if (ft && minor >= PY_FT_TLBC_SINCE_MINOR &&
	    (get_field(out, FIELD(frame_tlbc_index)) < 0 || get_field(out, FIELD(code_tlbc)) < 0))
		return fail(
		    err, errlen,
		    "_Py_DebugOffsets of 3.%u (free-threaded): no offset for "
		    "interpreter_frame.tlbc_index or code_object.co_tlbc, which thread-local "
		    "bytecode needs",
		    minor);

	/* Before 3.15 _Py_DebugOffsets has no compactunicodeobject_size.
	 * PyCompactUnicodeObject is PyASCIIObject followed by Py_ssize_t
	 * utf8_length and char *utf8 (wstr went in 3.12, before debug offsets
	 * existed), so its size is the ASCII object's plus two 8-byte words. */
	if (get_field(out, FIELD(unicode_compact_size)) < 0)
		set_field(out, FIELD(unicode_compact_size),
			  get_field(out, FIELD(unicode_ascii_size)) + 2 * 8);

	/* The GIL (3.14+): where an interpreter's pointer to its GIL is, and
	 * where locked and last_holder are in the GIL, which the members give
	 * as offsets into the interpreter's own. A free-threaded build has
	 * none to label samples with. */
	if (!ft && row->pos[PY_DO_INTERP_CEVAL_GIL] >= 0 && row->pos[PY_DO_INTERP_GIL] >= 0 &&
	    row->pos[PY_DO_INTERP_GIL_LOCKED] >= 0 && row->pos[PY_DO_INTERP_GIL_HOLDER] >= 0) {
		uint64_t ptr, base, locked, holder;
		if (!read_member(b, row, PY_DO_INTERP_CEVAL_GIL, USE_OFFSET, &ptr, NULL, 0) &&
		    !read_member(b, row, PY_DO_INTERP_GIL, USE_OFFSET, &base, NULL, 0) &&
		    !read_member(b, row, PY_DO_INTERP_GIL_LOCKED, USE_OFFSET, &locked, NULL, 0) &&
		    !read_member(b, row, PY_DO_INTERP_GIL_HOLDER, USE_OFFSET, &holder, NULL, 0) &&
		    locked > base && holder > base && locked - base < 256 && holder - base < 256) {
			set_field(out, FIELD(interp_gil), (int32_t)ptr);
			set_field(out, FIELD(gil_locked), (int32_t)(locked - base));
			set_field(out, FIELD(gil_holder), (int32_t)(holder - base));
		}
	}

	/* What _Py_DebugOffsets lacks comes from the generated row of this
	 * minor and kind of build, never another's: without one those fields
	 * stay -1. A free-threaded build's row is computed from the same
	 * headers with Py_GIL_DISABLED defined: its object header is 16 bytes
	 * longer, and its dict keys carry a lock. */
	py_layout_supplement(major, minor, ft == 1, out);

	if (fallback && err && errlen)
		snprintf(err, errlen,
			 "_Py_DebugOffsets of 3.%u: no member table for it, read with the 3.%u one "
			 "and every value checked",
			 minor, rminor);
	return 0;
}
