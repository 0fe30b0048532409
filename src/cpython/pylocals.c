/* pylocals.c - the variables of a Python frame (pylocals.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpython/abi.h"
#include "cpython/pylocals.h"
#include "cpython/pyobj.h"
#include "cpython/pystr.h"
#include "util/strutil.h"

/* Include/internal/pycore_code.h: the kinds of co_localspluskinds (3.11+). */
#define CO_FAST_HIDDEN 0x10
#define CO_FAST_LOCAL 0x20
#define CO_FAST_CELL 0x40
#define CO_FAST_FREE 0x80

void pylocals_float_repr(double v, char *buf, size_t cap)
{
	if (isnan(v)) {
		snprintf(buf, cap, "nan");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, cap, v < 0 ? "-inf" : "inf");
		return;
	}
	/* The fewest digits that read back as v, laid out as repr() does:
	 * positional from 1e-4 up to 1e16, else with an exponent. */
	char e[40];
	int p;
	for (p = 0; p < 17; p++) {
		snprintf(e, sizeof(e), "%.*e", p, v);
		if (strtod(e, NULL) == v)
			break;
	}
	const char *s = e;
	bool neg = *s == '-';
	s += neg;
	char d[24];
	size_t nd = 0;
	for (; *s && *s != 'e' && nd < sizeof(d) - 1; s++)
		if (*s != '.')
			d[nd++] = *s;
	while (nd > 1 && d[nd - 1] == '0')
		nd--;
	d[nd] = 0;
	int x = *s == 'e' ? atoi(s + 1) : 0;
	char out[64];
	size_t n = 0;
	if (neg)
		out[n++] = '-';
	if (x >= -4 && x < 16) {
		if (x < 0) {
			out[n++] = '0';
			out[n++] = '.';
			for (int i = -1; i > x; i--)
				out[n++] = '0';
			memcpy(out + n, d, nd);
			n += nd;
		} else {
			for (int i = 0; i <= x; i++)
				out[n++] = (size_t)i < nd ? d[i] : '0';
			out[n++] = '.';
			if ((size_t)x + 1 < nd) {
				memcpy(out + n, d + x + 1, nd - (size_t)x - 1);
				n += nd - (size_t)x - 1;
			} else {
				out[n++] = '0';
			}
		}
		out[n] = 0;
	} else {
		out[n++] = d[0];
		if (nd > 1) {
			out[n++] = '.';
			memcpy(out + n, d + 1, nd - 1);
			n += nd - 1;
		}
		snprintf(out + n, sizeof(out) - n, "e%c%02d", x < 0 ? '-' : '+', abs(x));
	}
	snprintf(buf, cap, "%s", out);
}

/* src (len bytes) between quotes, as repr() chooses them (single, double
 * when only single ones are inside), safe to print: text (UTF-8) escaped
 * as everything taipan prints is (str_escape: backslashes, controls,
 * invisible characters), bytes with every byte outside printable ASCII as
 * \xHH; "..." after the closing quote when cut. */
static void quote(char *buf, size_t cap, const char *prefix, const uint8_t *src, size_t len,
		  bool text, bool cut)
{
	bool single = memchr(src, '\'', len) != NULL, dbl = memchr(src, '"', len) != NULL;
	char q = single && !dbl ? '"' : '\'';
	char also[2] = {q, 0};
	size_t n = (size_t)snprintf(buf, cap, "%s%c", prefix, q);
	if (text) {
		char s[PYLOCALS_STR_CHARS * 4 + 1];
		size_t k = len < sizeof(s) - 1 ? len : sizeof(s) - 1;
		memcpy(s, src, k);
		s[k] = 0;
		size_t w = str_escape(buf + n, cap - n, s, also);
		n = w < cap - n ? n + w : strlen(buf);
	} else {
		for (size_t i = 0; i < len && n + 8 < cap; i++) {
			uint8_t c = src[i];
			if (c == '\\' || c == (uint8_t)q)
				n += (size_t)snprintf(buf + n, cap - n, "\\%c", c);
			else if (c < 0x20 || c >= 0x7f)
				n += (size_t)snprintf(buf + n, cap - n, "\\x%02x", c);
			else
				buf[n++] = (char)c;
		}
	}
	snprintf(buf + n, cap - n, "%c%s", q, cut ? "..." : "");
}

