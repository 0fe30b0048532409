/* test_rbectls.c - unit tests for where a Ruby library keeps each
 * thread's execution context (src/ruby/ectls.c): found in Debian's libruby
 * 3.1 by its readers' code and by its symbol, which agree; the new
 * relocation lookup and TLS segment of elfsym; and the walk from a thread
 * pointer to the variable's slot through a fake process's memory, with
 * every value a hostile process could set wrong. tests/functional/
 * test_ruby.py checks both against live processes, stripped 3.3 too. */
#include <elf.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "need_file.h"

#include "proc/elfsym.h"
#include "ruby/ectls.h"

#define LIBRUBY31 "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1.2"

/* bookworm's 3.1 exports ruby_current_ec (offset 8 of a 16-byte block):
 * the four readers' code reaches the same GOT entry, whose relocations are
 * the symbol's module and offset, and rb_thread_current reads the thread
 * and its Thread object at 48 and 16. */
static void test_debian_ruby_3_1(void **state)
{
	(void)state;
	need_file(LIBRUBY31);
	struct elf_file *ef;
	struct rb_ectls t;
	char err[256];
	assert_int_equal(elf_file_open(LIBRUBY31, &ef), 0);
	assert_int_equal(rb_ectls_find(ef, &t, err, sizeof(err)), 0);
	assert_int_equal(t.model, RB_TLS_GD);
	assert_int_equal(t.agreed, 4);
	assert_int_equal(t.by_symbol, 1);
	assert_int_equal(t.tls_size, 16);
	assert_int_equal(t.ec_thread, 48);
	assert_int_equal(t.thread_self, 16);
	uint64_t sym;
	assert_int_equal(elf_file_symbol(ef, "ruby_current_ec", &sym, NULL), 0);
	assert_int_equal(t.dtpoff, sym);
	struct elf_reloc r;
	assert_int_equal(elf_file_dynreloc(ef, t.got, &r), 0);
	assert_int_equal(r.type, R_X86_64_DTPMOD64);
	assert_int_equal(elf_file_dynreloc(ef, t.got + 8, &r), 0);
	assert_int_equal(r.type, R_X86_64_DTPOFF64);
	assert_int_equal(r.symval + (uint64_t)r.addend, t.dtpoff);
	assert_int_equal(elf_file_dynreloc(ef, t.got + 1, &r), -ENOENT);
	elf_file_close(ef);
}

/* A library with TLS but none of Ruby's readers: said, not guessed. */
static void test_not_ruby(void **state)
{
	(void)state;
	struct elf_file *ef;
	struct rb_ectls t;
	char err[256];
	uint64_t size, align;
	assert_int_equal(elf_file_open("/usr/lib/x86_64-linux-gnu/libc.so.6", &ef), 0);
	assert_int_equal(elf_file_tls(ef, &size, &align), 0);
	assert_true(size > 0);
	assert_int_equal(rb_ectls_find(ef, &t, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "none of its exported functions"));
	elf_file_close(ef);
}

/* A fake process: a few 8-byte words at addresses. */
struct word {
	uint64_t addr, val;
};
static struct word mem[8];
static size_t nmem;

static int fake_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	for (size_t i = 0; i < nmem; i++)
		if (mem[i].addr == addr && len == 8) {
			memcpy(buf, &mem[i].val, 8);
			return 0;
		}
	return -EFAULT;
}

static void set_word(uint64_t addr, uint64_t val)
{
	for (size_t i = 0; i < nmem; i++)
		if (mem[i].addr == addr) {
			mem[i].val = val;
			return;
		}
	mem[nmem++] = (struct word){addr, val};
}

/* The module id in the GOT (written by the dynamic linker), the thread's
 * DTV from its control block, the module's block from the DTV, plus the
 * offset: the slot. Each value out of bounds is refused. */
static void test_slot(void **state)
{
	(void)state;
	const struct rb_ectls t = {.model = RB_TLS_GD, .got = 0x3000, .dtpoff = 16, .tls_size = 24};
	const uint64_t bias = 0x7f0000000000, fs = 0x7f1000000740, dtv = 0x55000000100;
	uint64_t slot = 0;
	nmem = 0;
	set_word(bias + 0x3000, 2);		    /* module id */
	set_word(fs + RB_TCB_DTV, dtv);		    /* the thread's DTV */
	set_word(dtv - RB_DTV_ENTRY, 3);	    /* its length */
	set_word(dtv + 2 * RB_DTV_ENTRY, 0x7f1000); /* module 2's block */
	assert_int_equal(rb_ectls_slot(&t, bias, fs, fake_read, NULL, &slot), 0);
	assert_int_equal(slot, 0x7f1000 + 16);
	set_word(dtv + 2 * RB_DTV_ENTRY, UINT64_MAX); /* not allocated */
	assert_int_equal(rb_ectls_slot(&t, bias, fs, fake_read, NULL, &slot), -EPROTO);
	set_word(dtv + 2 * RB_DTV_ENTRY, 0);
	assert_int_equal(rb_ectls_slot(&t, bias, fs, fake_read, NULL, &slot), -EPROTO);
	set_word(bias + 0x3000, 4); /* past the DTV's length */
	assert_int_equal(rb_ectls_slot(&t, bias, fs, fake_read, NULL, &slot), -EPROTO);
	set_word(bias + 0x3000, 0); /* no module */
	assert_int_equal(rb_ectls_slot(&t, bias, fs, fake_read, NULL, &slot), -EPROTO);
	set_word(bias + 0x3000, 1ULL << 40);
	assert_int_equal(rb_ectls_slot(&t, bias, fs, fake_read, NULL, &slot), -EPROTO);
	/* Memory that cannot be read: its error. */
	assert_int_equal(rb_ectls_slot(&t, bias, fs + 0x1000, fake_read, NULL, &slot), -EFAULT);
	const struct rb_ectls none = {0};
	assert_int_equal(rb_ectls_slot(&none, bias, fs, fake_read, NULL, &slot), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_debian_ruby_3_1),
	    cmocka_unit_test(test_not_ruby),
	    cmocka_unit_test(test_slot),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
