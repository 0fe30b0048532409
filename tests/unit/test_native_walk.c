/* test_native_walk.c - unit tests for the anchors of the native walk
 * (walk/native.h, the source BPF runs): the frame whose stack holds each
 * anchor the runtime's walk passed is marked as the runtime's eval-loop
 * call, one anchor per frame, innermost first, and one that no frame holds
 * is passed over. The walk runs over a stack built here, frame-pointer
 * chained, with the real unwinding code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proc/unwtab.h"
#include "taipan_abi.h"

/* The walk state's hooks: memory is the stack built here, and some code. */
struct tpw_host {
	const uint8_t *mem;
	uint64_t base, len;
	const uint8_t *code;
	uint64_t code_base, code_len;
};

static int region_read(const uint8_t *mem, uint64_t base, uint64_t n, void *dst, size_t len,
		       uint64_t addr)
{
	if (!mem || addr < base || addr - base > n || len > n - (addr - base))
		return -1;
	memcpy(dst, mem + (addr - base), len);
	return 0;
}

static int host_read(const struct tpw_host *h, void *dst, size_t len, uint64_t addr)
{
	if (!region_read(h->mem, h->base, h->len, dst, len, addr))
		return 0;
	return region_read(h->code, h->code_base, h->code_len, dst, len, addr);
}

#define tpw_read(st, dst, len, addr) host_read(&(st)->host, (dst), (len), (addr))
#define tpw_count(st, stat) ((void)(st), (void)(stat))
#include "walk/state.h"

/* Code at CODE_LO .. CODE_HI is mapped, with no table: frame pointers.
 * SIG_LO holds a signal trampoline, whose table (file 1) has a signal
 * frame's row from the byte before it, as the C library's FDE does. */
#define CODE_LO 0x400000ULL
#define CODE_HI 0x500000ULL
#define SIG_LO 0x600000ULL

static const struct tp_urow sig_rows[] = {
    {.pc = (uint32_t)(SIG_LO - 1), .cfa = TP_CFA_SIGNAL},   /* __restore_rt */
    {.pc = (uint32_t)(SIG_LO + 0x10), .cfa = TP_CFA_NOCFI}, /* past it */
    /* A probe loop's CFA on r11, a realigning prologue's on r13. */
    {.pc = (uint32_t)(SIG_LO + 0x100), .cfa = TP_CFA_R11, .cfa_off = 0x18},
    {.pc = (uint32_t)(SIG_LO + 0x110), .cfa = TP_CFA_R13},
    {.pc = (uint32_t)(SIG_LO + 0x120), .cfa = TP_CFA_NOCFI},
};
#define SIG_BASE ((uint32_t)(SIG_LO - 1) & ~((1u << TP_UPAGE_SHIFT) - 1))

/* sig_rows as BPF gets them (unwtab_pack), and their rules. */
static struct unwtab sig_table = {
    .base = SIG_BASE,
    .npages = ((uint32_t)(SIG_LO + 0x120) - SIG_BASE) / (1u << TP_UPAGE_SHIFT) + 1,
    .rows = (struct tp_urow *)sig_rows,
    .nrows = sizeof(sig_rows) / sizeof(sig_rows[0]),
};
static uint32_t *sig_words;
static struct unwtab_rules sig_rules;

/* The table file 1 is: sig_table, unless a test put another. */
static const struct unwtab *cur_table = &sig_table;
static const struct unwtab_rules *cur_rules = &sig_rules;
static const uint32_t *cur_words; /* sig_words, once packed */

static int tpn_mapping(struct tpw_state *st, uint64_t ip, struct tp_umap *m)
{
	(void)st;
	if (ip >= SIG_LO - 1 && ip < SIG_LO + 0x1000) {
		*m = (struct tp_umap){.bias = 0, .file = 1, .flags = 0};
		return 0;
	}
	if (ip < CODE_LO || ip >= CODE_HI)
		return -1;
	*m = (struct tp_umap){.bias = 0, .file = 0, .flags = TP_UM_FP};
	return 0;
}

static void *tpn_table(struct tpw_state *st, uint32_t file)
{
	(void)st;
	return file == 1 ? (void *)cur_words : NULL;
}

static int tpn_file(struct tpw_state *st, uint32_t file, struct tp_ufile *info)
{
	(void)st;
	if (file != 1)
		return -1;
	*info = (struct tp_ufile){
	    .base = cur_table->base, .npages = cur_table->npages, .nrows = cur_table->nrows};
	return 0;
}

