/* rbframes.h - a Ruby thread's frames read from its execution context, and
 * each frame named (doc/design/ruby.md, "The frames"): the walk of
 * rb_profile_frames() (vm_backtrace.c), from another process's memory,
 * every read bounded. User space: `taipan-rbec --frames` today; the
 * naming of what the BPF walker will collect.
 */
#ifndef TAIPAN_RUBY_RBFRAMES_H
#define TAIPAN_RUBY_RBFRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "proc/memread.h"
#include "ruby/rboffsets.h"

/* One control frame, innermost first. */
struct rb_frame {
	uint64_t iseq; /* a Ruby frame's instruction sequence; 0 for a C function's frame */
	uint64_t pc;   /* its program counter */
	uint64_t me;   /* a C function's method entry (ep[-2]) */
};

/* What no real thread has more of: a longer walk is a loop or a lie. */
#define RB_MAX_CFPS 100000

/* The frames of EC ec, innermost first, into out[0..max), as
 * rb_profile_frames() takes them: Ruby frames that have a pc, and C
 * functions' frames. Returns 0 with *n (the stack may hold more than max:
 * *n == max then), or a negative errno (-EFAULT: memory not readable;
 * -EPROTO: an EC whose stack bounds cannot be right). */
int rb_walk(const struct rb_offsets *o, mem_reader rd, void *ctx, uint64_t ec, struct rb_frame *out,
	    size_t max, size_t *n);

/* A Ruby frame's names: its label ("block in work", "<main>"), its path,
 * its line at pc (as calc_lineno() gives it: the instruction before pc, in
 * the instruction table through its succinct bit vector). Strings are
 * truncated to the buffers, always terminated. Returns 0, or a negative
 * errno. */
int rb_frame_name(const struct rb_offsets *o, mem_reader rd, void *ctx, uint64_t iseq, uint64_t pc,
		  char *label, size_t llen, char *path, size_t plen, int *line);

/* The first line of the code of instruction sequence iseq (its method's
 * or block's), 0 when unknown. */
int rb_iseq_first_line(const struct rb_offsets *o, mem_reader rd, void *ctx, uint64_t iseq);

/* A Ruby string object's bytes, truncated to len - 1, terminated. */
int rb_read_string(const struct rb_offsets *o, mem_reader rd, void *ctx, uint64_t str, char *buf,
		   size_t len);

/* How many of an instruction table's positions are at or before x, from
 * its succinct bit vector at table (iseq.c, succ_index_lookup): the
 * 1-based index of the entry that covers instruction x. */
int rb_succ_rank(mem_reader rd, void *ctx, uint64_t table, uint32_t x, uint32_t *rank);

#endif /* TAIPAN_RUBY_RBFRAMES_H */
