/* test_rbframes.c - unit tests for a Ruby thread's frames and their names
 * (src/ruby/rbframes.c) over a fake process's memory laid out as the
 * generated layouts of Ruby 3.1 and 3.3 say: the walk of the control
 * frames (Ruby frames with a pc, C functions' frames, the rest skipped, and
 * every bound a hostile process could break), strings embedded and not in
 * both versions' forms, and the rank of the instruction table's succinct
 * bit vector against its definition. tests/functional/test_ruby.py holds
 * the same code to caller_locations in live processes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ruby/rbframes.h"
#include "ruby/rbids.h"
#include "ruby/rboffsets.h"

#define BASE 0x10000ULL
static uint8_t mem[1 << 16];

static int fake_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	if (addr < BASE || addr - BASE > sizeof(mem) || len > sizeof(mem) - (addr - BASE))
		return -EFAULT;
	memcpy(buf, mem + (addr - BASE), len);
	return 0;
}

static void put64(uint64_t addr, uint64_t v)
{
	memcpy(mem + (addr - BASE), &v, 8);
}

static void put32(uint64_t addr, uint32_t v)
{
	memcpy(mem + (addr - BASE), &v, 4);
}

static const struct rb_offsets *layout(unsigned int minor)
{
	const struct rb_offsets *o = rb_offsets_find(3, minor);
	assert_non_null(o);
	return o;
}

/* Ranks built as iseq.c's succ_index_table_create() lays them out, for a
 * set of positions: each lookup must count the positions at or before it. */
static void test_succ_rank(void **state)
{
	(void)state;
	enum { MAXPOS = 1300 };
	static bool set[MAXPOS];
	memset(mem, 0, sizeof(mem));
	memset(set, 0, sizeof(set));
	srand(7);
	for (int i = 0; i < MAXPOS; i++)
		set[i] = i == 0 || rand() % 5 == 0;
	const uint64_t table = BASE + 0x100;
	int count = 0;
	/* The immediate part: 9 positions a word, 7 bits of rank each. */
	for (int x = 0; x < 54; x++) {
		count += set[x];
		uint64_t w;
		memcpy(&w, mem + (table - BASE) + (x / 9) * 8, 8);
		w |= (uint64_t)count << (7 * (x % 9));
		put64(table + (x / 9) * 8, w);
	}
	/* Blocks of 512: the rank before it, the ranks of its 64-bit parts,
	 * the bits. */
	for (int b = 0; 54 + b * 512 < MAXPOS; b++) {
		uint64_t block = table + 48 + (uint64_t)b * 80, small = 0;
		put32(block, (uint32_t)count);
		int within = 0;
		for (int k = 0; k < 8; k++) {
			if (k)
				small |= (uint64_t)within << (9 * (k - 1));
			uint64_t bits = 0;
			for (int i = 0; i < 64; i++) {
				int x = 54 + b * 512 + k * 64 + i;
				if (x < MAXPOS && set[x]) {
					bits |= 1ULL << i;
					within++;
				}
			}
			put64(block + 16 + k * 8, bits);
		}
		put64(block + 8, small);
		count += within;
	}
	int want = 0;
	for (int x = 0; x < MAXPOS; x++) {
		uint32_t got;
		want += set[x];
		assert_int_equal(rb_succ_rank(fake_read, NULL, table, (uint32_t)x, &got), 0);
		assert_int_equal(got, want);
	}
}

/* A string object at at: its flags (T_STRING, embedded or not) and bytes
 * as layout o keeps them. */
static void put_string(const struct rb_offsets *o, uint64_t at, const char *s, bool heap)
{
	uint64_t n = strlen(s), flags = o->t_string;
	if (heap) {
		flags |= o->str_noembed;
		put64(at + o->str_len, n);
		put64(at + o->str_heap_ptr, at + 0x200);
		memcpy(mem + (at + 0x200 - BASE), s, n);
	} else {
		if (o->str_embed_len_mask)
			flags |= (n << o->str_embed_len_shift) & o->str_embed_len_mask;
		else
			put64(at + o->str_embed_len, n);
		memcpy(mem + (at + o->str_embed_ary - BASE), s, n);
	}
	put64(at, flags);
}

