/* unwtab.c - native unwind tables from .eh_frame and .debug_frame, through libdw.
 *
 * libdw interprets the CFA programs (dwarf_cfi_addrframe); this file only
 * lists the FDEs (dwarf_next_cfi gives their bytes, and their address range
 * is decoded here from the CIE's 'R' pointer encoding), walks each FDE's
 * range row by row, and turns libdw's rules into struct tp_urow. The files
 * may be hostile: every length comes from libdw or is checked here, every
 * loop advances, and the work of one build is capped (rows, and the bytes of
 * CFA program libdw interprets), so a corrupt file ends in an error or a
 * partial table.
 */
#include "proc/unwtab.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/elfsym.h"
#include "proc/safeopen.h"

/* x86-64 DWARF registers. */
#define REG_RBP 6
#define REG_RSP 7
#define REG_R10 10
#define REG_R11 11
#define REG_R13 13
#define REG_RA 16

/* dwarf_cfi_addrframe interprets the FDE's program from its start on each
 * call, so a row costs about the FDE's bytes, and a corrupt FDE of many tiny
 * rows would make the build quadratic. Real files need 20-30 such bytes per
 * byte of CFI (libpython3.12: 9.3M for 320 KB of .eh_frame); past
 * WORK_BASE + WORK_PER_BYTE per byte, the build stops with a partial table. */
#define WORK_BASE (1ull << 22)
#define WORK_PER_BYTE 256

/* An address range one FDE covers (or the part of a .debug_frame FDE that
 * .eh_frame leaves uncovered). */
struct span {
	uint64_t start, end;
	uint32_t cost; /* bytes of CFA program behind it */
	bool debug;    /* from .debug_frame */
	/* For run_span(), when prog is not NULL: the FDE's program, its
	 * first address, and its CIE's initial program and factors. */
	const uint8_t *prog, *prog_end, *init, *init_end;
	uint64_t loc, caf;
	int64_t daf;
};

struct build {
	Elf *elf;
	const unsigned char *ident;
	uint64_t lo, hi; /* the executable segments' span: FDEs must lie inside */
	struct span *spans;
	size_t nspans, spans_cap;
	struct tp_urow *rows;
	size_t nrows, rows_cap;
	uint64_t work, budget;
	bool ref; /* every row through libdw (unwtab_build_ref) */
	struct unwtab *t;
};

static pthread_once_t libelf_once = PTHREAD_ONCE_INIT;
static bool libelf_ok;

static void libelf_init(void)
{
	libelf_ok = elf_version(EV_CURRENT) != EV_NONE;
}

/* --- FDE address ranges ------------------------------------------------------ */

/* Reads one value of DW_EH_PE format fmt (the low 4 bits) at *p, below end.
 * Returns 0 and advances *p, or -1. */
static int read_value(const uint8_t **p, const uint8_t *end, uint8_t fmt, uint64_t *v)
{
	const uint8_t *q = *p;
	size_t n;

	switch (fmt & 0x0f) {
	case DW_EH_PE_uleb128:
	case DW_EH_PE_sleb128: {
		unsigned int shift = 0;
		uint8_t byte;

		*v = 0;
		do {
			if (q >= end || shift >= 64)
				return -1;
			byte = *q++;
			*v |= (uint64_t)(byte & 0x7f) << shift;
			shift += 7;
		} while (byte & 0x80);
		if ((fmt & 0x0f) == DW_EH_PE_sleb128 && shift < 64 && (byte & 0x40))
			*v |= ~0ull << shift;
		*p = q;
		return 0;
	}
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		n = 8;
		break;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4:
		n = 4;
		break;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2:
		n = 2;
		break;
	default:
		return -1;
	}
	if ((size_t)(end - q) < n)
		return -1;
	*v = 0;
	for (size_t i = 0; i < n; i++) /* little-endian: the file was checked */
		*v |= (uint64_t)q[i] << (8 * i);
	if ((fmt & DW_EH_PE_signed) && n < 8 && (*v >> (8 * n - 1)) & 1)
		*v |= ~0ull << (8 * n);
	*p = q + n;
	return 0;
}

/* The pointer encoding of the CIE's FDEs: absptr unless its 'z'
 * augmentation has an 'R'. Returns 0, or -1 for an augmentation that hides
 * it (unknown letters before the 'R', a non-'z' augmentation). */
static int fde_encoding(const Dwarf_CIE *cie, uint8_t *enc)
{
	const char *a = cie->augmentation;
	const uint8_t *p = cie->augmentation_data;
	const uint8_t *end = p ? p + cie->augmentation_data_size : NULL;
	uint64_t skip;

	*enc = DW_EH_PE_absptr;
	if (!a || a[0] == '\0')
		return 0;
	if (a[0] != 'z' || !p)
		return -1;
	/* libdw checked that the string ends inside the section; 16 letters
	 * is more than any producer writes. */
	for (int i = 1; i < 16 && a[i]; i++) {
		switch (a[i]) {
		case 'R':
			if (p >= end)
				return -1;
			*enc = *p;
			return 0;
		case 'L':
			if (p >= end)
				return -1;
			p++;
			break;
		case 'P':
			if (p >= end)
				return -1;
			p++;
			if (read_value(&p, end, p[-1], &skip))
				return -1;
			break;
		case 'S':
		case 'B':
		case 'G':
			break;
		default:
			return -1;
		}
	}
	return 0; /* no 'R': absptr */
}

/* The highest DWARF register number an FDE may name. x86-64 stops near
 * 130; libdw sizes its register array by the highest number it meets, so a
 * corrupt "DW_CFA_same_value r174063593" would have it allocate and clear
 * gigabytes. */
#define MAX_REG 255

/* Operands of the CFA instructions 0x00-0x2f: R register (ULEB128), U ULEB128,
 * S SLEB128, B a ULEB128 length and that many bytes, A an encoded address,
 * 1/2/4 fixed bytes. NULL: an opcode libdw would refuse on x86-64. */
