/* pyobj.c - reading Python objects out of a target (pyobj.h). */
#include <errno.h>
#include <string.h>

/* Entries read from a dict at once. */
#define PYOBJ_CHUNK 64

#include "cpython/constants.h"
#include "cpython/pyobj.h"
#include "cpython/pystr.h"

int pyobj_read(struct pyobj_rd *r, uint64_t addr, void *buf, size_t len)
{
	if (!addr || addr + len < addr)
		return -EFAULT;
	if (!r->budget)
		return -E2BIG;
	r->budget--;
	int ret = pyproc_read(r->pp, addr, buf, len);
	if (ret == -ESRCH)
		r->gone = ret;
	return ret;
}

int pyobj_u64(struct pyobj_rd *r, uint64_t addr, uint64_t *v)
{
	*v = 0;
	return pyobj_read(r, addr, v, sizeof(*v));
}

uint64_t pyobj_get(const uint8_t *buf, size_t len, int32_t off, size_t size)
{
	uint64_t v = 0;
	if (off < 0 || (size_t)off + size > len)
		return 0;
	memcpy(&v, buf + off, size);
	return v;
}

int pyobj_reader(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return pyobj_read(ctx, addr, buf, len);
}

int pyobj_str(struct pyobj_rd *r, uint64_t obj, char *buf, size_t cap, bool *cut)
{
	return pystr_read(r->pp, pyobj_reader, r, obj, cap - 1, buf, cap, cut);
}

int pyobj_type_name(struct pyobj_rd *r, uint64_t obj, char *buf, size_t cap)
{
	uint64_t type, name;
	int ret;
	buf[0] = 0;
	if (r->l->obj_type < 0 || r->l->type_name < 0)
		return -ENOTSUP;
	if ((ret = pyobj_u64(r, obj + (uint64_t)r->l->obj_type, &type)) ||
	    (ret = pyobj_u64(r, type + (uint64_t)r->l->type_name, &name)))
		return ret;
	if (!r->budget)
		return -E2BIG;
	r->budget--;
	ret = pyproc_read_cstr(r->pp, name, buf, cap);
	return ret < 0 ? ret : 0;
}

bool pyobj_is_str(struct pyobj_rd *r, uint64_t obj)
{
	uint64_t type;
	char tn[8];
	if (pyobj_u64(r, obj + (uint64_t)r->l->obj_type, &type) || !type)
		return false;
	if (r->str_type)
		return type == r->str_type;
	if (pyobj_type_name(r, obj, tn, sizeof(tn)) || strcmp(tn, "str"))
		return false;
	r->str_type = type;
	return true;
}

int pyobj_int(struct pyobj_rd *r, uint64_t obj, bool int_obj, int64_t *out)
{
	const struct py_layout *l = r->l;
	uint8_t h[PYOBJ_HDR];
	if (int_obj) { /* 2.7: a PyIntObject */
		if (l->int_ival < 0)
			return -ENOTSUP;
		return pyobj_read(r, obj + (uint64_t)l->int_ival, out, 8);
	}
	int32_t size = l->long_digit_size, at = l->long_digit;
	if ((size != 2 && size != 4) || at <= 0 || at > PYOBJ_HDR ||
	    pyobj_read(r, obj, h, (size_t)at))
		return -EFAULT;
	uint64_t n;
	bool neg;
	if (l->long_tag >= 0) { /* 3.12+: digits << 3 | sign (0 +, 1 zero, 2 -) */
		uint64_t tag = pyobj_get(h, (size_t)at, l->long_tag, 8);
		if ((tag & 3) == 3)
			return -EFAULT;
		neg = (tag & 3) == 2;
		n = (tag & 3) == 1 ? 0 : tag >> 3;
	} else { /* the size's sign is the int's */
		int64_t s = (int64_t)pyobj_get(h, (size_t)at, l->var_size, 8);
		neg = s < 0;
		n = neg ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
	}
	unsigned int bits = size == 4 ? 30 : 15;
	uint8_t dg[8 * 4];
	if (n > 64 / bits + 1)
		return -ERANGE;
	if (n && pyobj_read(r, obj + (uint64_t)at, dg, (size_t)n * (size_t)size))
		return -EFAULT;
	uint64_t v = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t d = pyobj_get(dg, sizeof(dg), (int32_t)i * size, (size_t)size);
		unsigned int shift = (unsigned int)i * bits;
		if (d >> bits)
			return -EFAULT;
		if ((shift >= 64 && d) || (shift && shift < 64 && d >> (64 - shift)))
			return -ERANGE;
		if (shift < 64)
			v |= d << shift;
	}
	if (v > (uint64_t)INT64_MAX + neg)
		return -ERANGE;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

/* Whether the str at obj is one of names. */
bool pyobj_str_is(struct pyobj_rd *r, uint64_t obj, const char *const *names)
{
	char buf[64];
	bool cut;
	if (pyobj_str(r, obj, buf, sizeof(buf), &cut) < 0 || cut)
		return false;
	for (; *names; names++)
		if (!strcmp(buf, *names))
			return true;
	return false;
}

