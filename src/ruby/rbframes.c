/* rbframes.c - a Ruby thread's frames and their names (rbframes.h). */
#include <errno.h>
#include <string.h>

#include "ruby/rbframes.h"

/* The succinct bit vector of an instruction table (iseq.c, struct
 * succ_index_table, the same from 2.6 to 3.4): positions below
 * IMMEDIATE_TABLE_SIZE are ranked 9 to a word, 7 bits each; the rest in
 * blocks of 512 bits, each {unsigned int rank; uint64_t small_block_ranks;
 * uint64_t bits[8]}. */
#define IMM_SIZE 54
#define IMM_WORDS (IMM_SIZE / 9)
#define BLOCK_BITS 512
#define BLOCK_BYTES 80
#define BLOCK_SMALL 8
#define BLOCK_WORDS 16
/* No instruction sequence is longer. */
#define MAX_ISEQ_SIZE (1u << 26)

static int rd32(mem_reader rd, void *ctx, uint64_t addr, uint32_t *v)
{
	int ret = rd(ctx, addr, v, sizeof(*v));
	return ret < 0 ? ret : 0;
}

int rb_walk(const struct rb_offsets *o, mem_reader rd, void *ctx, uint64_t ec, struct rb_frame *out,
	    size_t max, size_t *n)
{
	uint64_t stack, size, cfp;
	int ret;
	*n = 0;
	if ((ret = mem_read_u64_with(rd, ctx, ec + o->ec_vm_stack, &stack)) ||
	    (ret = mem_read_u64_with(rd, ctx, ec + o->ec_vm_stack_size, &size)) ||
	    (ret = mem_read_u64_with(rd, ctx, ec + o->ec_cfp, &cfp)))
		return ret;
	if (!cfp)
		return 0; /* a thread whose first frame is not pushed yet */
	/* Control frames grow down from the stack's end; the last one there
	 * is a dummy (RUBY_VM_END_CONTROL_FRAME, then one back). */
	if (!stack || size > ((uint64_t)1 << 28) || stack + size * 8 < stack)
		return -EPROTO;
	uint64_t end = stack + size * 8 - o->cfp_size;
	if (cfp < stack || cfp > end || (end - cfp) % o->cfp_size ||
	    (end - cfp) / o->cfp_size > RB_MAX_CFPS)
		return -EPROTO;
	for (; cfp < end && *n < max; cfp += o->cfp_size) {
		uint64_t pc, iseq, ep, flags;
		if ((ret = mem_read_u64_with(rd, ctx, cfp + o->cfp_pc, &pc)) ||
		    (ret = mem_read_u64_with(rd, ctx, cfp + o->cfp_iseq, &iseq)) ||
		    (ret = mem_read_u64_with(rd, ctx, cfp + o->cfp_ep, &ep)) ||
		    (ret = mem_read_u64_with(rd, ctx, ep, &flags)))
			return ret;
		if (!(flags & o->frame_flag_cframe)) {
			if (pc) /* a Ruby frame with a pc */
				out[(*n)++] = (struct rb_frame){.iseq = iseq, .pc = pc};
			continue;
		}
		if ((flags & o->frame_magic_mask) != o->frame_magic_cfunc)
			continue;
		uint64_t me;
		if ((ret = mem_read_u64_with(rd, ctx, ep - 16, &me)))
			return ret;
		out[(*n)++] = (struct rb_frame){.me = me};
	}
	return 0;
}

int rb_read_string(const struct rb_offsets *o, mem_reader rd, void *ctx, uint64_t str, char *buf,
		   size_t len)
{
	uint64_t flags, n, at;
	int ret;
	buf[0] = 0;
	if ((ret = mem_read_u64_with(rd, ctx, str, &flags)))
		return ret;
	if ((flags & o->t_mask) != o->t_string)
		return -EPROTO;
	if (flags & o->str_noembed) {
		if ((ret = mem_read_u64_with(rd, ctx, str + o->str_len, &n)) ||
		    (ret = mem_read_u64_with(rd, ctx, str + o->str_heap_ptr, &at)))
			return ret;
	} else {
		if (o->str_embed_len_mask)
			n = (flags & o->str_embed_len_mask) >> o->str_embed_len_shift;
		else if ((ret = mem_read_u64_with(rd, ctx, str + o->str_embed_len, &n)))
			return ret;
		at = str + o->str_embed_ary;
	}
	if (n > len - 1)
		n = len - 1;
	if (n && (ret = rd(ctx, at, buf, n)) < 0)
		return ret;
	buf[n] = 0;
	return 0;
}