static const char *const insn_operands[0x30] = {
    [DW_CFA_nop] = "",
    [DW_CFA_set_loc] = "A",
    [DW_CFA_advance_loc1] = "1",
    [DW_CFA_advance_loc2] = "2",
    [DW_CFA_advance_loc4] = "4",
    [DW_CFA_offset_extended] = "RU",
    [DW_CFA_restore_extended] = "R",
    [DW_CFA_undefined] = "R",
    [DW_CFA_same_value] = "R",
    [DW_CFA_register] = "RR",
    [DW_CFA_remember_state] = "",
    [DW_CFA_restore_state] = "",
    [DW_CFA_def_cfa] = "RU",
    [DW_CFA_def_cfa_register] = "R",
    [DW_CFA_def_cfa_offset] = "U",
    [DW_CFA_def_cfa_expression] = "B",
    [DW_CFA_expression] = "RB",
    [DW_CFA_offset_extended_sf] = "RS",
    [DW_CFA_def_cfa_sf] = "RS",
    [DW_CFA_def_cfa_offset_sf] = "S",
    [DW_CFA_val_offset] = "RU",
    [DW_CFA_val_offset_sf] = "RS",
    [DW_CFA_val_expression] = "RB",
    [DW_CFA_GNU_args_size] = "U",
    [DW_CFA_GNU_negative_offset_extended] = "RU",
};

/* Checks, without interpreting them, that the CFA instructions [p, end)
 * are well formed and name no register above MAX_REG. enc encodes
 * DW_CFA_set_loc's operand. Returns 0 or -1. One instruction per turn,
 * each at least one byte: bounded by the bytes. */
static int check_insns(const uint8_t *p, const uint8_t *end, uint8_t enc)
{
	while (p < end) {
		uint8_t op = *p++;
		const char *o;
		uint64_t v;

		switch (op & 0xc0) {
		case DW_CFA_advance_loc:
		case DW_CFA_restore:
			if ((op & 0x3f) > MAX_REG)
				return -1;
			continue;
		case DW_CFA_offset:
			if (read_value(&p, end, DW_EH_PE_uleb128, &v))
				return -1;
			continue;
		}
		if (op >= sizeof(insn_operands) / sizeof(insn_operands[0]) || !insn_operands[op])
			return -1;
		for (o = insn_operands[op]; *o; o++) {
			uint8_t fmt = *o == 'S'	  ? DW_EH_PE_sleb128
				      : *o == '1' ? 0
				      : *o == '2' ? DW_EH_PE_udata2
				      : *o == '4' ? DW_EH_PE_udata4
				      : *o == 'A' ? enc
						  : DW_EH_PE_uleb128;

			if (*o == '1') {
				if (p >= end)
					return -1;
				p++;
				continue;
			}
			if (read_value(&p, end, fmt, &v))
				return -1;
			if ((*o == 'R' && v > MAX_REG) || (*o == 'B' && v > (uint64_t)(end - p)))
				return -1;
			if (*o == 'B')
				p += v;
		}
	}
	return 0;
}