static void test_strings(void **state)
{
	(void)state;
	const unsigned int minors[] = {1, 3};
	for (size_t v = 0; v < 2; v++) {
		const struct rb_offsets *o = layout(minors[v]);
		char buf[64];
		memset(mem, 0, sizeof(mem));
		put_string(o, BASE + 0x1000, "block in run", false);
		put_string(o, BASE + 0x2000, "/srv/app/lib/a_rather_long_path_name.rb", true);
		assert_int_equal(
		    rb_read_string(o, fake_read, NULL, BASE + 0x1000, buf, sizeof(buf)), 0);
		assert_string_equal(buf, "block in run");
		assert_int_equal(
		    rb_read_string(o, fake_read, NULL, BASE + 0x2000, buf, sizeof(buf)), 0);
		assert_string_equal(buf, "/srv/app/lib/a_rather_long_path_name.rb");
		/* Cut to the buffer, terminated. */
		assert_int_equal(rb_read_string(o, fake_read, NULL, BASE + 0x2000, buf, 9), 0);
		assert_string_equal(buf, "/srv/app");
		/* A heap string whose length lies: bounded by the buffer. */
		put64(BASE + 0x2000 + o->str_len, 1ULL << 40);
		assert_int_equal(
		    rb_read_string(o, fake_read, NULL, BASE + 0x2000, buf, sizeof(buf)), 0);
		assert_int_equal(buf[sizeof(buf) - 1], 0);
		assert_memory_equal(buf, "/srv/app/lib/a_rather_long_path_name.rb", 39);
		/* Not a string. */
		put64(BASE + 0x3000, o->t_array);
		assert_int_equal(
		    rb_read_string(o, fake_read, NULL, BASE + 0x3000, buf, sizeof(buf)), -EPROTO);
		assert_int_equal(rb_read_string(o, fake_read, NULL, 8, buf, sizeof(buf)), -EFAULT);
	}
}

/* An EC whose stack holds, from its current frame: a Ruby frame, a Ruby
 * frame without a pc (skipped), a C function's frame, another C frame
 * (an ifunc: skipped), then the dummy frame at the end. */
