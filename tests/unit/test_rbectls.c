/* test_rbectls.c - unit tests for where a Ruby library keeps each
 * thread's execution context (src/ruby/ectls.c): found in Debian's libruby
 * 3.1 by its readers' code and by its symbol, which agree; the new
 * relocation lookup and TLS segment of elfsym; and the walk from a thread
 * pointer to the variable's slot through a fake process's memory, with
 * every value a hostile process could set wrong; and a ruby 3.3 linked
 * statically (make roots builds it), whose readers reach the variable
 * below the thread pointer (local exec), stripped and not; a ruby 3.3
 * built against musl (make roots), whose libruby reads it as glibc's does,
 * through a DTV of musl's layout. tests/functional/test_ruby.py checks
 * them against live processes, stripped 3.3 too. */
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

/* A file of a ruby 3.3 that make roots builds (scripts/make-roots.sh):
 * $TAIPAN_ROOTS/DIR/NAME, with DIR ruby-3.3-static (build_ruby_static) or
 * ruby-3.3-musl (build_ruby_musl). */
static void built_ruby(const char *dir, const char *name, char *path, size_t len)
{
	const char *roots = getenv("TAIPAN_ROOTS");
	snprintf(path, len, "%s/%s/%s", roots ? roots : "/var/cache/taipan-test", dir, name);
	need_file(path);
}

/* Ruby 3.3 built with --disable-shared: the four readers load the EC with
 * the linker's local-exec rewrite of an initial-exec access (mov
 * $-X,%rax; mov %fs:(%rax),%rax), all at the same distance below the
 * thread pointer; rb_thread_current then reads the thread and its Thread
 * object at 48 and 16. Stripped, nothing names the variable (3.3 hides
 * it); with its symbol table, ruby_current_ec's offset in the TLS block is
 * that distance from the block's end, the thread pointer. */
static void test_static_ruby_3_3(void **state)
{
	(void)state;
	char stripped[512], full[512];
	built_ruby("ruby-3.3-static", "ruby-stripped", stripped, sizeof(stripped));
	built_ruby("ruby-3.3-static", "ruby", full, sizeof(full));
	struct elf_file *ef;
	struct rb_ectls t, u;
	char err[256];
	uint64_t sym, size, align;
	assert_int_equal(elf_file_open(stripped, &ef), 0);
	assert_int_equal(rb_ectls_find(ef, &t, err, sizeof(err)), 0);
	assert_int_equal(elf_file_symbol(ef, "ruby_current_ec", &sym, NULL), -ENOENT);
	elf_file_close(ef);
	assert_int_equal(t.model, RB_TLS_LE);
	assert_int_equal(t.got, 0);
	assert_int_equal(t.agreed, 4);
	assert_int_equal(t.by_symbol, 0);
	assert_int_equal(t.ec_thread, 48);
	assert_int_equal(t.thread_self, 16);
	assert_true(t.dtpoff >= 8 && t.dtpoff <= t.tls_size + t.tls_align);
	assert_int_equal(elf_file_open(full, &ef), 0);
	assert_int_equal(rb_ectls_find(ef, &u, err, sizeof(err)), 0);
	assert_int_equal(elf_file_symbol(ef, "ruby_current_ec", &sym, NULL), 0);
	assert_int_equal(elf_file_tls(ef, &size, &align), 0);
	elf_file_close(ef);
	assert_int_equal(u.by_symbol, 1);
	assert_int_equal(u.dtpoff, t.dtpoff);
	assert_int_equal((size + align - 1) / align * align - sym, t.dtpoff);
}

/* musl's libruby 3.3: the four readers make the same general-dynamic call
 * as under glibc (x86-64's TLS ABI is musl's too), rb_thread_current with
 * the frame pointer's pop between the call and the EC's load (Alpine's
 * flags keep frame pointers). Stripped, nothing names the variable; with
 * its symbol table, ruby_current_ec is where the GOT entry's offset says. */
