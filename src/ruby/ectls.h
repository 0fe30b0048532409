/* ectls.h - where a Ruby library, or a ruby executable linked statically,
 * keeps each thread's execution context (ruby_current_ec, a thread-local
 * variable), found with or without its symbol (doc/design/ruby.md, "The
 * execution context").
 *
 * Ruby 3.3 made ruby_current_ec hidden: Debian's stripped libruby-3.3 names
 * neither it nor any other way to it. Its exported functions that read
 * GET_EC() still reach it, each through the same general-dynamic TLS
 * sequence; that sequence's GOT entry carries the variable's module
 * relocation (R_X86_64_DTPMOD64) and, in the next word, its offset in the
 * module's TLS block. Where the symbol is exported (3.1), the two must
 * agree.
 *
 * A ruby executable built with --disable-shared holds the variable in its
 * own TLS block, which glibc places right below each thread's pointer
 * (x86-64's TLS variant II): the same functions read it at a constant
 * negative offset from %fs (the local-exec model), which the linker wrote
 * into their code.
 *
 * musl (Alpine) has the same x86-64 TLS ABI, and its libruby the same
 * general-dynamic sequence; only the thread's vector of blocks (DTV) is
 * laid out otherwise (abi.h, enum tp_rb_libc), which the file does not
 * say: the process does, by the C library it maps (rbproc.c).
 */
#ifndef TAIPAN_RUBY_ECTLS_H
#define TAIPAN_RUBY_ECTLS_H

#include <stddef.h>
#include <stdint.h>

#include "proc/elfsym.h"
#include "proc/memread.h"
#include "ruby/abi.h"

/* How the code reaches the variable. */
enum rb_tls_model {
	RB_TLS_GD = 1, /* general dynamic: __tls_get_addr(GOT entry {module, offset}) */
	RB_TLS_LE = 2, /* local exec: %fs:-tpoff, in the executable's own block */
};

/* Whose DTV the general-dynamic access goes through (abi.h's enum
 * tp_rb_libc, whose values these are). */
enum rb_libc {
	RB_LIBC_GLIBC = TP_RB_LIBC_GLIBC,
	RB_LIBC_MUSL = TP_RB_LIBC_MUSL,
};

/* The exported functions read for the sequence, in order; two at least
 * must reach the same variable. */
#define RB_ECTLS_PROBES "rb_errinfo", "rb_thread_current", "rb_set_errinfo", "rb_backref_get"

struct rb_ectls {
	enum rb_tls_model model;
	/* GD: the link-time address of the GOT entry (the module id at run
	 * time) and the variable's offset in the module's TLS block. LE: got
	 * 0, and dtpoff how far below the thread pointer the variable is
	 * (its tpoff, negated). */
	uint64_t got;
	uint64_t dtpoff;
	uint64_t tls_size;   /* the block's size (PT_TLS) */
	uint64_t tls_align;  /* and its alignment */
	unsigned int agreed; /* how many probes reached it */
	int by_symbol;	     /* 1: ruby_current_ec is exported and agrees */
	/* What rb_thread_current's code reads after the EC: the offset of
	 * ec->thread_ptr and of thread->self (the Thread object); 0 when its
	 * code is not the expected two loads. */
	uint32_t ec_thread, thread_self;
	/* The C library of the process: rb_ectls_find() leaves glibc's, the
	 * caller that knows the process says (rbproc.c). */
	enum rb_libc libc;
};

/* Finds ruby_current_ec in the Ruby library or static ruby executable ef.
 * Returns 0 with *out, or a negative errno with a sentence in err: -ENOENT
 * (not Ruby's, or no probe reads the variable as expected), -EPROTO
 * (probes or symbol disagree, or the variable is not in the TLS block). */
int rb_ectls_find(struct elf_file *ef, struct rb_ectls *out, char *err, size_t errlen);

/* The local-exec read of the variable in a function's first bytes (code,
 * len): how far below the thread pointer it is, in *tpoff, and where the
 * code after the EC's load begins, in *after. Returns 0, or -ENOENT.
 * rb_ectls_find() uses it; tests give it code. */
int rb_ectls_le(const uint8_t *code, size_t len, uint64_t *tpoff, size_t *after);

/* The thread control block (x86-64), glibc's and musl's: the dynamic
 * thread vector's address is its second word. glibc's DTV entries are 16
 * bytes, module m's block at entry m, their count in entry -1; musl's are 8
 * bytes, module m's block at entry m, their count in entry 0. */
#define RB_TCB_DTV 8
#define RB_DTV_ENTRY 16
#define RB_MUSL_DTV_ENTRY 8

/* The address of the thread's ruby_current_ec slot, for a library loaded
 * with bias whose variable is t, in the thread whose thread pointer (fs
 * base) is fsbase, read through rd (local exec: fsbase - dtpoff, nothing
 * read; general dynamic: through t->libc's DTV). Returns 0 with *slot, or a negative errno (-EFAULT
 * for memory that cannot be read, -EPROTO for a module id or block that cannot be right). */
int rb_ectls_slot(const struct rb_ectls *t, uint64_t bias, uint64_t fsbase, mem_reader rd,
		  void *ctx, uint64_t *slot);

#endif /* TAIPAN_RUBY_ECTLS_H */
