/* rbids.h - the names of Ruby's IDs (method names), read from the VM's
 * symbol table, ruby_global_symbols, which no Debian libruby exports: it
 * is found through the code of rb_id2str, which is exported
 * (doc/design/ruby.md, "C functions' names").
 */
#ifndef TAIPAN_RUBY_RBIDS_H
#define TAIPAN_RUBY_RBIDS_H

#include <stddef.h>
#include <stdint.h>

#include "proc/elfsym.h"
#include "proc/memread.h"
#include "ruby/rboffsets.h"

struct rb_ids {
	uint64_t symbols; /* link-time address of ruby_global_symbols */
	uint32_t shift;	  /* an ID's serial is id >> shift (RUBY_ID_SCOPE_SHIFT) ... */
	uint64_t last_op; /* ... unless id <= last_op (tLAST_OP_ID): the serial is the id */
};

/* Finds ruby_global_symbols in libruby ef: rb_id2str computes the serial
 * (shr, cmp $last_op) and jumps to the lookup, which compares the serial
 * with symbols.last_id and loads symbols.ids, 16 bytes on, both
 * RIP-relative. 0 with *out, or -ENOENT. */
int rb_ids_find(struct elf_file *ef, struct rb_ids *out);

/* The name of id, as rb_id2str gives it, into buf (truncated,
 * terminated), in a process whose libruby is loaded with bias. 0, or a
 * negative errno (-ENOENT: no such id). */
int rb_id_name(const struct rb_offsets *o, const struct rb_ids *t, uint64_t bias, mem_reader rd,
	       void *ctx, uint64_t id, char *buf, size_t len);

/* The name of a C function's method, from its method entry me
 * (def->original_id). */
int rb_cfunc_name(const struct rb_offsets *o, const struct rb_ids *t, uint64_t bias, mem_reader rd,
		  void *ctx, uint64_t me, char *buf, size_t len);

/* Where a method is defined, as Ruby 3.4's labels say it: for method
 * entry me (an imemo_ment; anything else is -ENOENT), its owner's class
 * path into buf ("Foo::Bar") and *sep '#'; or, for a singleton class's
 * method (a module function, `def self.x`), the path of the class or
 * module it is attached to and '.'. 0, or a negative errno. */
int rb_method_owner(const struct rb_offsets *o, const struct rb_ids *t, uint64_t bias,
		    mem_reader rd, void *ctx, uint64_t me, char *buf, size_t len, char *sep);

#endif /* TAIPAN_RUBY_RBIDS_H */