/* The entries of a PyDictKeysObject (3.6+): values is the split table's
 * values array (PyObject *[]) or 0, with room for vcap of them. */
static int keys_each(struct pyobj_rd *r, uint64_t keys, uint64_t values, uint64_t vcap,
		     pyobj_entry_fn fn, void *ctx)
{
	const struct py_layout *l = r->l;
	uint8_t h[PYOBJ_HDR];
	if (l->dk_indices <= 0 || l->dk_indices > PYOBJ_HDR ||
	    pyobj_read(r, keys, h, (size_t)l->dk_indices))
		return -EFAULT;
	size_t hl = (size_t)l->dk_indices;
	uint64_t index_bytes, size;
	bool general = true;
	if (l->dk_log2_size >= 0) { /* 3.11+ */
		unsigned int lg = (unsigned int)pyobj_get(h, hl, l->dk_log2_size, 1),
			     lgi = (unsigned int)pyobj_get(h, hl, l->dk_log2_index_bytes, 1);
		if (lg > 30 || lgi > 33 || l->dk_kind < 0)
			return -EFAULT;
		size = 1ULL << lg;
		index_bytes = 1ULL << lgi;
		general = pyobj_get(h, hl, l->dk_kind, 1) == PY_DICT_KEYS_GENERAL;
	} else { /* 3.6-3.10: dk_size slots of the narrowest index that fits */
		size = pyobj_get(h, hl, l->dk_size, 8);
		if (!size || size > (1ULL << 30) || (size & (size - 1)))
			return -EFAULT;
		index_bytes = size * (size <= 0xff ? 1 : size <= 0xffff ? 2 : 4);
	}
	int64_t n = (int64_t)pyobj_get(h, hl, l->dk_nentries, 8);
	if (n < 0 || (uint64_t)n > size)
		return -EFAULT;
	if (n > PYOBJ_DICT_MAX)
		n = PYOBJ_DICT_MAX;
	if ((uint64_t)n > vcap && values)
		n = (int64_t)vcap;
	int32_t esize = general ? l->entry_size : l->uentry_size,
		koff = general ? l->entry_key : l->uentry_key,
		voff = general ? l->entry_value : l->uentry_value;
	if (esize <= 0 || esize > 64 || koff < 0 || voff < 0)
		return -ENOTSUP;
	uint64_t entries = keys + (uint64_t)l->dk_indices + index_bytes;
	uint8_t eb[PYOBJ_CHUNK * 64];
	uint64_t vb[PYOBJ_CHUNK];
	for (int64_t i = 0; i < n; i += PYOBJ_CHUNK) {
		size_t k = (size_t)(n - i < PYOBJ_CHUNK ? n - i : PYOBJ_CHUNK);
		if (pyobj_read(r, entries + (uint64_t)i * (uint64_t)esize, eb, k * (size_t)esize))
			return -EFAULT;
		if (values && pyobj_read(r, values + (uint64_t)i * 8, vb, k * 8))
			return -EFAULT;
		for (size_t j = 0; j < k; j++) {
			const uint8_t *e = eb + j * (size_t)esize;
			uint64_t key = pyobj_get(e, (size_t)esize, koff, 8);
			uint64_t val = values ? vb[j] : pyobj_get(e, (size_t)esize, voff, 8);
			if (key && val && fn(r, key, val, ctx))
				return 0;
		}
	}
	return 0;
}

/* The entries of the PyDictObject at dict. */
int pyobj_dict_each(struct pyobj_rd *r, uint64_t dict, pyobj_entry_fn fn, void *ctx)
{
	const struct py_layout *l = r->l;
	uint8_t h[PYOBJ_HDR];
	if (l->dict_keys >= 0) {
		int32_t end = (l->dict_keys > l->dict_values ? l->dict_keys : l->dict_values) + 8;
		if (l->dict_values < 0 || end > PYOBJ_HDR || pyobj_read(r, dict, h, (size_t)end))
			return -EFAULT;
		uint64_t keys = pyobj_get(h, (size_t)end, l->dict_keys, 8),
			 values = pyobj_get(h, (size_t)end, l->dict_values, 8);
		if (!keys)
			return -EFAULT;
		/* Before 3.11 ma_values is the array itself. */
		if (values && l->values_values > 0)
			values += (uint64_t)l->values_values;
		return keys_each(r, keys, values, UINT64_MAX, fn, ctx);
	}
	/* 2.7: ma_mask + 1 slots, each {hash, key, value}; a dummy key has no
	 * value. */
	int32_t end = (l->dict_mask > l->dict_table ? l->dict_mask : l->dict_table) + 8;
	if (l->dict_mask < 0 || l->dict_table < 0 || end > PYOBJ_HDR ||
	    pyobj_read(r, dict, h, (size_t)end))
		return -ENOTSUP;
	uint64_t mask = pyobj_get(h, (size_t)end, l->dict_mask, 8),
		 table = pyobj_get(h, (size_t)end, l->dict_table, 8);
	int32_t esize = l->entry_size;
	if (!table || mask >= PYOBJ_DICT_MAX || ((mask + 1) & mask) || esize <= 0 || esize > 64)
		return -EFAULT;
	uint8_t eb[PYOBJ_CHUNK * 64];
	for (uint64_t i = 0; i <= mask; i += PYOBJ_CHUNK) {
		size_t k = (size_t)(mask + 1 - i < PYOBJ_CHUNK ? mask + 1 - i : PYOBJ_CHUNK);
		if (pyobj_read(r, table + i * (uint64_t)esize, eb, k * (size_t)esize))
			return -EFAULT;
		for (size_t j = 0; j < k; j++) {
			const uint8_t *e = eb + j * (size_t)esize;
			uint64_t key = pyobj_get(e, (size_t)esize, l->entry_key, 8),
				 val = pyobj_get(e, (size_t)esize, l->entry_value, 8);
			if (key && val && fn(r, key, val, ctx))
				return 0;
		}
	}
	return 0;
}

