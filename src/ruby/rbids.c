/* rbids.c - the names of Ruby's IDs (rbids.h). */
#include <errno.h>
#include <string.h>

#include "ruby/rbframes.h"
#include "ruby/rbids.h"

/* Bytes of rb_id2str, and of the lookup it jumps to, that are read. */
#define ID2STR_SCAN 48
#define LOOKUP_SCAN 128
/* symbols->ids is an array of arrays of ID_ENTRY_UNIT entries, each
 * ID_ENTRY_SIZE VALUEs: the string first (symbol.c). */
#define ID_ENTRY_UNIT 512
#define ID_ENTRY_SIZE 2
#define IDS_OFF 16

static int32_t rel32(const uint8_t *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

int rb_ids_find(struct elf_file *ef, struct rb_ids *out)
{
	uint64_t fn, size, to = 0;
	uint8_t c[LOOKUP_SCAN];
	memset(out, 0, sizeof(*out));
	if (elf_file_symbol(ef, "rb_id2str", &fn, &size) || elf_file_read(ef, fn, c, ID2STR_SCAN))
		return -ENOENT;
	for (size_t i = 0; i + 7 <= ID2STR_SCAN; i++) {
		/* shr $n,%rax or %rdi: 48 c1 e8/ef n */
		if (c[i] == 0x48 && c[i + 1] == 0xc1 && (c[i + 2] == 0xe8 || c[i + 2] == 0xef))
			out->shift = c[i + 3];
		/* cmp $imm32,%rdi: 48 81 ff imm32; cmp $imm32,%rax: 48 3d imm32 */
		if (c[i] == 0x48 && c[i + 1] == 0x81 && c[i + 2] == 0xff)
			out->last_op = (uint64_t)rel32(c + i + 3);
		if (c[i] == 0x48 && c[i + 1] == 0x3d)
			out->last_op = (uint64_t)rel32(c + i + 2);
		/* jmp rel32: the lookup */
		if (c[i] == 0xe9 && !to)
			to = fn + i + 5 + (int64_t)rel32(c + i + 1);
	}
	if (!out->shift || out->shift > 8 || !out->last_op || !to ||
	    elf_file_read(ef, to, c, sizeof(c)))
		return -ENOENT;
	uint64_t last_id = 0, ids = 0;
	for (size_t i = 0; i + 7 <= sizeof(c); i++) {
		/* cmp %edi,disp32(%rip): 39 3d disp32 */
		if (c[i] == 0x39 && c[i + 1] == 0x3d && !last_id)
			last_id = to + i + 6 + (int64_t)rel32(c + i + 2);
		/* mov disp32(%rip),%rdi: 48 8b 3d disp32 */
		if (c[i] == 0x48 && c[i + 1] == 0x8b && c[i + 2] == 0x3d && !ids)
			ids = to + i + 7 + (int64_t)rel32(c + i + 3);
	}
	if (!last_id || ids != last_id + IDS_OFF)
		return -ENOENT;
	out->symbols = last_id;
	return 0;
}

/* Entry i of Ruby array ary. */
static int ary_at(const struct rb_offsets *o, mem_reader rd, void *ctx, uint64_t ary, uint64_t i,
		  uint64_t *v)
{
	uint64_t flags, at = ary + o->ary_embed_ary;
	int ret;
	if ((ret = mem_read_u64_with(rd, ctx, ary, &flags)))
		return ret;
	if ((flags & o->t_mask) != o->t_array)
		return -EPROTO;
	if (!(flags & o->ary_embed) &&
	    (ret = mem_read_u64_with(rd, ctx, ary + o->ary_heap_ptr, &at)))
		return ret;
	return mem_read_u64_with(rd, ctx, at + i * 8, v);
}

int rb_id_name(const struct rb_offsets *o, const struct rb_ids *t, uint64_t bias, mem_reader rd,
	       void *ctx, uint64_t id, char *buf, size_t len)
{
	uint64_t serial = id > t->last_op ? id >> t->shift : id, ids, ary, str;
	uint32_t last;
	int ret;
	buf[0] = 0;
	if (!t->symbols)
		return -ENOENT;
	if ((ret = rd(ctx, bias + t->symbols, &last, sizeof(last))) < 0)
		return ret;
	if (!serial || serial > last)
		return -ENOENT;
	if ((ret = mem_read_u64_with(rd, ctx, bias + t->symbols + IDS_OFF, &ids)) ||
	    (ret = ary_at(o, rd, ctx, ids, serial / ID_ENTRY_UNIT, &ary)) ||
	    (ret = ary_at(o, rd, ctx, ary, (serial % ID_ENTRY_UNIT) * ID_ENTRY_SIZE, &str)))
		return ret;
	return rb_read_string(o, rd, ctx, str, buf, len);
}

int rb_cfunc_name(const struct rb_offsets *o, const struct rb_ids *t, uint64_t bias, mem_reader rd,
		  void *ctx, uint64_t me, char *buf, size_t len)
{
	uint64_t def, id;
	int ret;
	buf[0] = 0;
	if ((ret = mem_read_u64_with(rd, ctx, me + o->me_def, &def)) ||
	    (ret = mem_read_u64_with(rd, ctx, def + o->def_original_id, &id)))
		return ret;
	return rb_id_name(o, t, bias, rd, ctx, id, buf, len);
}

/* Entries of an ivar table visited at most: a class's are a few. */
#define IVARS_MAX 64
#define ST_ENTRY 24 /* st_table_entry: hash, key, record */

static int flags_of(mem_reader rd, void *ctx, uint64_t v, uint64_t *flags)
{
	/* Special constants (Fixnums, nil, symbols) are no objects. */
	if (!v || (v & 7))
		return -EPROTO;
	return mem_read_u64_with(rd, ctx, v, flags);
}

/* Before 3.2: the ivar called name of class klass, from its ivar table
 * (an st_table whose keys are IDs, matched by their names). */
static int ivar_by_name(const struct rb_offsets *o, const struct rb_ids *t, uint64_t bias,
			mem_reader rd, void *ctx, uint64_t klass, const char *name, uint64_t *v)
{
	uint64_t ext, tbl, entries, start, bound;
	int ret;
	if (!o->class_ext)
		return -ENOENT;
	if ((ret = mem_read_u64_with(rd, ctx, klass + o->class_ext, &ext)) ||
	    (ret = mem_read_u64_with(rd, ctx, ext + o->ext_iv_tbl, &tbl)))
		return ret;
	if (!tbl)
		return -ENOENT;
	if ((ret = mem_read_u64_with(rd, ctx, tbl + o->st_entries, &entries)) ||
	    (ret = mem_read_u64_with(rd, ctx, tbl + o->st_entries_start, &start)) ||
	    (ret = mem_read_u64_with(rd, ctx, tbl + o->st_entries_bound, &bound)))
		return ret;
	if (bound < start || bound - start > IVARS_MAX)
		return -EPROTO;
	for (uint64_t i = start; i < bound; i++) {
		uint64_t e[3];
		char n[32];
		if ((ret = rd(ctx, entries + i * ST_ENTRY, e, sizeof(e))) < 0)
			return ret;
		if (!rb_id_name(o, t, bias, rd, ctx, e[1], n, sizeof(n)) && !strcmp(n, name)) {
			*v = e[2];
			return 0;
		}
	}
	return -ENOENT;
}

/* The class path of class or module klass. */
static int class_path(const struct rb_offsets *o, const struct rb_ids *t, uint64_t bias,
		      mem_reader rd, void *ctx, uint64_t klass, char *buf, size_t len)
{
	uint64_t path = 0;
	int ret;
	if (o->class_classpath)
		ret = mem_read_u64_with(rd, ctx, klass + o->class_classpath, &path);
	else
		ret = ivar_by_name(o, t, bias, rd, ctx, klass, "__classpath__", &path);
	if (ret)
		return ret;
	return rb_read_string(o, rd, ctx, path, buf, len);
}

int rb_method_owner(const struct rb_offsets *o, const struct rb_ids *t, uint64_t bias,
		    mem_reader rd, void *ctx, uint64_t me, char *buf, size_t len, char *sep)
{
	uint64_t flags, owner, oflags;
	int ret;
	buf[0] = 0;
	if ((ret = flags_of(rd, ctx, me, &flags)))
		return ret;
	if ((flags & o->t_mask) != o->t_imemo ||
	    ((flags >> o->imemo_shift) & o->imemo_mask) != o->imemo_ment)
		return -ENOENT;
	if ((ret = mem_read_u64_with(rd, ctx, me + o->me_owner, &owner)) ||
	    (ret = flags_of(rd, ctx, owner, &oflags)))
		return ret;
	uint64_t type = oflags & o->t_mask;
	if (type != o->t_class && type != o->t_module)
		return -EPROTO;
	*sep = '#';
	if (oflags & o->fl_singleton) {
		uint64_t obj, f;
		if (o->class_attached)
			ret = mem_read_u64_with(rd, ctx, owner + o->class_attached, &obj);
		else
			ret = ivar_by_name(o, t, bias, rd, ctx, owner, "__attached__", &obj);
		if (ret || (ret = flags_of(rd, ctx, obj, &f)))
			return ret ? ret : -EPROTO;
		/* The singleton class of a class or a module: its methods
		 * are the class's (Foo.bar); of another object, no name. */
		if ((f & o->t_mask) != o->t_class && (f & o->t_mask) != o->t_module)
			return -ENOENT;
		*sep = '.';
		owner = obj;
	}
	ret = class_path(o, t, bias, rd, ctx, owner, buf, len);
	return ret ? ret : buf[0] ? 0 : -ENOENT;
}