/* A path object: a string, or the array [path, realpath]. */
static int read_path(const struct rb_offsets *o, mem_reader rd, void *ctx, uint64_t pathobj,
		     char *buf, size_t len)
{
	uint64_t flags, first;
	int ret;
	if ((ret = mem_read_u64_with(rd, ctx, pathobj, &flags)))
		return ret;
	if ((flags & o->t_mask) == o->t_array) {
		uint64_t at = pathobj + o->ary_embed_ary;
		if (!(flags & o->ary_embed) &&
		    (ret = mem_read_u64_with(rd, ctx, pathobj + o->ary_heap_ptr, &at)))
			return ret;
		if ((ret = mem_read_u64_with(rd, ctx, at, &first)))
			return ret;
		pathobj = first;
	}
	return rb_read_string(o, rd, ctx, pathobj, buf, len);
}

int rb_succ_rank(mem_reader rd, void *ctx, uint64_t table, uint32_t x, uint32_t *rank)
{
	uint64_t v, small, bits;
	uint32_t block_rank;
	int ret;
	if (x < IMM_SIZE) {
		if ((ret = mem_read_u64_with(rd, ctx, table + (x / 9) * 8, &v)))
			return ret;
		*rank = (uint32_t)(v >> ((x % 9) * 7)) & 0x7f;
		return 0;
	}
	uint32_t bi = (x - IMM_SIZE) / BLOCK_BITS, bit = (x - IMM_SIZE) % BLOCK_BITS;
	uint64_t block = table + IMM_WORDS * 8 + (uint64_t)bi * BLOCK_BYTES;
	uint32_t sb = bit / 64;
	if ((ret = rd32(rd, ctx, block, &block_rank)) ||
	    (ret = mem_read_u64_with(rd, ctx, block + BLOCK_SMALL, &small)) ||
	    (ret = mem_read_u64_with(rd, ctx, block + BLOCK_WORDS + sb * 8, &bits)))
		return ret;
	uint32_t small_rank = sb ? (uint32_t)(small >> ((sb - 1) * 9)) & 0x1ff : 0;
	*rank = block_rank + small_rank + (uint32_t)__builtin_popcountll(bits << (63 - bit % 64));
	return 0;
}

/* The line of the instruction before pc (vm_backtrace.c, calc_pos). */
static int frame_line(const struct rb_offsets *o, mem_reader rd, void *ctx, uint64_t body,
		      uint64_t pc, int *line)
{
	uint64_t encoded, info, table;
	uint32_t size, count;
	int ret;
	if ((ret = mem_read_u64_with(rd, ctx, body + o->body_iseq_encoded, &encoded)) ||
	    (ret = rd32(rd, ctx, body + o->body_iseq_size, &size)) ||
	    (ret = mem_read_u64_with(rd, ctx, body + o->body_insns_info, &info)) ||
	    (ret = rd32(rd, ctx, body + o->body_insns_size, &count)))
		return ret;
	if (pc < encoded || (pc - encoded) % 8 || size > MAX_ISEQ_SIZE ||
	    (pc - encoded) / 8 > size || count > size + 1)
		return -EPROTO;
	uint32_t pos = (uint32_t)((pc - encoded) / 8), index = 1;
	if (pos)
		pos--;
	if (!count) {
		*line = 0;
		return 0;
	}
	if (count > 1) {
		if ((ret = mem_read_u64_with(rd, ctx, body + o->body_succ_table, &table)) ||
		    (ret = rb_succ_rank(rd, ctx, table, pos, &index)))
			return ret;
		if (!index || index > count)
			return -EPROTO;
	}
	uint32_t l;
	if ((ret = rd32(rd, ctx,
			info + (uint64_t)(index - 1) * o->insn_info_size + o->insn_info_line, &l)))
		return ret;
	*line = (int)l;
	return 0;
}

int rb_frame_name(const struct rb_offsets *o, mem_reader rd, void *ctx, uint64_t iseq, uint64_t pc,
		  char *label, size_t llen, char *path, size_t plen, int *line)
{
	uint64_t body, lab, pathobj;
	int ret;
	label[0] = path[0] = 0;
	*line = 0;
	if ((ret = mem_read_u64_with(rd, ctx, iseq + o->iseq_body, &body)) ||
	    (ret = mem_read_u64_with(rd, ctx, body + o->body_label, &lab)) ||
	    (ret = mem_read_u64_with(rd, ctx, body + o->body_path, &pathobj)))
		return ret;
	if ((ret = rb_read_string(o, rd, ctx, lab, label, llen)) ||
	    (ret = read_path(o, rd, ctx, pathobj, path, plen)))
		return ret;
	return frame_line(o, rd, ctx, body, pc, line);
}

int rb_iseq_first_line(const struct rb_offsets *o, mem_reader rd, void *ctx, uint64_t iseq)
{
	uint64_t body, v = 0;
	uint32_t n;
	if (mem_read_u64_with(rd, ctx, iseq + o->iseq_body, &body))
		return 0;
	if (o->first_lineno_value)
		return !mem_read_u64_with(rd, ctx, body + o->body_first_lineno, &v) && (v & 1) &&
			       (v >> 1) < (1u << 30)
			   ? (int)(v >> 1)
			   : 0;
	return !rd32(rd, ctx, body + o->body_first_lineno, &n) && n < (1u << 30) ? (int)n : 0;
}