/* The attributes of the object at obj: its __dict__, managed dict or values. */
int pyobj_attrs_each(struct pyobj_rd *r, uint64_t obj, pyobj_entry_fn fn, void *ctx)
{
	const struct py_layout *l = r->l;
	uint64_t type, flags = 0, dict = 0;
	uint8_t t[1024];
	int32_t end = 0, offs[] = {l->type_flags, l->type_dictoffset, l->type_basicsize,
				   l->heaptype_cached_keys};
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		if (offs[i] + 8 > end)
			end = offs[i] + 8;
	if (l->type_flags < 0 || l->type_dictoffset < 0 || (size_t)end > sizeof(t))
		return -ENOTSUP;
	if (pyobj_u64(r, obj + (uint64_t)l->obj_type, &type) || pyobj_read(r, type, t, (size_t)end))
		return -EFAULT;
	flags = pyobj_get(t, (size_t)end, l->type_flags, 8);
	if (r->pp->objdict != PY_OD_DICTOFFSET && (flags & PY_TPFLAGS_MANAGED_DICT)) {
		uint64_t keys = pyobj_get(t, (size_t)end, l->heaptype_cached_keys, 8), values = 0,
			 vcap = UINT64_MAX;
		int64_t at =
		    r->pp->free_threaded ? PY_FT_MANAGED_DICT_OFFSET : PY_MANAGED_DICT_OFFSET;
		if (pyobj_u64(r, obj + (uint64_t)at, &dict))
			return -EFAULT;
		switch (r->pp->objdict) {
		case PY_OD_MANAGED_VALUES_PTR:
			if (pyobj_u64(r, obj + (uint64_t)PY_MANAGED_VALUES_OFFSET_311, &values))
				return -EFAULT;
			break;
		case PY_OD_MANAGED_TAGGED:
			if (dict & 1) { /* values, tagged: _PyDictOrValues_GetValues */
				values = dict + 1;
				dict = 0;
			}
			break;
		case PY_OD_MANAGED_INLINE:
			if (!dict && (flags & PY_TPFLAGS_INLINE_VALUES)) {
				int64_t basic =
				    (int64_t)pyobj_get(t, (size_t)end, l->type_basicsize, 8);
				uint8_t cap = 0, valid = 0;
				if (basic <= 0 || basic > (1 << 20) || l->values_capacity < 0 ||
				    l->values_valid < 0)
					return -EFAULT;
				values = obj + (uint64_t)basic;
				if (pyobj_read(r, values + (uint64_t)l->values_capacity, &cap, 1) ||
				    pyobj_read(r, values + (uint64_t)l->values_valid, &valid, 1))
					return -EFAULT;
				if (!valid)
					return 0;
				vcap = cap;
			}
			break;
		case PY_OD_DICTOFFSET:
			break;
		}
		if (dict)
			return pyobj_dict_each(r, dict, fn, ctx);
		if (!values || !keys)
			return 0;
		if (l->values_values > 0)
			values += (uint64_t)l->values_values;
		return keys_each(r, keys, values, vcap, fn, ctx);
	}
	int64_t off = (int64_t)pyobj_get(t, (size_t)end, l->type_dictoffset, 8);
	if (off <= 0 || off > (1 << 20)) /* none, or at the end of a variable-size object */
		return 0;
	if (pyobj_u64(r, obj + (uint64_t)off, &dict) || !dict)
		return 0;
	return pyobj_dict_each(r, dict, fn, ctx);
}

struct find {
	const char *const *names;
	uint64_t value;
};

static bool find_fn(struct pyobj_rd *r, uint64_t key, uint64_t value, void *ctx)
{
	struct find *f = ctx;
	if (!pyobj_str_is(r, key, f->names))
		return false;
	f->value = value;
	return true;
}

/* The value of the first key of dict that is one of names, or 0. */
uint64_t pyobj_dict_get(struct pyobj_rd *r, uint64_t dict, const char *const *names)
{
	struct find f = {.names = names};
	if (!dict || pyobj_dict_each(r, dict, find_fn, &f))
		return 0;
	return f.value;
}

uint64_t pyobj_attr_get(struct pyobj_rd *r, uint64_t obj, const char *const *names)
{
	struct find f = {.names = names};
	if (!obj || pyobj_attrs_each(r, obj, find_fn, &f))
		return 0;
	return f.value;
}