static int tpn_elem(struct tpw_state *st, void *t, uint32_t i, __u64 *v)
{
	(void)st;
	if (!t || 2 * i + 1 >= unwtab_words(cur_table))
		return -1;
	*v = ((const uint32_t *)t)[2 * i] | (__u64)((const uint32_t *)t)[2 * i + 1] << 32;
	return 0;
}

static const struct tp_urule *tpn_rule(struct tpw_state *st, uint32_t id)
{
	(void)st;
	return id < cur_rules->n ? &cur_rules->v[id] : NULL;
}
#include "walk/native.h"

static int pack_sig_table(void **state)
{
	(void)state;
	sig_words = unwtab_pack(&sig_table, &sig_rules);
	cur_words = sig_words;
	return sig_words ? 0 : -1;
}

static int free_sig_table(void **state)
{
	(void)state;
	free(sig_words);
	unwtab_rules_free(&sig_rules);
	return 0;
}

#define STACK_BASE 0x7ff000000000ULL
#define NFRAMES 5
#define FRAME_BYTES                                                                                \
	0x40 /* each frame's stack: [sp, sp + 0x40), its saved rbp and                             \
	      * return address at the top */

static uint64_t stack_mem[(NFRAMES * FRAME_BYTES) / 8 + 2];
static struct tpw_state st;

/* NFRAMES frames, leaf first: frame k's stack is [sp_k, sp_k + FRAME_BYTES),
 * its rbp points 16 bytes below the top, where the caller's rbp and the
 * return address into the caller lie. The outermost has a zero return
 * address. */
static uint64_t frame_sp(int k)
{
	return STACK_BASE + (uint64_t)k * FRAME_BYTES;
}

static void build_stack(void)
{
	memset(stack_mem, 0, sizeof(stack_mem));
	for (int k = 0; k < NFRAMES; k++) {
		uint64_t fp = frame_sp(k) + FRAME_BYTES - 16;
		size_t at = (size_t)(fp - STACK_BASE) / 8;
		stack_mem[at] = k + 1 < NFRAMES ? frame_sp(k + 1) + FRAME_BYTES - 16 : 0;
		stack_mem[at + 1] = k + 1 < NFRAMES ? CODE_LO + 0x100 * (uint64_t)(k + 2) : 0;
	}
	memset(&st, 0, sizeof(st));
	st.host = (struct tpw_host){
	    (const uint8_t *)stack_mem, STACK_BASE, sizeof(stack_mem), NULL, 0, 0};
	st.s.time_ns = 1;
	tpw_begin(&st);
}

/* Walks the stack with the anchors given (innermost first) and returns
 * the anchored mask of its frames. */
static uint64_t walk(const uint64_t *anchors, int n)
{
	build_stack();
	for (int i = 0; i < n; i++)
		tpw_anchor(&st, anchors[i], 1);
	tpn_begin(&st, CODE_LO + 0x100, frame_sp(0), frame_sp(0) + FRAME_BYTES - 16, 0, 0, 0);
	for (int i = 0; i < 4 * NFRAMES && tpn_step(&st); i++)
		;
	assert_int_equal(st.s.uerr, TP_UERR_NONE);
	assert_int_equal(st.s.nustack, NFRAMES);
	assert_int_equal(st.s.anchored[1], 0);
	return st.s.anchored[0];
}

/* Each anchor marks the frame whose stack holds it. */
static void test_frames_holding_anchors(void **state)
{
	(void)state;
	const uint64_t a[] = {frame_sp(1) + 8, frame_sp(3) + 0x20};
	assert_int_equal(walk(a, 2), (1 << 1) | (1 << 3));
	assert_true(st.s.flags & TP_SF_ANCHORED);
	/* The sampled frame itself may hold one. */
	const uint64_t b[] = {frame_sp(0)};
	assert_int_equal(walk(b, 1), 1 << 0);
}

/* A frame holds one anchor at most: a second in the same frame is no
 * frame's, and is passed over at the next frame, which takes the one
 * after it. */
static void test_one_per_frame(void **state)
{
	(void)state;
	const uint64_t a[] = {frame_sp(1) + 8, frame_sp(1) + 16, frame_sp(2) + 8};
	assert_int_equal(walk(a, 3), (1 << 1) | (1 << 2));
}

/* An anchor above the whole stack (3.15's base frame, in the thread
 * state) marks nothing; one below the sampled stack pointer is passed
 * over. */