static void test_musl_ruby_3_3(void **state)
{
	(void)state;
	char stripped[512], full[512];
	built_ruby("ruby-3.3-musl", "stripped/libruby.so.3.3", stripped, sizeof(stripped));
	built_ruby("ruby-3.3-musl", "libruby.so.3.3.8", full, sizeof(full));
	struct elf_file *ef;
	struct rb_ectls t, u;
	struct elf_reloc r;
	char err[256];
	uint64_t sym;
	assert_int_equal(elf_file_open(stripped, &ef), 0);
	assert_int_equal(rb_ectls_find(ef, &t, err, sizeof(err)), 0);
	assert_int_equal(elf_file_symbol(ef, "ruby_current_ec", &sym, NULL), -ENOENT);
	assert_int_equal(elf_file_dynreloc(ef, t.got, &r), 0);
	assert_int_equal(r.type, R_X86_64_DTPMOD64);
	elf_file_close(ef);
	assert_int_equal(t.model, RB_TLS_GD);
	assert_int_equal(t.libc, RB_LIBC_GLIBC); /* the file does not say; the process does */
	assert_int_equal(t.agreed, 4);
	assert_int_equal(t.by_symbol, 0);
	assert_int_equal(t.ec_thread, 48);
	assert_int_equal(t.thread_self, 16);
	assert_true(t.dtpoff + 8 <= t.tls_size);
	assert_int_equal(elf_file_open(full, &ef), 0);
	assert_int_equal(rb_ectls_find(ef, &u, err, sizeof(err)), 0);
	assert_int_equal(elf_file_symbol(ef, "ruby_current_ec", &sym, NULL), 0);
	elf_file_close(ef);
	assert_int_equal(u.by_symbol, 1);
	assert_int_equal(u.got, t.got);
	assert_int_equal(u.dtpoff, t.dtpoff);
	assert_int_equal(sym, t.dtpoff);
}

/* The local-exec forms, from their bytes: the static 3.3's two (the
 * linker's rewrite of an initial-exec access, and a direct %fs load into
 * %rcx), the thread pointer loaded then read at -X by mov or lea (disp8 and
 * disp32, r8-r15 too); nothing from a non-negative offset, a register
 * mismatch, a base that needs a SIB byte, or code without %fs. */