/* Fills v's type, value and length from the object at obj. */
static void describe(struct pyobj_rd *r, const struct pyproc *pp, uint64_t obj, struct rt_local *v)
{
	const struct py_layout *l = r->l;
	v->addr = obj;
	v->len = -1;
	v->value[0] = 0;
	if (pyobj_type_name(r, obj, v->type, sizeof(v->type))) {
		snprintf(v->type, sizeof(v->type), "?");
		return;
	}
	const char *t = v->type;
	bool py2 = pp->major == 2;
	if (!strcmp(t, "NoneType")) {
		snprintf(v->value, sizeof(v->value), "None");
	} else if (!strcmp(t, "bool") || !strcmp(t, "int") || (py2 && !strcmp(t, "long"))) {
		int64_t i;
		int ret = pyobj_int(r, obj, py2 && strcmp(t, "long"), &i);
		if (!ret && !strcmp(t, "bool"))
			snprintf(v->value, sizeof(v->value), "%s", i ? "True" : "False");
		else if (!ret)
			snprintf(v->value, sizeof(v->value), "%lld", (long long)i);
		else if (ret == -ERANGE)
			snprintf(v->value, sizeof(v->value), "(beyond 64 bits)");
	} else if (!strcmp(t, "float")) {
		double d;
		if (l->float_fval >= 0 &&
		    !pyobj_read(r, obj + (uint64_t)l->float_fval, &d, sizeof(d)))
			pylocals_float_repr(d, v->value, sizeof(v->value));
	} else if (!strcmp(t, "str")) {
		char s[PYLOCALS_STR_CHARS * 4 + 1];
		bool cut;
		int n =
		    pystr_read(pp, pyobj_reader, r, obj, PYLOCALS_STR_CHARS, s, sizeof(s), &cut);
		if (n >= 0)
			quote(v->value, sizeof(v->value), "", (const uint8_t *)s, (size_t)n, !py2,
			      cut);
	} else if (!strcmp(t, "bytes")) {
		int64_t len = 0;
		uint8_t b[PYLOCALS_BYTES];
		if (l->var_size >= 0 && l->bytes_sval >= 0 &&
		    !pyobj_read(r, obj + (uint64_t)l->var_size, &len, sizeof(len)) && len >= 0) {
			size_t n = len > PYLOCALS_BYTES ? PYLOCALS_BYTES : (size_t)len;
			v->len = len;
			if (!n || !pyobj_read(r, obj + (uint64_t)l->bytes_sval, b, n))
				quote(v->value, sizeof(v->value), "b", b, n, false,
				      (size_t)len > n);
		}
	} else if (!strcmp(t, "list") || !strcmp(t, "tuple") || !strcmp(t, "dict") ||
		   !strcmp(t, "set") || !strcmp(t, "frozenset")) {
		int32_t off = !strcmp(t, "dict")			     ? l->dict_used
			      : !strcmp(t, "set") || !strcmp(t, "frozenset") ? l->set_used
									     : l->var_size;
		int64_t len;
		if (off >= 0 && !pyobj_read(r, obj + (uint64_t)off, &len, sizeof(len)) && len >= 0)
			v->len = len;
	}
}

/* The tuple of names at tuple: its size (bounded by max) and its items'
 * addresses into items. */
static int tuple_items(struct pyobj_rd *r, uint64_t tuple, uint64_t *items, size_t max, size_t *n,
		       bool *cut)
{
	const struct py_layout *l = r->l;
	int64_t size;
	*n = 0;
	if (!tuple)
		return 0; /* no names of that kind */
	if (l->var_size < 0 || l->tuple_item < 0 ||
	    pyobj_read(r, tuple + (uint64_t)l->var_size, &size, sizeof(size)) || size < 0)
		return -EFAULT;
	size_t k = (size_t)size;
	if (k > max) {
		k = max;
		*cut = true;
	}
	if (k && pyobj_read(r, tuple + (uint64_t)l->tuple_item, items, k * sizeof(*items)))
		return -EFAULT;
	*n = k;
	return 0;
}

/* Variable i, named by name, whose slot holds obj, of kind: into *v
 * unless it is unbound. Whether it was. */
