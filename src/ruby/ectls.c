/* ectls.c - where a Ruby library keeps ruby_current_ec (ectls.h). */
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

/* The GOT entry that the general-dynamic sequence in fn's first bytes
 * passes to __tls_get_addr, and where the code after the call begins.
 * Returns 0, or -ENOENT. */
static int find_gd(struct elf_file *ef, uint64_t fn, uint64_t *got, uint8_t *after, size_t *nafter)
{
	uint8_t code[PROBE_BYTES];
	size_t len = sizeof(code);
	/* The function may end before PROBE_BYTES and its section with it. */
	while (len >= 16 && elf_file_read(ef, fn, code, len))
		len /= 2;
	if (len < 16)
		return -ENOENT;
	for (size_t i = 0; i + 16 <= len; i++) {
		if (memcmp(code + i, gd_lea, sizeof(gd_lea)) ||
		    memcmp(code + i + 8, gd_call, sizeof(gd_call)))
			continue;
		*got = fn + i + 8 + (uint64_t)(int64_t)rel32(code + i + 4);
		*nafter = len - (i + 16);
		memcpy(after, code + i + 16, *nafter);
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

/* rb_thread_current's body after the call: the EC loaded from its slot,
 * then ec->thread_ptr, then thread->self (mov (%rax),%rax; mov d8(%rax),%rax
 * twice). */
static void thread_loads(const uint8_t *p, size_t n, struct rb_ectls *out)
{
	static const uint8_t load_ec[] = {0x48, 0x8b, 0x00};
	static const uint8_t load_d8[] = {0x48, 0x8b, 0x40};
	if (n < 11 || memcmp(p, load_ec, 3) || memcmp(p + 3, load_d8, 3) ||
	    memcmp(p + 7, load_d8, 3))
		return;
	out->ec_thread = p[6];
	out->thread_self = p[10];
}

int rb_ectls_find(struct elf_file *ef, struct rb_ectls *out, char *err, size_t errlen)
{
	static const char *const probes[] = {RB_ECTLS_PROBES};
	uint64_t align, sym;
	memset(out, 0, sizeof(*out));
	if (elf_file_tls(ef, &out->tls_size, &align)) {
		snprintf(err, errlen, "it has no thread-local storage (PT_TLS)");
		return -ENOENT;
	}
	const char *first = NULL;
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		uint64_t fn, got, off;
		uint8_t after[PROBE_BYTES];
		size_t nafter;
		if (elf_file_symbol(ef, probes[i], &fn, NULL) ||
		    find_gd(ef, fn, &got, after, &nafter) || gd_offset(ef, got, &off))
			continue;
		if (off >= out->tls_size || out->tls_size - off < 8 || (off & 7)) {
			snprintf(err, errlen,
				 "%s reads offset %llu of a TLS block of %llu bytes: not a pointer "
				 "there",
				 probes[i], (unsigned long long)off,
				 (unsigned long long)out->tls_size);
			return -EPROTO;
		}
		if (!first) {
			first = probes[i];
			out->model = RB_TLS_GD;
			out->got = got;
			out->dtpoff = off;
		} else if (got != out->got || off != out->dtpoff) {
			snprintf(
			    err, errlen,
			    "%s and %s read different thread-local variables (GOT 0x%llx+%llu, "
			    "0x%llx+%llu)",
			    first, probes[i], (unsigned long long)out->got,
			    (unsigned long long)out->dtpoff, (unsigned long long)got,
			    (unsigned long long)off);
			return -EPROTO;
		}
		out->agreed++;
		if (!strcmp(probes[i], "rb_thread_current"))
			thread_loads(after, nafter, out);
	}
	if (out->agreed < 2) {
		snprintf(err, errlen,
			 "%s of its exported functions that read the execution context do so as "
			 "expected (a general-dynamic TLS access): 2 must",
			 out->agreed ? "only 1" : "none");
		return -ENOENT;
	}
	if (!elf_file_symbol(ef, "ruby_current_ec", &sym, NULL)) {
		if (sym != out->dtpoff) {
			snprintf(err, errlen,
				 "ruby_current_ec is at offset %llu of the TLS block, but its "
				 "readers read offset %llu",
				 (unsigned long long)sym, (unsigned long long)out->dtpoff);
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
	if (t->model != RB_TLS_GD)
		return -EPROTO;
	if ((ret = mem_read_u64_with(rd, ctx, bias + t->got, &modid)) ||
	    (ret = mem_read_u64_with(rd, ctx, fsbase + RB_TCB_DTV, &dtv)))
		return ret;
	if (!modid || modid > MAX_MODULE_ID || dtv < RB_DTV_ENTRY)
		return -EPROTO;
	/* The entry before the generation counter holds how many entries
	 * follow it. */
	if ((ret = mem_read_u64_with(rd, ctx, dtv - RB_DTV_ENTRY, &len)))
		return ret;
	if (modid > len)
		return -EPROTO;
	if ((ret = mem_read_u64_with(rd, ctx, dtv + modid * RB_DTV_ENTRY, &block)))
		return ret;
	/* NULL or glibc's TLS_DTV_UNALLOCATED: the block is not there (a
	 * library loaded with dlopen, before the thread touched it). */
	if (!block || block == UINT64_MAX)
		return -EPROTO;
	*slot = block + t->dtpoff;
	return 0;
}