static void test_anchors_no_frame_holds(void **state)
{
	(void)state;
	const uint64_t a[] = {frame_sp(2) + 8, STACK_BASE + 0x100000};
	assert_int_equal(walk(a, 2), 1 << 2);
	const uint64_t b[] = {STACK_BASE - 64, frame_sp(1)};
	assert_int_equal(walk(b, 2), 1 << 1);
}

/* Without anchors, or with more than fit, the sample is not anchored:
 * the merge goes by names. */
static void test_none_or_too_many(void **state)
{
	(void)state;
	assert_int_equal(walk(NULL, 0), 0);
	assert_false(st.s.flags & TP_SF_ANCHORED);
	static uint64_t many[TP_ANCHORS_MAX + 1];
	for (int i = 0; i <= TP_ANCHORS_MAX; i++)
		many[i] = frame_sp(0) + (uint64_t)i / 8;
	walk(many, TP_ANCHORS_MAX + 1);
	assert_int_equal(st.a.n, TP_ANCHORS_MAX);
	assert_true(st.a.full);
	assert_false(st.s.flags & TP_SF_ANCHORED);
	/* A non-anchor (add 0) costs nothing. */
	build_stack();
	tpw_anchor(&st, frame_sp(1), 0);
	assert_int_equal(st.a.n, 0);
	assert_false(st.a.full);
}

/* A signal frame: the kernel's trampoline, found by its row
 * (TP_CFA_SIGNAL), gives the interrupted registers from the ucontext on the
 * stack. The interrupted instruction is looked up as is (it is the first of
 * its mapping: as a return address, the byte before would be unmapped), and
 * both it and the trampoline are marked exact for naming. */
static void test_signal_frame(void **state)
{
	(void)state;
	build_stack();
	/* Frame 0 (a handler, frame pointers) returns into the trampoline;
	 * its CFA, the trampoline's sp, is the ucontext. Frame 2, the
	 * interrupted one, is frame 3 of the built chain. */
	uint64_t fp0 = frame_sp(0) + FRAME_BYTES - 16, uc = frame_sp(1);
	stack_mem[(fp0 + 8 - STACK_BASE) / 8] = SIG_LO;
	stack_mem[(uc + TP_UC_RBP - STACK_BASE) / 8] = frame_sp(3) + FRAME_BYTES - 16;
	stack_mem[(uc + TP_UC_RSP - STACK_BASE) / 8] = frame_sp(3);
	stack_mem[(uc + TP_UC_RIP - STACK_BASE) / 8] = CODE_LO;
	tpn_begin(&st, CODE_LO + 0x100, frame_sp(0), fp0, 0, 0, 0);
	for (int i = 0; i < 4 * NFRAMES && tpn_step(&st); i++)
		;
	assert_int_equal(st.s.uerr, TP_UERR_NONE);
	assert_int_equal(st.s.nustack, 4);
	assert_int_equal(st.s.ustack[1], SIG_LO);
	assert_int_equal(st.s.ustack[2], CODE_LO);
	assert_int_equal(st.s.ustack[3], CODE_LO + 0x100 * 5);
	assert_int_equal(st.s.exact[0], 0x7);
	/* Without the signal, only the sampled frame is exact. */
	walk(NULL, 0);
	assert_int_equal(st.s.exact[0], 0x1);
}

/* Code without CFI that returns at once: CPython's -X perf trampoline
 * (sub $8, %rsp; call *%rcx; add $8, %rsp; ret) keeps no frame pointer, so
 * its caller's is still in rbp; the code at the return address gives the
 * frame's size instead. */
