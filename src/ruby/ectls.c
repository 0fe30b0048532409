/* ectls.c - where a Ruby library or static executable keeps
 * ruby_current_ec (ectls.h). */
#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ruby/ectls.h"

/* How far into a probe the sequence may start: after endbr64, a stack
 * adjustment, a push and a compare-and-branch (rb_set_errinfo's check of
 * its argument). */
#define PROBE_BYTES 64
/* What no process has more of. */
#define MAX_MODULE_ID 65536

static const uint8_t gd_lea[] = {0x66, 0x48, 0x8d, 0x3d};  /* data16 lea rel32(%rip),%rdi */
static const uint8_t gd_call[] = {0x66, 0x66, 0x48, 0xe8}; /* data16 data16 rex.W call rel32 */

static int32_t rel32(const uint8_t *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* fn's first bytes, up to PROBE_BYTES: the function may end before them
 * and its section with it. Returns how many, 0 when it cannot be read. */
static size_t probe_code(struct elf_file *ef, uint64_t fn, uint8_t *code)
{
	size_t len = PROBE_BYTES;
	while (len >= 16 && elf_file_read(ef, fn, code, len))
		len /= 2;
	return len < 16 ? 0 : len;
}

/* The GOT entry that the general-dynamic sequence in fn's first bytes
 * (code, len) passes to __tls_get_addr, and where the code after the call
 * begins. Returns 0, or -ENOENT. */
static int find_gd(uint64_t fn, const uint8_t *code, size_t len, uint64_t *got, size_t *after)
{
	for (size_t i = 0; i + 16 <= len; i++) {
		if (memcmp(code + i, gd_lea, sizeof(gd_lea)) ||
		    memcmp(code + i + 8, gd_call, sizeof(gd_call)))
			continue;
		*got = fn + i + 8 + (uint64_t)(int64_t)rel32(code + i + 4);
		*after = i + 16;
		return 0;
	}
	return -ENOENT;
}

/* The variable's offset in its module's block, from the GOT entry got of a
 * general-dynamic access: its first word takes the module id
 * (R_X86_64_DTPMOD64), the second the offset, by R_X86_64_DTPOFF64 of an
 * exported symbol, or written by the linker for a hidden one. */
static int gd_offset(struct elf_file *ef, uint64_t got, uint64_t *off)
{
	struct elf_reloc r;
	if (elf_file_dynreloc(ef, got, &r) || r.type != R_X86_64_DTPMOD64)
		return -ENOENT;
	if (!elf_file_dynreloc(ef, got + 8, &r)) {
		if (r.type != R_X86_64_DTPOFF64)
			return -ENOENT;
		*off = r.symval + (uint64_t)r.addend;
		return 0;
	}
	return elf_file_read(ef, got + 8, off, sizeof(*off)) ? -ENOENT : 0;
}

/* A 64-bit register's number (0-15) from its REX prefix's bit (B or R) and
 * a ModRM field; -1 when the prefix is no REX.W. */
static int reg64(uint8_t rex, uint8_t bit, uint8_t field)
{
	if ((rex & 0xf8) != 0x48)
		return -1;
	return (rex & bit ? 8 : 0) | (field & 7);
}

/* rb_ectls_le (ectls.h). Three forms, as compilers and the linker write
 * them, for any 64-bit registers r, s:
 *   mov %fs:-X,r              64 REX.W 8b ModRM(00 r 100) SIB(25) disp32
 *   mov %fs:0,r               the same with disp32 0, then within a few
 *   mov -X(r),s | lea -X(r),s   instructions REX.W 8b|8d ModRM(01|10 s r) disp
 *   mov $-X,r                 REX.W c7 ModRM(11 000 r) imm32 (initial exec,
 *   mov %fs:(r),s               relaxed by the linker), then 64 REX.W 8b ModRM(00 s r)
 */
int rb_ectls_le(const uint8_t *code, size_t len, uint64_t *tpoff, size_t *after)
{
	for (size_t i = 0; i + 9 <= len; i++) {
		int32_t d;
		if (code[i] == 0x64 && reg64(code[i + 1], 4, code[i + 3] >> 3) >= 0 &&
		    code[i + 2] == 0x8b && (code[i + 3] & 0xc7) == 0x04 && code[i + 4] == 0x25) {
			d = rel32(code + i + 5);
			if (d < 0) {
				*tpoff = (uint64_t)(-(int64_t)d);
				*after = i + 9;
				return 0;
			}
			if (d)
				continue;
			int r = reg64(code[i + 1], 4, code[i + 3] >> 3);
			/* Where r, the thread pointer, is read at -X. */
			for (size_t j = i + 9; j + 4 <= len && j < i + 9 + 24; j++) {
				uint8_t m = code[j + 2];
				if ((code[j + 1] != 0x8b && code[j + 1] != 0x8d) || (m & 7) == 4 ||
				    reg64(code[j], 1, m) != r)
					continue;
				if ((m >> 6) == 1) {
					d = (int8_t)code[j + 3];
					*after = j + 4;
				} else if ((m >> 6) == 2 && j + 7 <= len) {
					d = rel32(code + j + 3);
					*after = j + 7;
				} else {
					continue;
				}
				if (d >= 0)
					continue;
				*tpoff = (uint64_t)(-(int64_t)d);
				/* lea: the EC's load follows, mov (s),... */
				if (code[j + 1] == 0x8d && *after + 3 <= len &&
				    code[*after + 1] == 0x8b && !(code[*after + 2] >> 6))
					*after += 3;
				return 0;
			}
			return -ENOENT;
		}
		int r = reg64(code[i], 1, code[i + 2]);
		if (r >= 0 && code[i + 1] == 0xc7 && (code[i + 2] & 0xf8) == 0xc0 &&
		    i + 11 <= len) {
			d = rel32(code + i + 3);
			const uint8_t *n = code + i + 7;
			if (d < 0 && n[0] == 0x64 && n[2] == 0x8b && !(n[3] >> 6) &&
			    (n[3] & 7) != 4 && (n[3] & 7) != 5 && reg64(n[1], 1, n[3]) == r) {
				*tpoff = (uint64_t)(-(int64_t)d);
				*after = i + 11;
				return 0;
			}
		}
	}
	return -ENOENT;
}

/* rb_thread_current's body after its TLS access: the EC loaded from its
 * slot (after __tls_get_addr's call, mov (%rax),%rax; a local-exec access
 * has loaded it already), then ec->thread_ptr, then thread->self (mov
 * d8(%rax),%rax twice). A build that keeps frame pointers (Alpine's)
 * restores %rbp first (pop %rbp). */
static void thread_loads(const uint8_t *p, size_t n, bool ec_loaded, struct rb_ectls *out)
{
	static const uint8_t load_ec[] = {0x48, 0x8b, 0x00};
	static const uint8_t load_d8[] = {0x48, 0x8b, 0x40};
	if (n && p[0] == 0x5d) {
		p++;
		n--;
	}
	if (!ec_loaded) {
		if (n < 3 || memcmp(p, load_ec, 3))
			return;
		p += 3;
		n -= 3;
	}
	if (n < 8 || memcmp(p, load_d8, 3) || memcmp(p + 4, load_d8, 3))
		return;
	out->ec_thread = p[3];
	out->thread_self = p[7];
}

/* The variable's offset in the block of a local-exec access that reads
 * it tpoff below the thread pointer: the executable's block ends at the
 * thread pointer, its size rounded up to its alignment. */
static uint64_t le_offset(uint64_t tpoff, uint64_t size, uint64_t align)
{
	uint64_t top = align > 1 ? (size + align - 1) / align * align : size;
	return top - tpoff;
}

int rb_ectls_find(struct elf_file *ef, struct rb_ectls *out, char *err, size_t errlen)
{
	static const char *const probes[] = {RB_ECTLS_PROBES};
	uint64_t sym;
	memset(out, 0, sizeof(*out));
	if (elf_file_tls(ef, &out->tls_size, &out->tls_align)) {
		snprintf(err, errlen, "it has no thread-local storage (PT_TLS)");
		return -ENOENT;
	}
	const char *first = NULL;
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		uint64_t fn, got = 0, off, at;
		uint8_t code[PROBE_BYTES];
		size_t len, after;
		enum rb_tls_model model = RB_TLS_GD;
		if (elf_file_symbol(ef, probes[i], &fn, NULL) || !(len = probe_code(ef, fn, code)))
			continue;
		if (!find_gd(fn, code, len, &got, &after)) {
			if (gd_offset(ef, got, &off))
				continue;
			at = off;
		} else if (!rb_ectls_le(code, len, &off, &after)) {
			model = RB_TLS_LE;
			at = le_offset(off, out->tls_size, out->tls_align);
		} else {
			continue;
		}
		if (at >= out->tls_size || out->tls_size - at < 8 || (at & 7)) {
			snprintf(err, errlen,
				 "%s reads offset %lld of a TLS block of %llu bytes: not a pointer "
				 "there",
				 probes[i], (long long)at, (unsigned long long)out->tls_size);
			return -EPROTO;
		}
		if (!first) {
			first = probes[i];
			out->model = model;
			out->got = got;
			out->dtpoff = off;
		} else if (model != out->model || got != out->got || off != out->dtpoff) {
			snprintf(err, errlen,
				 "%s and %s read different thread-local variables (%s 0x%llx+%llu, "
				 "%s 0x%llx+%llu)",
				 first, probes[i], out->model == RB_TLS_LE ? "%fs" : "GOT",
				 (unsigned long long)out->got, (unsigned long long)out->dtpoff,
				 model == RB_TLS_LE ? "%fs" : "GOT", (unsigned long long)got,
				 (unsigned long long)off);
			return -EPROTO;
		}
		out->agreed++;
		if (!strcmp(probes[i], "rb_thread_current"))
			thread_loads(code + after, len - after, model == RB_TLS_LE, out);
	}
	if (out->agreed < 2) {
		snprintf(err, errlen,
			 "%s of its exported functions that read the execution context do so as "
			 "expected (a general-dynamic or local-exec TLS access): 2 must",
			 out->agreed ? "only 1" : "none");
		return -ENOENT;
	}
	if (!elf_file_symbol(ef, "ruby_current_ec", &sym, NULL)) {
		uint64_t at = out->model == RB_TLS_LE
				  ? le_offset(out->dtpoff, out->tls_size, out->tls_align)
				  : out->dtpoff;
		if (sym != at) {
			snprintf(err, errlen,
				 "ruby_current_ec is at offset %llu of the TLS block, but its "
				 "readers read offset %llu",
				 (unsigned long long)sym, (unsigned long long)at);
			return -EPROTO;
		}
		out->by_symbol = 1;
	}
	return 0;
}

