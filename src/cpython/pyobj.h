/* pyobj.h - reading Python objects out of a target: bounded reads that
 * share a budget, and the few objects taipan reads for what they hold
 * (str, int). Thread names (pythreads.c) and dump --locals (pylocals.c)
 * read through it.
 *
 * Every read goes through the struct pyproc (process_vm_readv on a live
 * process, or a captured image), and one reader's reads share a budget: a
 * structure being changed under us, or memory that is not what the layout
 * says, ends in fewer answers, never in a hang.
 */
#ifndef TAIPAN_CPYTHON_PYOBJ_H
#define TAIPAN_CPYTHON_PYOBJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpython/pyproc.h"

/* Bytes of an object's header read at once: past every offset the layouts
 * put in a dict, keys object or int header. */
#define PYOBJ_HDR 128

struct pyobj_rd {
	const struct pyproc *pp;
	const struct py_layout *l;
	unsigned int budget; /* reads left */
	int gone;	     /* -ESRCH once a read says the process is gone */
	uint64_t str_type;   /* the str type, once one object's type proved to be it */
};

/* len bytes at addr into buf: 0, or a negative errno (-E2BIG: the budget is
 * spent; -EFAULT: a null or wrapping address). */
int pyobj_read(struct pyobj_rd *r, uint64_t addr, void *buf, size_t len);
/* A pointer-sized word at addr into *v (0 on failure). */
int pyobj_u64(struct pyobj_rd *r, uint64_t addr, uint64_t *v);
/* The field of size bytes at off of buf (len bytes read), or 0 when the
 * layout has none (off < 0) or it lies outside what was read. */
uint64_t pyobj_get(const uint8_t *buf, size_t len, int32_t off, size_t size);
/* pyobj_read() as a mem_reader (ctx: the struct pyobj_rd). */
int pyobj_reader(void *ctx, uint64_t addr, void *buf, size_t len);

/* The str at obj (a bytes str on 2.7) as UTF-8 into buf (cap bytes,
 * NUL-terminated), cut at a character when longer (cpython/pystr.h).
 * Returns its length, or -1 when obj is not a readable compact str; *cut
 * says whether it was cut. */
int pyobj_str(struct pyobj_rd *r, uint64_t obj, char *buf, size_t cap, bool *cut);
/* Whether obj is a str: its type's tp_name is "str" (on 2.7 too). */
bool pyobj_is_str(struct pyobj_rd *r, uint64_t obj);
/* The name of obj's type (tp_name) into buf: 0, or a negative errno. */
int pyobj_type_name(struct pyobj_rd *r, uint64_t obj, char *buf, size_t cap);

/* Whether the str at obj is one of names (NULL-terminated). */
bool pyobj_str_is(struct pyobj_rd *r, uint64_t obj, const char *const *names);

/* Entries of a dict visited at most (sys.modules of a big application has
 * a few thousand). */
#define PYOBJ_DICT_MAX 65536

/* Called per live entry of a dict; returns true to stop. */
typedef bool (*pyobj_entry_fn)(struct pyobj_rd *r, uint64_t key, uint64_t value, void *ctx);

/* Calls fn on each live entry of the dict at dict (2.7's too), in order,
 * up to PYOBJ_DICT_MAX of them: 0, or a negative errno. */
int pyobj_dict_each(struct pyobj_rd *r, uint64_t dict, pyobj_entry_fn fn, void *ctx);
/* The same over the attributes of the object at obj: its __dict__, or
 * (3.11+) its managed dict or values. */
int pyobj_attrs_each(struct pyobj_rd *r, uint64_t obj, pyobj_entry_fn fn, void *ctx);
/* The value of the first str key of dict (of obj's attributes) that is one
 * of names, or 0. */
uint64_t pyobj_dict_get(struct pyobj_rd *r, uint64_t dict, const char *const *names);
uint64_t pyobj_attr_get(struct pyobj_rd *r, uint64_t obj, const char *const *names);

/* The int at obj (a PyLongObject; on 2.7 a PyIntObject when int_obj)
 * into *out: 0; -ERANGE when it does not fit 64 bits signed; another
 * negative errno when it cannot be read. */
int pyobj_int(struct pyobj_rd *r, uint64_t obj, bool int_obj, int64_t *out);

#endif /* TAIPAN_CPYTHON_PYOBJ_H */