static int add_span(struct build *b, const struct span *s)
{
	if (b->nspans == b->spans_cap) {
		size_t cap = b->spans_cap ? 2 * b->spans_cap : 1024;
		struct span *n;

		if (cap > UNWTAB_MAX_ROWS)
			return -E2BIG;
		n = realloc(b->spans, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		b->spans = n;
		b->spans_cap = cap;
	}
	b->spans[b->nspans++] = *s;
	return 0;
}

/* Lists the FDEs of one CFI section (data at link-time address addr) as
 * spans. A corrupt entry is counted and skipped where libdw can tell where
 * the next one starts, else the listing stops there. */
static int list_fdes(struct build *b, Elf_Data *data, uint64_t addr, bool eh, bool debug)
{
	const uint8_t *sec = data->d_buf;
	Dwarf_Off off = 0, next;
	Dwarf_CFI_Entry e, c;
	int err;

	while (off < data->d_size) {
		const uint8_t *p, *end;
		uint64_t loc, len, aug;
		uint8_t enc;
		int rc;

		next = (Dwarf_Off)-1;
		rc = dwarf_next_cfi(b->ident, data, eh, off, &next, &e);
		if (rc > 0)
			break;
		/* Each entry takes at least its 4-byte length: next > off
		 * bounds the loop by the section's size. */
		if (next == (Dwarf_Off)-1 || next <= off)
			break;
		off = next;
		if (rc < 0) {
			b->t->fdes_bad++;
			continue;
		}
		if (dwarf_cfi_cie_p(&e))
			continue;
		if (dwarf_next_cfi(b->ident, data, eh, e.fde.CIE_pointer, &next, &c) != 0 ||
		    !dwarf_cfi_cie_p(&c) || fde_encoding(&c.cie, &enc)) {
			b->t->fdes_bad++;
			continue;
		}
		p = e.fde.start;
		end = e.fde.end;
		if (p < sec || p > end || (size_t)(end - sec) > data->d_size ||
		    read_value(&p, end, enc, &loc)) {
			b->t->fdes_bad++;
			continue;
		}
		switch (enc & 0x70) {
		case DW_EH_PE_absptr:
			break;
		case DW_EH_PE_pcrel:
			loc += addr + (uint64_t)(e.fde.start - sec);
			break;
		default: /* textrel, datarel, funcrel, aligned: not on x86-64 */
			b->t->fdes_bad++;
			continue;
		}
		if ((enc & DW_EH_PE_indirect) || read_value(&p, end, enc & 0x0f, &len) || !len ||
		    loc < b->lo || loc >= b->hi || len > b->hi - loc) {
			b->t->fdes_bad++;
			continue;
		}
		/* The FDE's augmentation data ('z': sized), then its program. */
		if (c.cie.augmentation[0] == 'z' &&
		    (read_value(&p, end, DW_EH_PE_uleb128, &aug) || aug > (uint64_t)(end - p))) {
			b->t->fdes_bad++;
			continue;
		}
		if (c.cie.augmentation[0] == 'z')
			p += aug;
		if (check_insns(p, end, enc) ||
		    check_insns(c.cie.initial_instructions, c.cie.initial_instructions_end, enc)) {
			b->t->fdes_bad++;
			continue;
		}
		struct span sp = {
		    .start = loc,
		    .end = loc + len,
		    .cost = (uint32_t)(end - e.fde.start) +
			    (uint32_t)(c.cie.initial_instructions_end - c.cie.initial_instructions),
		    .debug = debug};
		/* run_span() follows the programs of x86-64's usual CIEs; the
		 * rest (signal frames: 'S') are left to libdw. */
		if (!debug && !b->ref && c.cie.return_address_register == REG_RA &&
		    !strchr(c.cie.augmentation, 'S')) {
			sp.prog = p;
			sp.prog_end = end;
			sp.init = c.cie.initial_instructions;
			sp.init_end = c.cie.initial_instructions_end;
			sp.loc = loc;
			sp.caf = c.cie.code_alignment_factor;
			sp.daf = c.cie.data_alignment_factor;
		}
		err = add_span(b, &sp);
		if (err)
			return err;
	}
	return 0;
}

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* Sorts the .eh_frame spans [0, neh) and cuts their overlaps (the first one
 * keeps the bytes: libdw answers with one FDE per address anyway). Then adds
 * the parts of the .debug_frame spans [neh, nspans) that .eh_frame leaves
 * uncovered, and sorts the lot. */
static int arrange_spans(struct build *b, size_t neh)
{
	size_t ndbg = b->nspans - neh, n = 0, i;
	struct span *dbg = NULL;
	uint64_t covered = 0;
	int err = 0;

	if (neh) /* qsort's base may not be NULL, even for no elements */
		qsort(b->spans, neh, sizeof(*b->spans), span_cmp);
	for (i = 0; i < neh; i++) {
		struct span s = b->spans[i];

		if (n && s.start < covered)
			s.start = covered;
		if (s.start >= s.end)
			continue;
		b->spans[n++] = s;
		covered = s.end;
	}
	if (ndbg) {
		dbg = malloc(ndbg * sizeof(*dbg));
		if (!dbg)
			return -ENOMEM;
		memcpy(dbg, b->spans + neh, ndbg * sizeof(*dbg));
		qsort(dbg, ndbg, sizeof(*dbg), span_cmp);
	}
	b->nspans = n;
	neh = n;
	/* Walk the debug spans against the (sorted, disjoint) eh ones. */
	size_t j = 0;
	covered = 0;
	for (i = 0; i < ndbg && !err; i++) {
		uint64_t s = dbg[i].start > covered ? dbg[i].start : covered;

		while (s < dbg[i].end && !err) {
			while (j < neh && b->spans[j].end <= s)
				j++;
			if (j < neh && b->spans[j].start <= s) {
				s = b->spans[j].end;
				continue;
			}
			uint64_t e = j < neh && b->spans[j].start < dbg[i].end ? b->spans[j].start
									       : dbg[i].end;
			struct span part = {
			    .start = s, .end = e, .cost = dbg[i].cost, .debug = true};
			err = add_span(b, &part);
			s = e;
		}
		if (dbg[i].end > covered)
			covered = dbg[i].end;
	}
	free(dbg);
	if (!err && b->nspans)
		qsort(b->spans, b->nspans, sizeof(*b->spans), span_cmp);
	return err;
}

/* --- rows ---------------------------------------------------------------------- */

static bool op_is_cfa_offset(const Dwarf_Op *ops, size_t nops, int64_t *off)
{
	if (nops == 1 && ops[0].atom == DW_OP_call_frame_cfa) {
		*off = 0;
		return true;
	}
	if (nops == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst) {
		*off = (int64_t)ops[1].number;
		return true;
	}
	return false;
}

/* The x86-64 PLT's CFA, as binutils writes it for .plt (threshold 11) and
 * .plt.sec / lazy stubs (10): sp + 8, + 8 more once (rip & 15) >= threshold. */
static bool is_plt_expr(const Dwarf_Op *o, size_t n, int *threshold)
{
	static const uint8_t shape[] = {DW_OP_breg7, DW_OP_breg16, DW_OP_lit15, DW_OP_and, 0,
					DW_OP_ge,    DW_OP_lit3,   DW_OP_shl,	DW_OP_plus};

	if (n != sizeof(shape))
		return false;
	for (size_t i = 0; i < n; i++)
		if (shape[i] && o[i].atom != shape[i])
			return false;
	if (o[0].number != 8 || o[1].number != 0 ||
	    (o[4].atom != DW_OP_lit11 && o[4].atom != DW_OP_lit10))
		return false;
	*threshold = o[4].atom - DW_OP_lit0;
	return true;
}

/* An invalid row, with why it is (enum unwtab_why) in cfa_off until
 * push_row() counts it. */
static struct tp_urow invalid_row(int why)
{
	return (struct tp_urow){.cfa = TP_CFA_INVALID, .fp = TP_FP_SAME, .cfa_off = why};
}

/* A single DW_OP_bregN/bregx: *reg and *off, or false. */
static bool op_breg(const Dwarf_Op *op, uint64_t *reg, int64_t *off)
{
	if (op->atom == DW_OP_bregx) {
		*reg = op->number;
		*off = (int64_t)op->number2;
		return true;
	}
	if (op->atom >= DW_OP_breg0 && op->atom <= DW_OP_breg31) {
		*reg = op->atom - DW_OP_breg0;
		*off = (int64_t)op->number;
		return true;
	}
	return false;
}

/* The row kind of a CFA = reg + N: rsp, rbp, or a register that a
 * realigning prologue or a probe loop keeps it in; else TP_CFA_INVALID. */
static uint8_t cfa_on(uint64_t reg)
{
	switch (reg) {
	case REG_RSP:
		return TP_CFA_SP;
	case REG_RBP:
		return TP_CFA_FP;
	case REG_R10:
		return TP_CFA_R10;
	case REG_R11:
		return TP_CFA_R11;
	case REG_R13:
		return TP_CFA_R13;
	default:
		return TP_CFA_INVALID;
	}
}

/* The row's CFA from libdw's expression for it (a DW_CFA_def_cfa is one
 * DW_OP_breg): reg + off on rsp, rbp, r10, r11 or r13; *(rbp + off), the CFA
 * that GCC's realigning prologue keeps on the stack; the PLT's. Returns -1,
 * or why the row is invalid. */
static int convert_cfa(const Dwarf_Op *ops, size_t nops, struct tp_urow *r)
{
	uint64_t reg;
	int64_t off;
	int threshold;

	if (nops == 1 && op_breg(&ops[0], &reg, &off)) {
		if (off < INT32_MIN || off > INT32_MAX)
			return UNWTAB_WHY_RANGE;
		r->cfa = cfa_on(reg);
		if (r->cfa == TP_CFA_INVALID)
			return UNWTAB_WHY_CFA_REG;
		r->cfa_off = (int32_t)off;
		return -1;
	}
	if (nops == 2 && op_breg(&ops[0], &reg, &off) && ops[1].atom == DW_OP_deref) {
		if (reg != REG_RBP)
			return UNWTAB_WHY_CFA_EXPR;
		if (off < INT32_MIN || off > INT32_MAX)
			return UNWTAB_WHY_RANGE;
		r->cfa = TP_CFA_FP_DEREF;
		r->cfa_off = (int32_t)off;
		return -1;
	}
	if (is_plt_expr(ops, nops, &threshold) && r->fp == TP_FP_SAME) {
		r->cfa = TP_CFA_PLT;
		r->cfa_off = 8;
		r->fp_off = (int16_t)threshold;
		return -1;
	}
	return UNWTAB_WHY_CFA_EXPR;
}

/* DW_CFA_expression rbp: DW_OP_breg6 N, which libdw gives after the CFA
 * that the expression's stack starts with: rbp saved at rbp + N. */
static bool is_fp_expr(const Dwarf_Op *ops, size_t nops, int64_t *off)
{
	uint64_t reg;

	if (nops == 2 && ops[0].atom == DW_OP_call_frame_cfa)
		ops++, nops--;
	return nops == 1 && op_breg(&ops[0], &reg, off) && reg == REG_RBP;
}

/* libdw's rules for one row, as a tp_urow. Anything it cannot follow (see
 * doc/design/native-stacks.md, "Row") is TP_CFA_INVALID, with why. */
static void convert(Dwarf_Frame *f, struct tp_urow *r)
{
	Dwarf_Op mem[3], *ops;
	size_t nops;
	bool signal;
	int64_t off;
	int ra, why;

	*r = invalid_row(UNWTAB_WHY_RA);
	ra = dwarf_frame_info(f, NULL, NULL, &signal);
	if (ra != REG_RA)
		return;
	/* A signal frame ('S'): the C library's __restore_rt, whose CFI
	 * describes the kernel's struct rt_sigframe with expressions. The
	 * registers are where x86-64 Linux puts them, whatever the
	 * expressions: BPF reads them from the ucontext (TP_CFA_SIGNAL). */
	if (signal) {
		*r = (struct tp_urow){.cfa = TP_CFA_SIGNAL, .fp = TP_FP_SAME};
		return;
	}
	/* The return address: undefined ends the stack; else at CFA - 8. */
	if (dwarf_frame_register(f, REG_RA, mem, &ops, &nops))
		return;
	if (nops == 0) {
		if (ops) /* undefined (ops == mem); same_value has ops NULL */
			*r = (struct tp_urow){.cfa = TP_CFA_END, .fp = TP_FP_SAME};
		return;
	}
	if (!op_is_cfa_offset(ops, nops, &off) || off != -8)
		return;

	/* The caller's rbp: same_value and undefined leave it; offset(N)
	 * saved it at CFA + N; expression(breg6 N) at rbp + N. */
	*r = invalid_row(UNWTAB_WHY_FP);
	if (dwarf_frame_register(f, REG_RBP, mem, &ops, &nops))
		return;
	if (nops) {
		if (op_is_cfa_offset(ops, nops, &off))
			r->fp = TP_FP_AT;
		else if (is_fp_expr(ops, nops, &off))
			r->fp = TP_FP_AT_FP;
		else
			return;
		if (off < INT16_MIN || off > INT16_MAX) {
			*r = invalid_row(UNWTAB_WHY_RANGE);
			return;
		}
		r->fp_off = (int16_t)off;
	}

	if (dwarf_frame_cfa(f, &ops, &nops) || nops == 0) {
		*r = invalid_row(UNWTAB_WHY_LIBDW);
		return;
	}
	why = convert_cfa(ops, nops, r);
	if (why >= 0)
		*r = invalid_row(why);
}

static bool row_eq(const struct tp_urow *a, const struct tp_urow *b)
{
	return a->cfa == b->cfa && a->cfa_off == b->cfa_off && a->fp == b->fp &&
	       a->fp_off == b->fp_off;
}

/* Appends the row r from pc on, merging it into an equal predecessor.
 * Returns 0, -E2BIG at UNWTAB_MAX_ROWS, or -ENOMEM. */
static int push_row(struct build *b, uint64_t pc, struct tp_urow r)
{
	r.pc = (uint32_t)pc;
	if (r.cfa == TP_CFA_INVALID) {
		b->t->rows_invalid++;
		if (r.cfa_off >= 0 && r.cfa_off < UNWTAB_WHY_N)
			b->t->invalid_why[r.cfa_off]++;
		r.cfa_off = 0;
	}
	if (b->nrows && b->rows[b->nrows - 1].pc >= r.pc) {
		if (b->rows[b->nrows - 1].pc > r.pc)
			return 0; /* cannot happen with disjoint sorted spans */
		b->nrows--;	  /* an empty row before: this one replaces it */
	}
	if (b->nrows && row_eq(&b->rows[b->nrows - 1], &r))
		return 0;
	if (b->nrows == b->rows_cap) {
		size_t cap = b->rows_cap ? 2 * b->rows_cap : 4096;
		struct tp_urow *n;

		if (b->nrows >= UNWTAB_MAX_ROWS)
			return -E2BIG;
		if (cap > UNWTAB_MAX_ROWS)
			cap = UNWTAB_MAX_ROWS;
		n = realloc(b->rows, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		b->rows = n;
		b->rows_cap = cap;
	}
	b->rows[b->nrows++] = r;
	return 0;
}

/* The rows of one span, one dwarf_cfi_addrframe call per row of libdw's. */
static int walk_span(struct build *b, Dwarf_CFI *cfi, const struct span *s)
{
	const struct tp_urow bad = invalid_row(UNWTAB_WHY_LIBDW);
	uint64_t pc = s->start;
	int err;

	while (pc < s->end) {
		Dwarf_Addr start, end;
		struct tp_urow r;
		Dwarf_Frame *f;

		b->work += s->cost + 64u;
		if (b->work > b->budget)
			return -E2BIG;
		if (dwarf_cfi_addrframe(cfi, pc, &f))
			return push_row(b, pc, bad);
		if (dwarf_frame_info(f, &start, &end, NULL) < 0 || end <= pc) {
			free(f);
			return push_row(b, pc, bad);
		}
		convert(f, &r);
		free(f);
		err = push_row(b, pc, r);
		if (err)
			return err;
		pc = end;
	}
	return 0;
}

/* --- rows without libdw -------------------------------------------------------- */

/* run_span() interprets an FDE's program once, row by row, where libdw
 * interprets it from its start again for each row (walk_span(): most of a
 * table's build time). It follows what convert() can turn into a row, the
 * same way libdw does (elfutils' libdw/cfi.c and its x86-64 initial rules:
 * rbp and the return address "same value" until a CIE says otherwise), and
 * gives up on anything else: an expression or a register rule for rbp or
 * the return address, a CFA expression (the PLT's), DW_CFA_set_loc, a state
 * stack deeper than RUN_DEPTH. libdw then builds that span as before.
 * test_unwtab.c checks that both ways give the same rows for whole
 * libraries. */
enum run_rule { RR_SAME, RR_UNDEF, RR_OFFSET };
enum run_cfa { RC_UNDEF, RC_OFFSET, RC_INVALID };

struct run_state {
	uint64_t cfa_reg;
	int64_t cfa_off, ra_off, fp_off;
	uint8_t cfa, ra, fp; /* enum run_cfa, enum run_rule */
};

#define RUN_DEPTH 8
#define RUN_GIVE_UP 1

/* convert() for a run_state: the same row for the same rules. */
static struct tp_urow run_row(const struct run_state *st)
{
	struct tp_urow r = {.fp = TP_FP_SAME};

	if (st->ra == RR_UNDEF) {
		r.cfa = TP_CFA_END;
		return r;
	}
	if (st->ra != RR_OFFSET || st->ra_off != -8)
		return invalid_row(UNWTAB_WHY_RA);
	if (st->fp == RR_OFFSET) {
		if (st->fp_off < INT16_MIN || st->fp_off > INT16_MAX)
			return invalid_row(UNWTAB_WHY_RANGE);
		r.fp = TP_FP_AT;
		r.fp_off = (int16_t)st->fp_off;
	}
	if (st->cfa != RC_OFFSET)
		return invalid_row(UNWTAB_WHY_LIBDW); /* as libdw: no CFA rule */
	if (st->cfa_off < INT32_MIN || st->cfa_off > INT32_MAX)
		return invalid_row(UNWTAB_WHY_RANGE);
	r.cfa = cfa_on(st->cfa_reg);
	if (r.cfa == TP_CFA_INVALID)
		return invalid_row(UNWTAB_WHY_CFA_REG);
	r.cfa_off = (int32_t)st->cfa_off;
	return r;
}

/* Sets reg's rule, where it is one run_row() reads. */
static void run_set(struct run_state *st, uint64_t reg, uint8_t rule, int64_t off)
{
	if (reg == REG_RA) {
		st->ra = rule;
		st->ra_off = off;
	} else if (reg == REG_RBP) {
		st->fp = rule;
		st->fp_off = off;
	}
}

/* A factored offset as libdw computes it: in unsigned 64-bit arithmetic. */
static int64_t run_factor(uint64_t v, int64_t factor)
{
	return (int64_t)(v * (uint64_t)factor);
}

/* The row of st for [lo, hi), clipped to the span. */
static int run_emit(struct build *b, const struct span *s, uint64_t lo, uint64_t hi,
		    const struct run_state *st)
{
	if (hi <= s->start || lo >= s->end)
		return 0;
	return push_row(b, lo > s->start ? lo : s->start, run_row(st));
}

/* Executes the program [p, end) on *st from *loc. rows: an FDE's program,
 * whose rows are pushed, with init the state its CIE left; else a CIE's
 * initial program (init NULL), where neither an advance nor a restore may
 * appear. Returns 0, RUN_GIVE_UP, or push_row()'s error. */
static int run_prog(struct build *b, const struct span *s, const uint8_t *p, const uint8_t *end,
		    struct run_state *st, const struct run_state *init, uint64_t *loc)
{
	struct run_state saved[RUN_DEPTH];
	int depth = 0, err;

	while (p < end) {
		uint8_t op = *p++;
		uint64_t reg = op & 0x3f, v, delta;

		switch (op & 0xc0) {
		case DW_CFA_advance_loc:
			delta = op & 0x3f;
			goto advance;
		case DW_CFA_offset:
			if (read_value(&p, end, DW_EH_PE_uleb128, &v))
				return RUN_GIVE_UP;
			run_set(st, reg, RR_OFFSET, run_factor(v, s->daf));
			continue;
		case DW_CFA_restore:
			goto restore;
		}
		switch (op) {
		case DW_CFA_nop:
			continue;
		case DW_CFA_advance_loc1:
			if (p >= end)
				return RUN_GIVE_UP;
			delta = *p++;
			goto advance;
		case DW_CFA_advance_loc2:
			if (read_value(&p, end, DW_EH_PE_udata2, &delta))
				return RUN_GIVE_UP;
			goto advance;
		case DW_CFA_advance_loc4:
			if (read_value(&p, end, DW_EH_PE_udata4, &delta))
				return RUN_GIVE_UP;
			goto advance;
		case DW_CFA_def_cfa:
		case DW_CFA_def_cfa_sf:
			if (read_value(&p, end, DW_EH_PE_uleb128, &reg) ||
			    read_value(&p, end,
				       op == DW_CFA_def_cfa ? DW_EH_PE_uleb128 : DW_EH_PE_sleb128,
				       &v))
				return RUN_GIVE_UP;
			st->cfa = RC_OFFSET;
			st->cfa_reg = reg;
			st->cfa_off = op == DW_CFA_def_cfa ? (int64_t)v : run_factor(v, s->daf);
			continue;
		case DW_CFA_def_cfa_register:
			if (read_value(&p, end, DW_EH_PE_uleb128, &reg))
				return RUN_GIVE_UP;
			if (st->cfa != RC_OFFSET)
				st->cfa = RC_INVALID;
			st->cfa_reg = reg;
			continue;
		case DW_CFA_def_cfa_offset:
		case DW_CFA_def_cfa_offset_sf:
			if (read_value(&p, end,
				       op == DW_CFA_def_cfa_offset ? DW_EH_PE_uleb128
								   : DW_EH_PE_sleb128,
				       &v))
				return RUN_GIVE_UP;
			if (st->cfa != RC_OFFSET)
				st->cfa = RC_INVALID;
			st->cfa_off =
			    op == DW_CFA_def_cfa_offset ? (int64_t)v : run_factor(v, s->daf);
			continue;
		case DW_CFA_undefined:
		case DW_CFA_same_value:
			if (read_value(&p, end, DW_EH_PE_uleb128, &reg))
				return RUN_GIVE_UP;
			run_set(st, reg, op == DW_CFA_undefined ? RR_UNDEF : RR_SAME, 0);
			continue;
		case DW_CFA_offset_extended:
		case DW_CFA_offset_extended_sf:
			if (read_value(&p, end, DW_EH_PE_uleb128, &reg) ||
			    read_value(&p, end,
				       op == DW_CFA_offset_extended ? DW_EH_PE_uleb128
								    : DW_EH_PE_sleb128,
				       &v))
				return RUN_GIVE_UP;
			run_set(st, reg, RR_OFFSET, run_factor(v, s->daf));
			continue;
		case DW_CFA_restore_extended:
			if (read_value(&p, end, DW_EH_PE_uleb128, &reg))
				return RUN_GIVE_UP;
			goto restore;
		case DW_CFA_remember_state:
			if (!init || depth == RUN_DEPTH)
				return RUN_GIVE_UP;
			saved[depth++] = *st;
			continue;
		case DW_CFA_restore_state:
			if (!init || depth == 0)
				return RUN_GIVE_UP;
			*st = saved[--depth];
			continue;
		case DW_CFA_GNU_args_size:
			if (read_value(&p, end, DW_EH_PE_uleb128, &v))
				return RUN_GIVE_UP;
			continue;
		case DW_CFA_register:
		case DW_CFA_val_offset:
		case DW_CFA_val_offset_sf:
			if (read_value(&p, end, DW_EH_PE_uleb128, &reg) || reg == REG_RA ||
			    reg == REG_RBP ||
			    read_value(&p, end,
				       op == DW_CFA_val_offset_sf ? DW_EH_PE_sleb128
								  : DW_EH_PE_uleb128,
				       &v))
				return RUN_GIVE_UP;
			continue; /* a register no row needs */
		case DW_CFA_expression:
		case DW_CFA_val_expression:
			if (read_value(&p, end, DW_EH_PE_uleb128, &reg) || reg == REG_RA ||
			    reg == REG_RBP || read_value(&p, end, DW_EH_PE_uleb128, &v) ||
			    v > (uint64_t)(end - p))
				return RUN_GIVE_UP;
			p += v;
			continue;
		default: /* set_loc, def_cfa_expression, GNU_negative_offset_extended */
			return RUN_GIVE_UP;
		}
	restore:
		if (!init)
			return RUN_GIVE_UP;
		if (reg == REG_RA)
			run_set(st, reg, init->ra, init->ra_off);
		else if (reg == REG_RBP)
			run_set(st, reg, init->fp, init->fp_off);
		continue;
	advance:
		if (!init || delta > UINT32_MAX || s->caf > UINT32_MAX)
			return RUN_GIVE_UP;
		delta *= s->caf;
		if (delta && (err = run_emit(b, s, *loc, *loc + delta, st)))
			return err;
		*loc += delta;
		if (*loc >= s->end)
			return 0;
	}
	return 0;
}

/* The rows of one span in one pass over its FDE's program. Returns 0,
 * RUN_GIVE_UP having pushed nothing, or push_row()'s error. */
static int run_span(struct build *b, const struct span *s)
{
	struct run_state st = {.cfa = RC_UNDEF, .ra = RR_SAME, .fp = RR_SAME}, init;
	size_t nrows = b->nrows;
	uint32_t invalid = b->t->rows_invalid, why[UNWTAB_WHY_N];
	uint64_t loc = 0;
	int err;

	b->work += s->cost + 64u;
	if (b->work > b->budget)
		return -E2BIG;
	memcpy(why, b->t->invalid_why, sizeof(why));
	err = run_prog(b, s, s->init, s->init_end, &st, NULL, &loc);
	if (!err) {
		init = st;
		loc = s->loc;
		err = run_prog(b, s, s->prog, s->prog_end, &st, &init, &loc);
	}
	if (!err && loc < s->end)
		err = run_emit(b, s, loc, s->end, &st);
	if (err == RUN_GIVE_UP) {
		/* Its first row only appended or merged: nothing before it moved. */
		b->nrows = nrows;
		b->t->rows_invalid = invalid;
		memcpy(b->t->invalid_why, why, sizeof(why));
	}
	return err;
}

static int make_rows(struct build *b, Dwarf_CFI *eh, Dwarf_CFI *dbg)
{
	const struct tp_urow nocfi = {.cfa = TP_CFA_NOCFI, .fp = TP_FP_SAME};
	uint64_t prev_end = 0;
	int err = 0;

	for (size_t i = 0; i < b->nspans && !err; i++) {
		const struct span *s = &b->spans[i];

		if (i && s->start > prev_end)
			err = push_row(b, prev_end, nocfi);
		if (!err)
			err = s->prog ? run_span(b, s) : RUN_GIVE_UP;
		if (err == RUN_GIVE_UP)
			err = walk_span(b, s->debug ? dbg : eh, s);
		if (!err) {
			b->t->fdes++;
			b->t->from_debug_frame += s->debug;
		}
		prev_end = s->end;
	}
	if (!err && b->nspans)
		err = push_row(b, prev_end, nocfi);
	if (err == -E2BIG) { /* a limit: keep what there is */
		b->t->truncated = 1;
		err = 0;
	}
	return err;
}

static int make_pages(struct unwtab *t)
{
	const uint32_t mask = (1u << TP_UPAGE_SHIFT) - 1;
	uint32_t j = 0;

	t->base = t->rows[0].pc & ~mask;
	t->npages = ((t->rows[t->nrows - 1].pc - t->base) >> TP_UPAGE_SHIFT) + 1;
	t->pages = malloc((size_t)t->npages * sizeof(*t->pages));
	if (!t->pages)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->npages; i++) {
		uint32_t at = t->base + (i << TP_UPAGE_SHIFT);

		while (j + 1 < t->nrows && t->rows[j + 1].pc <= at)
			j++;
		t->pages[i] = j;
	}
	return 0;
}

static uint64_t rule_key(const struct tp_urule *r)
{
	uint64_t k;
	memcpy(&k, r, sizeof(k));
	return k;
}

static uint32_t rule_slot(uint64_t key, uint32_t hcap)
{
	key ^= key >> 31;
	key *= 0x9e3779b97f4a7c15ULL;
	return (uint32_t)(key >> 32) & (hcap - 1);
}

/* Rules are stored with their key + 1 in keys[], so that 0 marks a free
 * slot whatever the rule's bytes. */
static int rules_grow(struct unwtab_rules *r)
{
	uint32_t hcap = r->hcap ? r->hcap * 2 : 1024;
	uint64_t *keys = calloc(hcap, sizeof(*keys));
	uint32_t *ids = malloc(hcap * sizeof(*ids));
	if (!keys || !ids) {
		free(keys);
		free(ids);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < r->hcap; i++) {
		if (!r->keys[i])
			continue;
		uint32_t j = rule_slot(r->keys[i] - 1, hcap);
		while (keys[j])
			j = (j + 1) & (hcap - 1);
		keys[j] = r->keys[i];
		ids[j] = r->ids[i];
	}
	free(r->keys);
	free(r->ids);
	r->keys = keys;
	r->ids = ids;
	r->hcap = hcap;
	return 0;
}

int unwtab_rule_id(struct unwtab_rules *r, const struct tp_urow *row, uint32_t *id)
{
	const struct tp_urule rule = {
	    .cfa_off = row->cfa_off, .fp_off = row->fp_off, .cfa = row->cfa, .fp = row->fp};
	uint64_t key = rule_key(&rule);
	if (r->hcap) {
		for (uint32_t j = rule_slot(key, r->hcap); r->keys[j]; j = (j + 1) & (r->hcap - 1))
			if (r->keys[j] == key + 1) {
				*id = r->ids[j];
				return 0;
			}
	}
	if (r->n >= TP_MAX_URULES)
		return -ENOSPC;
	if ((r->n + 1) * 2 > r->hcap && rules_grow(r))
		return -ENOMEM;
	if (r->n == r->cap) {
		uint32_t cap = r->cap ? r->cap * 2 : 256;
		struct tp_urule *v = realloc(r->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = cap;
	}
	uint32_t j = rule_slot(key, r->hcap);
	while (r->keys[j])
		j = (j + 1) & (r->hcap - 1);
	r->keys[j] = key + 1;
	r->ids[j] = r->n;
	r->v[r->n] = rule;
	*id = r->n++;
	return 0;
}

void unwtab_rules_free(struct unwtab_rules *r)
{
	free(r->v);
	free(r->keys);
	free(r->ids);
	memset(r, 0, sizeof(*r));
}

uint32_t *unwtab_pack(const struct unwtab *t, struct unwtab_rules *rules)
{
	const uint32_t mask = (1u << TP_UPAGE_SHIFT) - 1;
	uint32_t *w = calloc(unwtab_words(t), sizeof(*w));
	uint32_t *rows = w ? w + 2 * t->npages : NULL;
	uint32_t j = 0;

	if (!w) {
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i <= t->npages; i++) {
		uint64_t at = (uint64_t)t->base + ((uint64_t)i << TP_UPAGE_SHIFT);

		while (j < t->nrows && t->rows[j].pc < at)
			j++;
		if (i < t->npages)
			w[2 * i] = j;
		if (i)
			w[2 * i - 1] = i == t->npages ? t->nrows : j;
	}
	for (uint32_t i = 0; i < t->nrows; i++) {
		uint32_t id;
		int err = unwtab_rule_id(rules, &t->rows[i], &id);

		if (err) {
			free(w);
			errno = -err;
			return NULL;
		}
		rows[i] = ((t->rows[i].pc - t->base) & mask) << TP_URULE_BITS | id;
	}
	return w;
}

/* --- the file ------------------------------------------------------------------ */

/* The span of the executable PT_LOAD segments, or -ENOEXEC when any segment
 * reaches 4 GiB (rows hold 32-bit addresses) or none is executable. */
static int exec_span(Elf *elf, uint64_t *lo, uint64_t *hi)
{
	size_t phnum;

	*lo = UINT64_MAX;
	*hi = 0;
	if (elf_getphdrnum(elf, &phnum))
		return -ENOEXEC;
	for (size_t i = 0; i < phnum && i < 65536; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (ph.p_vaddr >= (1ull << 32) || ph.p_memsz > (1ull << 32) - ph.p_vaddr)
			return -ENOEXEC;
		if (!(ph.p_flags & PF_X) || !ph.p_memsz)
			continue;
		if (ph.p_vaddr < *lo)
			*lo = ph.p_vaddr;
		if (ph.p_vaddr + ph.p_memsz > *hi)
			*hi = ph.p_vaddr + ph.p_memsz;
	}
	return *hi ? 0 : -ENOEXEC;
}

/* The section called name with bytes in the file, or NULL. */
/* What a build reads of a file at most, through libelf, which reads whole
 * sections into memory: the section names, a CFI section, and all the
 * .debug_* sections together (dwarf_begin_elf() reads each, for
 * .debug_frame: past this, .debug_frame is left out). */
#define SHSTRTAB_MAX ((uint64_t)16 << 20)
#define CFI_SECTION_MAX ((uint64_t)256 << 20)
#define DEBUG_SECTIONS_MAX ((uint64_t)64 << 20)

/* The section-name table's index, if it is small enough to read whole. */
static bool names_index(Elf *elf, size_t *shstrndx)
{
	Elf_Scn *scn;
	GElf_Shdr sh;

	return !elf_getshdrstrndx(elf, shstrndx) && (scn = elf_getscn(elf, *shstrndx)) &&
	       gelf_getshdr(scn, &sh) && sh.sh_size <= SHSTRTAB_MAX;
}

/* The bytes of every .debug_* and .zdebug_* section with data. */
static uint64_t debug_bytes(Elf *elf)
{
	uint64_t total = 0;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Shdr sh;

	if (!names_index(elf, &shstrndx))
		return UINT64_MAX;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (n && (!strncmp(n, ".debug_", 7) || !strncmp(n, ".zdebug_", 8)))
			total += sh.sh_size;
	}
	return total;
}

static Elf_Scn *find_section(Elf *elf, const char *name, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (!names_index(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *n;

		if (!gelf_getshdr(scn, sh) || sh->sh_type != SHT_PROGBITS)
			continue;
		n = elf_strptr(elf, shstrndx, sh->sh_name);
		if (n && !strcmp(n, name))
			return scn;
	}
	return NULL;
}

static int build(Elf *elf, struct unwtab *out, bool ref)
{
	struct build b = {.elf = elf, .t = out, .budget = WORK_BASE, .ref = ref};
	Dwarf_CFI *eh = NULL, *dbg = NULL;
	Dwarf *dw = NULL;
	Elf_Data *data;
	Elf_Scn *scn;
	GElf_Ehdr eh_hdr;
	GElf_Shdr sh;
	size_t identsz, neh;
	int err;

	memset(out, 0, sizeof(*out));
	if (elf_kind(elf) != ELF_K_ELF)
		return -ENOEXEC;
	b.ident = (const unsigned char *)elf_getident(elf, &identsz);
	if (!b.ident || identsz < EI_NIDENT || b.ident[EI_CLASS] != ELFCLASS64 ||
	    b.ident[EI_DATA] != ELFDATA2LSB || !gelf_getehdr(elf, &eh_hdr) ||
	    eh_hdr.e_machine != EM_X86_64 || (eh_hdr.e_type != ET_EXEC && eh_hdr.e_type != ET_DYN))
		return -ENOEXEC;
	err = exec_span(elf, &b.lo, &b.hi);
	if (err)
		return err;

	/* .eh_frame first: what the program itself unwinds with. */
	scn = find_section(elf, ".eh_frame", &sh);
	if (scn && sh.sh_size <= CFI_SECTION_MAX && (data = elf_getdata(scn, NULL)) &&
	    data->d_buf && data->d_size && (eh = dwarf_getcfi_elf(elf))) {
		b.budget += WORK_PER_BYTE * data->d_size;
		err = list_fdes(&b, data, sh.sh_addr, true, false);
		if (err)
			goto out;
	}
	neh = b.nspans;
	/* .debug_frame for the rest (dwarf_begin_elf decompresses it). */
	if ((find_section(elf, ".debug_frame", &sh) || find_section(elf, ".zdebug_frame", &sh)) &&
	    debug_bytes(elf) <= DEBUG_SECTIONS_MAX) {
		dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
		dbg = dw ? dwarf_getcfi(dw) : NULL;
		scn = dbg ? find_section(elf, ".debug_frame", &sh) : NULL;
		if (scn && (sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
			scn = NULL;
		if (scn && (!gelf_getshdr(scn, &sh) || sh.sh_size > CFI_SECTION_MAX))
			scn = NULL;
		if (scn && (data = elf_getdata(scn, NULL)) && data->d_buf && data->d_size) {
			b.budget += WORK_PER_BYTE * data->d_size;
			err = list_fdes(&b, data, sh.sh_addr, false, true);
			if (err)
				goto out;
		}
	}
	err = arrange_spans(&b, neh);
	if (err)
		goto out;
	if (!b.nspans) {
		err = -ENODATA;
		goto out;
	}
	err = make_rows(&b, eh, dbg);
	if (err)
		goto out;
	if (!b.nrows) {
		err = -ENODATA;
		goto out;
	}
	out->rows = b.rows;
	out->nrows = (uint32_t)b.nrows;
	b.rows = NULL;
	err = make_pages(out);
out:
	if (eh)
		dwarf_cfi_end(eh);
	if (dw)
		dwarf_end(dw);
	free(b.spans);
	free(b.rows);
	if (err)
		unwtab_free(out);
	return err;
}

/* Builds from the ELF file open at fd, which it closes. */
static int build_fd(int fd, struct unwtab *out, bool ref)
{
	uint64_t fsize;
	Elf *elf;
	int err;

	memset(out, 0, sizeof(*out));
	pthread_once(&libelf_once, libelf_init);
	if (!libelf_ok) {
		err = -ENOEXEC;
		goto out;
	}
	err = elf_fd_check(fd, &fsize);
	if (err)
		goto out;
	/* Read with pread, never mapped: the file's owner may truncate it
	 * meanwhile, which must fail a read, not raise SIGBUS. */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf) {
		err = -ENOEXEC;
		goto out;
	}
	err = build(elf, out, ref);
	elf_end(elf);
out:
	close(fd);
	return err;
}

static int build_file(const char *path, struct unwtab *out, bool ref)
{
	int fd = safe_open(path);

	if (fd < 0) {
		memset(out, 0, sizeof(*out));
		return fd;
	}
	return build_fd(fd, out, ref);
}

int unwtab_build_fd(int fd, struct unwtab *out)
{
	return build_fd(fd, out, false);
}

int unwtab_build(const char *path, struct unwtab *out)
{
	return build_file(path, out, false);
}

int unwtab_build_ref(const char *path, struct unwtab *out)
{
	return build_file(path, out, true);
}

int unwtab_build_mem(const void *image, size_t len, struct unwtab *out)
{
	char *copy;
	Elf *elf;
	int err;

	memset(out, 0, sizeof(*out));
	pthread_once(&libelf_once, libelf_init);
	if (!libelf_ok)
		return -ENOEXEC;
	/* libelf may write into the image (byte order, decompression): a copy. */
	copy = malloc(len ? len : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, image, len);
	elf = elf_memory(copy, len);
	if (!elf) {
		free(copy);
		return -ENOEXEC;
	}
	err = build(elf, out, false);
	elf_end(elf);
	free(copy);
	return err;
}

void unwtab_free(struct unwtab *t)
{
	free(t->pages);
	free(t->rows);
	memset(t, 0, sizeof(*t));
}

size_t unwtab_bytes(const struct unwtab *t)
{
	return (size_t)unwtab_words(t) * sizeof(uint32_t);
}

const struct tp_urow *unwtab_find(const struct unwtab *t, uint32_t pc)
{
	uint32_t page, lo, hi;

	if (!t->nrows || pc < t->rows[0].pc)
		return NULL;
	page = (pc - t->base) >> TP_UPAGE_SHIFT;
	if (page >= t->npages)
		page = t->npages - 1;
	lo = t->pages[page];
	hi = page + 1 < t->npages ? t->pages[page + 1] + 1 : t->nrows;
	/* rows[lo].pc <= pc: the last row in [lo, hi) that starts at or before pc. */
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (t->rows[mid].pc <= pc)
			lo = mid;
		else
			hi = mid;
	}
	return &t->rows[lo];
}