static bool one(struct pyobj_rd *r, const struct pyproc *pp, uint64_t name, uint64_t obj,
		uint8_t kind, struct rt_local *v, bool *cut)
{
	bool name_cut;
	memset(v, 0, sizeof(*v));
	if (pyobj_str(r, name, v->name, sizeof(v->name), &name_cut) <= 0) {
		*cut = true;
		return false;
	}
	v->kind = kind;
	/* A cell or free variable's slot holds its cell once the function
	 * has started (a cell variable's holds the argument itself before
	 * that): the value is the cell's. */
	if (obj && kind != RT_LOCAL && r->l->cell_ref >= 0) {
		char t[8];
		uint64_t ref;
		if (!pyobj_type_name(r, obj, t, sizeof(t)) && !strcmp(t, "cell")) {
			if (pyobj_u64(r, obj + (uint64_t)r->l->cell_ref, &ref))
				return false;
			obj = ref;
		}
	}
	if (!obj)
		return false; /* unbound: not assigned yet, or deleted */
	describe(r, pp, obj, v);
	return true;
}

int pylocals_read(const struct pyproc *pp, uint64_t code, uint64_t frame, struct rt_local *out,
		  size_t max, bool *cut)
{
	const struct py_layout *l = &pp->layout;
	struct pyobj_rd r = {.pp = pp, .l = l, .budget = PYLOCALS_READS};
	uint64_t names[PYLOCALS_MAX], slots[PYLOCALS_MAX];
	uint8_t kinds[PYLOCALS_MAX];
	size_t n = 0;
	*cut = false;
	if (max > PYLOCALS_MAX)
		max = PYLOCALS_MAX;
	if (l->code_varnames < 0 || l->frame_localsplus < 0 || !code || !frame)
		return -ENOTSUP;
	if (l->code_localspluskinds >= 0) {
		/* 3.11+: one tuple of names, one byte of kind each. */
		uint64_t tuple, kb;
		int64_t nk;
		if (pyobj_u64(&r, code + (uint64_t)l->code_varnames, &tuple) ||
		    pyobj_u64(&r, code + (uint64_t)l->code_localspluskinds, &kb) ||
		    tuple_items(&r, tuple, names, max, &n, cut) ||
		    pyobj_read(&r, kb + (uint64_t)l->var_size, &nk, sizeof(nk)) ||
		    nk < (int64_t)n ||
		    (n && pyobj_read(&r, kb + (uint64_t)l->bytes_sval, kinds, n)))
			return r.gone ? r.gone : -EFAULT;
		for (size_t i = 0; i < n; i++)
			kinds[i] = kinds[i] & CO_FAST_HIDDEN ? 0xff
				   : kinds[i] & CO_FAST_FREE ? RT_LOCAL_FREE
				   : kinds[i] & CO_FAST_CELL ? RT_LOCAL_CELL
							     : RT_LOCAL;
	} else {
		/* Before 3.11: co_nlocals locals (co_varnames), then the cells
		 * (co_cellvars) and the free variables (co_freevars). */
		uint64_t t[3];
		int32_t nlocals = 0;
		size_t k = 0;
		if (l->code_nlocals < 0 || l->code_cellvars < 0 || l->code_freevars < 0)
			return -ENOTSUP;
		if (pyobj_u64(&r, code + (uint64_t)l->code_varnames, &t[0]) ||
		    pyobj_u64(&r, code + (uint64_t)l->code_cellvars, &t[1]) ||
		    pyobj_u64(&r, code + (uint64_t)l->code_freevars, &t[2]) ||
		    pyobj_read(&r, code + (uint64_t)l->code_nlocals, &nlocals, sizeof(nlocals)))
			return r.gone ? r.gone : -EFAULT;
		for (int g = 0; g < 3; g++) {
			if (tuple_items(&r, t[g], names + n, max - n, &k, cut))
				return r.gone ? r.gone : -EFAULT;
			/* co_varnames is co_nlocals long: the locals' slots. */
			if (g == 0 && (nlocals < 0 || (size_t)nlocals != k) && !*cut)
				return -EFAULT;
			memset(kinds + n, g, k);
			n += k;
		}
	}
	if (n && pyobj_read(&r, frame + (uint64_t)l->frame_localsplus, slots, n * sizeof(*slots)))
		return r.gone ? r.gone : -EFAULT;
	/* 3.14+: the slots are tagged _PyStackRefs. */
	uint64_t mask = pp->tp.off.flags & TP_LF_STACKREF ? ~3ULL : ~0ULL;
	size_t got = 0;
	for (size_t i = 0; i < n; i++) {
		if (kinds[i] == 0xff)
			continue; /* a comprehension's, inlined (3.12+) */
		if (one(&r, pp, names[i], slots[i] & mask, kinds[i], &out[got], cut))
			got++;
		if (r.gone)
			return r.gone;
	}
	if (!r.budget)
		*cut = true;
	return (int)got;
}