static void test_local_exec_forms(void **state)
{
	(void)state;
	static const struct {
		uint8_t code[24];
		size_t len;
		int ret;
		uint64_t tpoff;
		size_t after;
	} cases[] = {
	    /* endbr64; mov $-0x58,%rax; mov %fs:(%rax),%rax; mov 0x30(%rax),%rax */
	    {{0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0xc7, 0xc0, 0xa8, 0xff, 0xff, 0xff, 0x64, 0x48, 0x8b,
	      0x00, 0x48, 0x8b, 0x40, 0x30},
	     19,
	     0,
	     0x58,
	     15},
	    /* endbr64; mov %fs:-0x58,%rcx; mov 0x10(%rcx),%rsi */
	    {{0xf3, 0x0f, 0x1e, 0xfa, 0x64, 0x48, 0x8b, 0x0c, 0x25, 0xa8, 0xff, 0xff, 0xff, 0x48,
	      0x8b, 0x71, 0x10},
	     17,
	     0,
	     0x58,
	     13},
	    /* mov %fs:0,%rax; mov -0x10(%rax),%rax (disp8) */
	    {{0x64, 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0, 0x48, 0x8b, 0x40, 0xf0}, 13, 0, 0x10, 13},
	    /* mov %fs:0,%r9; lea -0x1000(%r9),%rdx; mov (%rdx),%rdx */
	    {{0x64, 0x4c, 0x8b, 0x0c, 0x25, 0, 0, 0, 0, 0x49, 0x8d, 0x91, 0, 0xf0, 0xff, 0xff, 0x48,
	      0x8b, 0x12},
	     19,
	     0,
	     0x1000,
	     19},
	    /* mov %fs:0,%r12; lea -0x1000(%r12),%rdx: r12 as a base takes a
	     * SIB byte, which is not decoded */
	    {{0x64, 0x4c, 0x8b, 0x24, 0x25, 0, 0, 0, 0, 0x49, 0x8d, 0x94, 0x24, 0, 0xf0, 0xff,
	      0xff},
	     17,
	     -ENOENT,
	     0,
	     0},
	    /* mov %fs:0,%rbx; lea -0x1000(%rbx),%rdx; mov (%rdx),%rdx */
	    {{0x64, 0x48, 0x8b, 0x1c, 0x25, 0, 0, 0, 0, 0x48, 0x8d, 0x93, 0, 0xf0, 0xff, 0xff, 0x48,
	      0x8b, 0x12},
	     19,
	     0,
	     0x1000,
	     19},
	    /* mov %fs:0,%rax; mov -0x10(%rcx),%rax: another register */
	    {{0x64, 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0, 0x48, 0x8b, 0x41, 0xf0}, 13, -ENOENT, 0, 0},
	    /* mov %fs:0x28,%rax: the stack protector's canary, above the TP */
	    {{0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0}, 9, -ENOENT, 0, 0},
	    /* mov $0x58,%rax; mov %fs:(%rax),%rax: not below */
	    {{0x48, 0xc7, 0xc0, 0x58, 0, 0, 0, 0x64, 0x48, 0x8b, 0x00}, 11, -ENOENT, 0, 0},
	    /* mov $-0x58,%rax; mov (%rax),%rax: no %fs */
	    {{0x48, 0xc7, 0xc0, 0xa8, 0xff, 0xff, 0xff, 0x90, 0x48, 0x8b, 0x00}, 11, -ENOENT, 0, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t tpoff = 0;
		size_t after = 0;
		assert_int_equal(rb_ectls_le(cases[i].code, cases[i].len, &tpoff, &after),
				 cases[i].ret);
		if (cases[i].ret)
			continue;
		assert_int_equal(tpoff, cases[i].tpoff);
		assert_int_equal(after, cases[i].after);
	}
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

/* musl's DTV: the count of modules in entry 0, module m's block address
 * alone in 8-byte entry m; what glibc's layout would read there is not
 * read. Each value out of bounds is refused. */
static void test_slot_musl(void **state)
{
	(void)state;
	const struct rb_ectls t = {
	    .model = RB_TLS_GD, .got = 0x3000, .dtpoff = 16, .tls_size = 24, .libc = RB_LIBC_MUSL};
	const uint64_t bias = 0x7f0000000000, fs = 0x7f1000000740, dtv = 0x55000000100;
	uint64_t slot = 0;
	nmem = 0;
	set_word(bias + 0x3000, 2);			 /* module id */
	set_word(fs + RB_TCB_DTV, dtv);			 /* struct pthread's dtv */
	set_word(dtv, 2);				 /* two modules */
	set_word(dtv + 2 * RB_MUSL_DTV_ENTRY, 0x7f1000); /* module 2's block */
	set_word(dtv - RB_DTV_ENTRY, 0);		 /* glibc's length: not read */
	set_word(dtv + 2 * RB_DTV_ENTRY, 0x7f2000);	 /* glibc's entry: not read */
	assert_int_equal(rb_ectls_slot(&t, bias, fs, fake_read, NULL, &slot), 0);
	assert_int_equal(slot, 0x7f1000 + 16);
	set_word(dtv, 1); /* module 2 past the count */
	assert_int_equal(rb_ectls_slot(&t, bias, fs, fake_read, NULL, &slot), -EPROTO);
	set_word(dtv, 2);
	set_word(dtv + 2 * RB_MUSL_DTV_ENTRY, 0);
	assert_int_equal(rb_ectls_slot(&t, bias, fs, fake_read, NULL, &slot), -EPROTO);
	struct rb_ectls g = t;
	g.libc = RB_LIBC_GLIBC; /* the same memory as glibc's: its entry 2 */
	assert_int_equal(rb_ectls_slot(&g, bias, fs, fake_read, NULL, &slot), -EPROTO);
	g.libc = 7;
	assert_int_equal(rb_ectls_slot(&g, bias, fs, fake_read, NULL, &slot), -EPROTO);
}

/* Local exec: the slot is dtpoff below the thread pointer, nothing read;
 * an offset of no pointer, or past the rounded-up block, is refused. */
static void test_slot_local_exec(void **state)
{
	(void)state;
	struct rb_ectls t = {.model = RB_TLS_LE, .dtpoff = 0x38, .tls_size = 0x30, .tls_align = 64};
	uint64_t slot = 0;
	nmem = 0;
	assert_int_equal(rb_ectls_slot(&t, 0x5500000000, 0x7f1000000740, fake_read, NULL, &slot),
			 0);
	assert_int_equal(slot, 0x7f1000000740 - 0x38);
	t.dtpoff = 0x48; /* past the block rounded up to 64 */
	assert_int_equal(rb_ectls_slot(&t, 0, 0x7f1000000740, fake_read, NULL, &slot), -EPROTO);
	t.dtpoff = 0;
	assert_int_equal(rb_ectls_slot(&t, 0, 0x7f1000000740, fake_read, NULL, &slot), -EPROTO);
	t.dtpoff = 0x38;
	assert_int_equal(rb_ectls_slot(&t, 0, 0x10, fake_read, NULL, &slot), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_debian_ruby_3_1), cmocka_unit_test(test_static_ruby_3_3),
	    cmocka_unit_test(test_musl_ruby_3_3),   cmocka_unit_test(test_local_exec_forms),
	    cmocka_unit_test(test_not_ruby),	    cmocka_unit_test(test_slot),
	    cmocka_unit_test(test_slot_musl),	    cmocka_unit_test(test_slot_local_exec),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