static void test_code_that_returns_at_once(void **state)
{
	(void)state;
	static const uint8_t tramp[] = {0x48, 0x83, 0xec, 0x08, 0xff, 0xd1,
					0x48, 0x83, 0xc4, 0x08, 0xc3};
	const uint64_t at = CODE_LO + 0x8000;
	build_stack();
	memset(stack_mem, 0, sizeof(stack_mem));
	st.host.code = tramp;
	st.host.code_base = at;
	st.host.code_len = sizeof(tramp);
	uint64_t fp0 = STACK_BASE + 0x30, outer = STACK_BASE + 0x80;
	stack_mem[(fp0 - STACK_BASE) / 8] = outer;	/* frame 0 saved its caller's rbp */
	stack_mem[(fp0 + 8 - STACK_BASE) / 8] = at + 6; /* into the trampoline */
	stack_mem[0x48 / 8] = CODE_LO + 0x200;		/* the trampoline's return */
	stack_mem[(outer - STACK_BASE) / 8] = 0;	/* the outermost frame */
	tpn_begin(&st, CODE_LO + 0x100, STACK_BASE, fp0, 0, 0, 0);
	for (int i = 0; i < 4 * NFRAMES && tpn_step(&st); i++)
		;
	assert_int_equal(st.s.uerr, TP_UERR_NONE);
	assert_int_equal(st.s.nustack, 3);
	assert_int_equal(st.s.ustack[1], at + 6);
	assert_int_equal(st.s.ustack[2], CODE_LO + 0x200);
	/* A lone `ret` is a frame of the return address alone. */
	static const uint8_t ret[] = {0xc3, 0, 0, 0, 0};
	build_stack();
	memset(stack_mem, 0, sizeof(stack_mem));
	st.host.code = ret;
	st.host.code_base = at;
	st.host.code_len = sizeof(ret);
	stack_mem[0] = CODE_LO + 0x300;
	stack_mem[(outer - STACK_BASE) / 8] = 0;
	tpn_begin(&st, at, STACK_BASE, outer, 0, 0, 0);
	for (int i = 0; i < 4 * NFRAMES && tpn_step(&st); i++)
		;
	assert_int_equal(st.s.uerr, TP_UERR_NONE);
	assert_int_equal(st.s.nustack, 2);
	assert_int_equal(st.s.ustack[1], CODE_LO + 0x300);
}

/* A CFA on r11 or r13 (a probe loop, a realigning prologue) is followed
 * in the sampled frame, whose registers the walk starts with; in a caller,
 * where they are not known, the walk stops with TP_UERR_CFI. */
static void test_cfa_on_scratch_registers(void **state)
{
	(void)state;
	build_stack();
	memset(stack_mem, 0, sizeof(stack_mem));
	/* r11 + 0x18 is the CFA: the return address below it. */
	uint64_t r11 = STACK_BASE + 0x20;
	stack_mem[(r11 + 0x18 - 8 - STACK_BASE) / 8] = CODE_LO + 0x200;
	tpn_begin(&st, SIG_LO + 0x104, STACK_BASE, 0, 0, r11, 0);
	for (int i = 0; i < 4 * NFRAMES && tpn_step(&st); i++)
		;
	assert_int_equal(st.s.uerr, TP_UERR_NONE);
	assert_int_equal(st.s.nustack, 2);
	assert_int_equal(st.s.ustack[1], CODE_LO + 0x200);
	/* r13 the same. */
	uint64_t r13 = STACK_BASE + 0x40;
	stack_mem[(r13 - 8 - STACK_BASE) / 8] = CODE_LO + 0x300;
	tpn_begin(&st, SIG_LO + 0x114, STACK_BASE, 0, 0, 0, r13);
	for (int i = 0; i < 4 * NFRAMES && tpn_step(&st); i++)
		;
	assert_int_equal(st.s.uerr, TP_UERR_NONE);
	assert_int_equal(st.s.ustack[1], CODE_LO + 0x300);
	/* A caller in such a row: its registers are the callee's. */
	build_stack();
	uint64_t fp0 = frame_sp(0) + FRAME_BYTES - 16;
	stack_mem[(fp0 + 8 - STACK_BASE) / 8] = SIG_LO + 0x105;
	tpn_begin(&st, CODE_LO + 0x100, frame_sp(0), fp0, 0, r11, r13);
	for (int i = 0; i < 4 * NFRAMES && tpn_step(&st); i++)
		;
	assert_int_equal(st.s.uerr, TP_UERR_CFI);
	assert_int_equal(st.s.nustack, 2);
}

/* Code without CFI whose frame pointer leads nowhere (below the stack
 * pointer, or unreadable): the walk ends with TP_UERR_NOFP, not as a bad
 * step of CFI it followed. */
/* The walker's row lookup (tpn_find_row) over real tables as BPF gets
 * them gives the rule of the row unwtab_find() gives, at each row's first
 * and last byte, at each page's first, below the first row and past the
 * last. */
