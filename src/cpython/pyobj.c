/* pyobj.c - reading Python objects out of a target (pyobj.h). */
#include <errno.h>
#include <string.h>

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