static void test_walk(void **state)
{
	(void)state;
	const struct rb_offsets *o = layout(3);
	const uint64_t ec = BASE + 0x100, stack = BASE + 0x1000, size = 256;
	const uint64_t end = stack + size * 8;
	const uint64_t cfp = end - 5 * o->cfp_size, env = BASE + 0x4000;
	struct rb_frame f[8];
	size_t n;
	memset(mem, 0, sizeof(mem));
	put64(ec + o->ec_vm_stack, stack);
	put64(ec + o->ec_vm_stack_size, size);
	put64(ec + o->ec_cfp, cfp);
	const uint64_t flags[4] = {0, 0, o->frame_magic_cfunc | o->frame_flag_cframe,
				   o->frame_flag_cframe};
	for (int i = 0; i < 4; i++) {
		uint64_t c = cfp + (uint64_t)i * o->cfp_size, ep = env + (uint64_t)i * 0x100;
		put64(c + o->cfp_pc, i == 1 ? 0 : 0x7000 + (uint64_t)i);
		put64(c + o->cfp_iseq, 0x9000 + (uint64_t)i);
		put64(c + o->cfp_ep, ep);
		put64(ep, flags[i]);
		put64(ep - 16, 0x5000 + (uint64_t)i); /* ep[-2]: the method entry */
	}
	assert_int_equal(rb_walk(o, fake_read, NULL, ec, f, 8, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(f[0].iseq, 0x9000);
	assert_int_equal(f[0].pc, 0x7000);
	assert_int_equal(f[1].iseq, 0);
	assert_int_equal(f[1].me, 0x5002);
	/* Room for one: one. */
	assert_int_equal(rb_walk(o, fake_read, NULL, ec, f, 1, &n), 0);
	assert_int_equal(n, 1);
	/* No frame pushed yet. */
	put64(ec + o->ec_cfp, 0);
	assert_int_equal(rb_walk(o, fake_read, NULL, ec, f, 8, &n), 0);
	assert_int_equal(n, 0);
	/* A current frame outside the stack, or between two frames. */
	put64(ec + o->ec_cfp, stack - o->cfp_size);
	assert_int_equal(rb_walk(o, fake_read, NULL, ec, f, 8, &n), -EPROTO);
	put64(ec + o->ec_cfp, end + o->cfp_size);
	assert_int_equal(rb_walk(o, fake_read, NULL, ec, f, 8, &n), -EPROTO);
	put64(ec + o->ec_cfp, cfp + 8);
	assert_int_equal(rb_walk(o, fake_read, NULL, ec, f, 8, &n), -EPROTO);
	/* A stack that wraps around, or no stack. */
	put64(ec + o->ec_cfp, cfp);
	put64(ec + o->ec_vm_stack_size, UINT64_MAX / 4);
	assert_int_equal(rb_walk(o, fake_read, NULL, ec, f, 8, &n), -EPROTO);
	put64(ec + o->ec_vm_stack_size, size);
	put64(ec + o->ec_vm_stack, 0);
	assert_int_equal(rb_walk(o, fake_read, NULL, ec, f, 8, &n), -EPROTO);
	/* A frame whose environment cannot be read. */
	put64(ec + o->ec_vm_stack, stack);
	put64(cfp + o->cfp_ep, 8);
	assert_int_equal(rb_walk(o, fake_read, NULL, ec, f, 8, &n), -EFAULT);
}

/* A method entry whose owner is at klass. */
static uint64_t put_me(const struct rb_offsets *o, uint64_t at, uint64_t klass)
{
	put64(at, o->t_imemo | ((uint64_t)o->imemo_ment << o->imemo_shift));
	put64(at + o->me_owner, klass);
	return at;
}

/* A class (or module: type) named name, in the layout's way: 3.3's
 * classpath field; 3.1's __classpath__ ivar in an st_table whose keys are
 * IDs, named through a fake ruby_global_symbols (ids, at symbols). */
#define SYMS (BASE + 0x8000)
#define ID_OF(serial) ((uint64_t)(serial) << 4)
static void put_symbols(const struct rb_offsets *o)
{
	/* symbols: last_id, ..., ids (an embedded array of one array) */
	put32(SYMS, 100);
	uint64_t ids = SYMS + 0x100, ary = SYMS + 0x200, elems = SYMS + 0x1000;
	put64(SYMS + 16, ids);
	put64(ids, o->t_array | o->ary_embed);
	put64(ids + o->ary_embed_ary, ary);
	put64(ary, o->t_array);
	put64(ary + o->ary_heap_ptr, elems);
	put_string(o, SYMS + 0x2000, "__classpath__", false);
	put_string(o, SYMS + 0x2400, "__attached__", false);
	put_string(o, SYMS + 0x2800, "@other", false);
	put64(elems + 20 * 2 * 8, SYMS + 0x2000);
	put64(elems + 21 * 2 * 8, SYMS + 0x2400);
	put64(elems + 22 * 2 * 8, SYMS + 0x2800);
}

static void put_class(const struct rb_offsets *o, uint64_t at, uint64_t type, uint64_t named,
		      bool singleton, uint64_t attached)
{
	put64(at, type | (singleton ? o->fl_singleton : 0));
	if (o->class_classpath) {
		put64(at + o->class_classpath, named);
		put64(at + o->class_attached, attached);
		return;
	}
	uint64_t ext = at + 0x100, tbl = at + 0x200, entries = at + 0x300;
	put64(at + o->class_ext, ext);
	put64(ext + o->ext_iv_tbl, tbl);
	put64(tbl + o->st_entries, entries);
	put64(tbl + o->st_entries_start, 0);
	put64(tbl + o->st_entries_bound, 2);
	/* {hash, key, record}: another ivar first */
	put64(entries + 8, ID_OF(22));
	put64(entries + 16, 0x1234);
	put64(entries + 24 + 8, singleton ? ID_OF(21) : ID_OF(20));
	put64(entries + 24 + 16, singleton ? attached : named);
}

static void test_method_owner(void **state)
{
	(void)state;
	const unsigned int minors[] = {1, 3};
	for (size_t v = 0; v < 2; v++) {
		const struct rb_offsets *o = layout(minors[v]);
		struct rb_ids ids = {.symbols = SYMS, .shift = 4, .last_op = 169};
		char buf[64], sep = 0;
		memset(mem, 0, sizeof(mem));
		put_symbols(o);
		uint64_t work = BASE + 0x1000, shapes = BASE + 0x2000, single = BASE + 0x3000;
		put_string(o, BASE + 0x5000, "Work", false);
		put_string(o, BASE + 0x5100, "Shapes", false);
		put_class(o, work, o->t_class, BASE + 0x5000, false, 0);
		put_class(o, shapes, o->t_module, BASE + 0x5100, false, 0);
		put_class(o, single, o->t_class, 0, true, shapes);
		uint64_t me = put_me(o, BASE + 0x6000, work);
		assert_int_equal(
		    rb_method_owner(o, &ids, 0, fake_read, NULL, me, buf, sizeof(buf), &sep), 0);
		assert_string_equal(buf, "Work");
		assert_int_equal(sep, '#');
		me = put_me(o, BASE + 0x6100, single);
		assert_int_equal(
		    rb_method_owner(o, &ids, 0, fake_read, NULL, me, buf, sizeof(buf), &sep), 0);
		assert_string_equal(buf, "Shapes");
		assert_int_equal(sep, '.');
		/* Not a method entry: a cref, a Fixnum, nothing. */
		put64(BASE + 0x6200, o->t_imemo | (1ULL << o->imemo_shift));
		assert_int_equal(rb_method_owner(o, &ids, 0, fake_read, NULL, BASE + 0x6200, buf,
						 sizeof(buf), &sep),
				 -ENOENT);
		assert_int_equal(
		    rb_method_owner(o, &ids, 0, fake_read, NULL, 0x15, buf, sizeof(buf), &sep),
		    -EPROTO);
		/* An owner that is no class; a singleton of a plain object. */
		me = put_me(o, BASE + 0x6300, BASE + 0x5000);
		assert_int_equal(
		    rb_method_owner(o, &ids, 0, fake_read, NULL, me, buf, sizeof(buf), &sep),
		    -EPROTO);
		put64(BASE + 0x7000, 1); /* T_OBJECT */
		put_class(o, single, o->t_class, 0, true, BASE + 0x7000);
		me = put_me(o, BASE + 0x6400, single);
		assert_int_equal(
		    rb_method_owner(o, &ids, 0, fake_read, NULL, me, buf, sizeof(buf), &sep),
		    -ENOENT);
		if (o->class_classpath)
			continue;
		/* 3.1: an ivar table too long to be a class's is refused. */
		put64(work + 0x200 + o->st_entries_bound, 100000);
		me = put_me(o, BASE + 0x6500, work);
		assert_int_equal(
		    rb_method_owner(o, &ids, 0, fake_read, NULL, me, buf, sizeof(buf), &sep),
		    -EPROTO);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_succ_rank),
	    cmocka_unit_test(test_strings),
	    cmocka_unit_test(test_walk),
	    cmocka_unit_test(test_method_owner),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