static void test_row_lookup_in_real_tables(void **state)
{
	static const char *const files[] = {
	    "/usr/lib/x86_64-linux-gnu/libc.so.6",
	    "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
	    "/usr/bin/python3.11",
	};
	(void)state;
	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		struct unwtab t = {0};
		struct unwtab_rules rules = {0};
		assert_int_equal(unwtab_build(files[f], &t), 0);
		uint32_t *w = unwtab_pack(&t, &rules);
		assert_non_null(w);
		cur_table = &t;
		cur_rules = &rules;
		cur_words = w;
		struct tp_ufile info;
		assert_int_equal(tpn_file(&st, 1, &info), 0);
		uint64_t checked = 0;
		for (uint32_t i = 0; i < t.nrows + t.npages + 1; i++) {
			uint32_t probes[2];
			if (i < t.nrows) {
				probes[0] = t.rows[i].pc;
				probes[1] =
				    i + 1 < t.nrows ? t.rows[i + 1].pc - 1 : t.rows[i].pc + 99999;
			} else if (i < t.nrows + t.npages) {
				probes[0] = probes[1] = t.base + ((i - t.nrows) << TP_UPAGE_SHIFT);
			} else {
				probes[0] = probes[1] = t.rows[0].pc - 1; /* below the table */
			}
			for (int k = 0; k < 2; k++) {
				const struct tp_urow *want = unwtab_find(&t, probes[k]);
				struct tp_urule got;
				int ret = tpn_find_row(&st, w, &info, probes[k], &got);
				if (!want) {
					assert_int_equal(ret, -1);
					continue;
				}
				assert_int_equal(ret, 0);
				assert_int_equal(got.cfa, want->cfa);
				assert_int_equal(got.cfa_off, want->cfa_off);
				assert_int_equal(got.fp, want->fp);
				assert_int_equal(got.fp_off, want->fp_off);
				checked++;
			}
		}
		assert_true(checked >= 2 * (uint64_t)t.nrows);
		cur_table = &sig_table;
		cur_rules = &sig_rules;
		cur_words = sig_words;
		free(w);
		unwtab_rules_free(&rules);
		unwtab_free(&t);
	}
}

static void test_frame_pointer_lost(void **state)
{
	(void)state;
	build_stack();
	tpn_begin(&st, CODE_LO + 0x100, frame_sp(0), 0x20, 0, 0, 0);
	for (int i = 0; i < 4 * NFRAMES && tpn_step(&st); i++)
		;
	assert_int_equal(st.s.uerr, TP_UERR_NOFP);
	assert_int_equal(st.s.nustack, 1);
	build_stack();
	tpn_begin(&st, CODE_LO + 0x100, frame_sp(0), STACK_BASE + 0x100000, 0, 0, 0);
	for (int i = 0; i < 4 * NFRAMES && tpn_step(&st); i++)
		;
	assert_int_equal(st.s.uerr, TP_UERR_NOFP);
}

/* A main thread's start code without CFI whose rbp is no frame pointer
 * (musl's libc_start_main_stage2 keeps argc there): within
 * TPN_START_SLACK of the stack's top the walk ends there cleanly; further
 * down, or where the top is unknown (another thread), it is lost as
 * before. */
static void test_start_code_near_the_stack_top(void **state)
{
	(void)state;
	build_stack();
	tpn_begin(&st, CODE_LO + 0x100, frame_sp(0), 2, 0, 0, 0);
	st.u.top = frame_sp(0) + 0x180;
	for (int i = 0; i < 4 * NFRAMES && tpn_step(&st); i++)
		;
	assert_true(st.u.done);
	assert_int_equal(st.s.uerr, TP_UERR_NONE);
	assert_int_equal(st.s.nustack, 1);
	build_stack();
	tpn_begin(&st, CODE_LO + 0x100, frame_sp(0), 2, 0, 0, 0);
	st.u.top = frame_sp(0) + TPN_START_SLACK + 8;
	for (int i = 0; i < 4 * NFRAMES && tpn_step(&st); i++)
		;
	assert_int_equal(st.s.uerr, TP_UERR_NOFP);
	build_stack();
	tpn_begin(&st, CODE_LO + 0x100, frame_sp(0), 2, 0, 0, 0);
	for (int i = 0; i < 4 * NFRAMES && tpn_step(&st); i++)
		;
	assert_int_equal(st.s.uerr, TP_UERR_NOFP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_start_code_near_the_stack_top),
	    cmocka_unit_test(test_frames_holding_anchors),
	    cmocka_unit_test(test_one_per_frame),
	    cmocka_unit_test(test_anchors_no_frame_holds),
	    cmocka_unit_test(test_none_or_too_many),
	    cmocka_unit_test(test_signal_frame),
	    cmocka_unit_test(test_cfa_on_scratch_registers),
	    cmocka_unit_test(test_code_that_returns_at_once),
	    cmocka_unit_test(test_frame_pointer_lost),
	    cmocka_unit_test(test_row_lookup_in_real_tables),
	};
	return cmocka_run_group_tests(tests, pack_sig_table, free_sig_table);
}