int rb_ectls_slot(const struct rb_ectls *t, uint64_t bias, uint64_t fsbase, mem_reader rd,
		  void *ctx, uint64_t *slot)
{
	uint64_t modid, dtv, len, block;
	int ret;
	if (t->model == RB_TLS_LE) {
		/* The executable's block, right below the thread pointer. */
		if (t->dtpoff < 8 || t->dtpoff > le_offset(0, t->tls_size, t->tls_align) ||
		    fsbase < t->dtpoff)
			return -EPROTO;
		*slot = fsbase - t->dtpoff;
		return 0;
	}
	if (t->model != RB_TLS_GD || (t->libc != RB_LIBC_GLIBC && t->libc != RB_LIBC_MUSL))
		return -EPROTO;
	if ((ret = mem_read_u64_with(rd, ctx, bias + t->got, &modid)) ||
	    (ret = mem_read_u64_with(rd, ctx, fsbase + RB_TCB_DTV, &dtv)))
		return ret;
	if (!modid || modid > MAX_MODULE_ID || dtv < RB_DTV_ENTRY)
		return -EPROTO;
	/* glibc: the entry before the generation counter holds how many
	 * entries follow it. musl: entry 0 holds how many modules there are,
	 * each one's entry the block's address alone. */
	bool musl = t->libc == RB_LIBC_MUSL;
	uint64_t entry = musl ? RB_MUSL_DTV_ENTRY : RB_DTV_ENTRY;
	if ((ret = mem_read_u64_with(rd, ctx, musl ? dtv : dtv - RB_DTV_ENTRY, &len)))
		return ret;
	if (modid > len)
		return -EPROTO;
	if ((ret = mem_read_u64_with(rd, ctx, dtv + modid * entry, &block)))
		return ret;
	/* NULL or glibc's TLS_DTV_UNALLOCATED: the block is not there (a
	 * library loaded with dlopen, before the thread touched it; musl
	 * gives each thread its block as the library is loaded). */
	if (!block || block == UINT64_MAX)
		return -EPROTO;
	*slot = block + t->dtpoff;
	return 0;
}
