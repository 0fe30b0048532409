/* test_unwtab.c - unit tests for the native unwind tables, on real libraries
 * and executables, against binutils' `readelf --debug-dump=frames-interp`
 * as an independent decoder of the same CFI. */
#include <errno.h>
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "proc/elfsym.h"
#include "proc/unwtab.h"

#ifndef LIBC
#define LIBC "/usr/lib/x86_64-linux-gnu/libc.so.6"
#endif
#ifndef EXE311_DEBIAN
#define EXE311_DEBIAN "/usr/bin/python3.11"
#endif
#ifndef LIBPY312_GLOB
#define LIBPY312_GLOB "/root/.pyenv/versions/3.12*/lib/libpython3.12.so.1.0"
#endif

/* Missing files skip, except on CI (see test_elfsym.c). */
static void need_file(const char *path)
{
	const char *ci = getenv("CI");

	if (path && access(path, R_OK) == 0)
		return;
	if (ci && !strcmp(ci, "true"))
		fail_msg("%s: missing (CI=true, so this is a failure)", path ? path : "file");
	print_message("skipping: %s not found\n", path ? path : "file");
	skip();
}

static char *libpy312(void)
{
	static char path[4096];
	glob_t g;

	if (glob(LIBPY312_GLOB, 0, NULL, &g) || !g.gl_pathc)
		return NULL;
	snprintf(path, sizeof(path), "%s", g.gl_pathv[0]);
	globfree(&g);
	return path;
}

static char *fixture(const char *name)
{
	const char *dir = getenv("TAIPAN_FIXTURES");
	static char path[4096];

	if (!dir || !*dir)
		fail_msg("TAIPAN_FIXTURES is not set; run through 'make unit', which builds "
			 "the fixtures and sets it");
	snprintf(path, sizeof(path), "%s/unwtab/%s", dir, name);
	if (access(path, R_OK))
		fail_msg("%s: missing; 'make unit' builds it", path);
	return path;
}

static void build_ok(const char *path, struct unwtab *t)
{
	int err;

	need_file(path);
	err = unwtab_build(path, t);
	if (err)
		fail_msg("%s: unwtab_build: %s", path, strerror(-err));
	assert_int_equal(t->truncated, 0);
}

/* The table as BPF gets it (unwtab_pack): the page index as defined, and
 * one word per row with its page offset and a rule equal to the row's.
 * test_native_walk.c holds the walker's lookup in it to unwtab_find(). */
static void check_entries(const struct unwtab *t)
{
	struct unwtab_rules rules = {0};
	uint32_t *w = unwtab_pack(t, &rules);
	const uint32_t *rows;

	assert_non_null(w);
	rows = w + 2 * t->npages;
	assert_int_equal(w[2 * t->npages - 1], t->nrows);
	for (uint32_t p = 0; p < t->npages; p++) {
		uint32_t first = t->base + (p << TP_UPAGE_SHIFT), lo = w[2 * p];

		assert_true(lo <= w[2 * p + 1]);
		assert_true(p + 1 == t->npages || w[2 * p + 1] == w[2 * p + 2]);
		assert_true(lo == t->nrows || t->rows[lo].pc >= first);
		assert_true(!lo || t->rows[lo - 1].pc < first);
	}
	for (uint32_t i = 0; i < t->nrows; i++) {
		const struct tp_urow *r = &t->rows[i];
		const struct tp_urule *u = &rules.v[rows[i] & TP_URULE_MASK];

		assert_int_equal(rows[i] >> TP_URULE_BITS,
				 (r->pc - t->base) & ((1u << TP_UPAGE_SHIFT) - 1));
		assert_true(u->cfa == r->cfa && u->cfa_off == r->cfa_off && u->fp == r->fp &&
			    u->fp_off == r->fp_off);
	}
	/* Few rules: libc's 28,000 rows name a few hundred. */
	assert_true(rules.n <= t->nrows);
	free(w);
	unwtab_rules_free(&rules);
}

/* The table's own promises: rows strictly increasing and merged, the page
 * index as defined, and unwtab_find() at every row boundary. */
static void check_invariants(const struct unwtab *t)
{
	check_entries(t);
	assert_true(t->nrows > 0);
	assert_int_equal(t->base, t->rows[0].pc & ~((1u << TP_UPAGE_SHIFT) - 1));
	assert_int_equal(t->npages, ((t->rows[t->nrows - 1].pc - t->base) >> TP_UPAGE_SHIFT) + 1);
	assert_int_equal(t->rows[t->nrows - 1].cfa, TP_CFA_NOCFI);
	for (uint32_t i = 1; i < t->nrows; i++) {
		const struct tp_urow *a = &t->rows[i - 1], *b = &t->rows[i];

		assert_true(a->pc < b->pc);
		assert_false(a->cfa == b->cfa && a->cfa_off == b->cfa_off && a->fp == b->fp &&
			     a->fp_off == b->fp_off);
	}
	for (uint32_t p = 0, j = 0; p < t->npages; p++) {
		uint32_t at = t->base + (p << TP_UPAGE_SHIFT);

		while (j + 1 < t->nrows && t->rows[j + 1].pc <= at)
			j++;
		assert_int_equal(t->pages[p], j);
		if (at >= t->rows[0].pc)
			assert_ptr_equal(unwtab_find(t, at), &t->rows[j]);
	}
	for (uint32_t i = 0; i < t->nrows; i++) {
		assert_ptr_equal(unwtab_find(t, t->rows[i].pc), &t->rows[i]);
		if (i)
			assert_ptr_equal(unwtab_find(t, t->rows[i].pc - 1), &t->rows[i - 1]);
	}
	if (t->rows[0].pc)
		assert_null(unwtab_find(t, t->rows[0].pc - 1));
	assert_ptr_equal(unwtab_find(t, UINT32_MAX), &t->rows[t->nrows - 1]);
	assert_ptr_equal(unwtab_find(t, t->rows[t->nrows - 1].pc), &t->rows[t->nrows - 1]);
}

/* --- the readelf oracle ---------------------------------------------------------- */

struct rstate {
	char cfa[32], rbp[32], ra[32];
	bool signal; /* its CIE's augmentation has an 'S': a signal frame */
};

struct range {
	uint64_t lo, hi;
};

static int range_cmp(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

struct tally {
	size_t fdes, rows, checked, mism, plt, end, fp_at, cfa_fp, invalid, gaps, signal;
	size_t fp_at_fp, cfa_deref, cfa_reg; /* realigned stacks, probe loops */
	uint64_t eh_lo, eh_hi;		     /* .eh_frame coverage, for .debug_frame FDEs */
};

/* What our row must be for readelf's state s. */
static bool expect_matches(const struct rstate *s, const struct tp_urow *r, struct tally *n)
{
	long v;
	char *end;

	if (s->signal) {
		n->signal++;
		return r->cfa == TP_CFA_SIGNAL;
	}
	if (!strcmp(s->ra, "u")) {
		n->end++;
		return r->cfa == TP_CFA_END;
	}
	if (strcmp(s->ra, "c-8"))
		return r->cfa == TP_CFA_INVALID;
	if (!s->rbp[0] || !strcmp(s->rbp, "u") || !strcmp(s->rbp, "s")) {
		if (r->fp != TP_FP_SAME)
			return false;
	} else if (s->rbp[0] == 'c' && (s->rbp[1] == '-' || s->rbp[1] == '+')) {
		v = strtol(s->rbp + 1, &end, 10);
		if (*end || r->fp != TP_FP_AT || r->fp_off != v)
			return false;
		n->fp_at++;
	} else if (!strcmp(s->rbp, "exp")) {
		/* readelf prints no expression: test_realign checks the shapes. */
		if (r->fp != TP_FP_AT_FP && r->cfa != TP_CFA_INVALID)
			return false;
		n->fp_at_fp += r->fp == TP_FP_AT_FP;
	} else {
		return r->cfa == TP_CFA_INVALID;
	}
	if (!strcmp(s->cfa, "exp")) {
		if (r->cfa == TP_CFA_PLT) {
			n->plt++;
			return r->cfa_off == 8 && (r->fp_off == 10 || r->fp_off == 11);
		}
		n->cfa_deref += r->cfa == TP_CFA_FP_DEREF;
		return r->cfa == TP_CFA_FP_DEREF || r->cfa == TP_CFA_INVALID;
	}
	static const struct {
		const char *reg;
		uint8_t cfa;
	} regs[] = {{"rsp+", TP_CFA_SP},
		    {"rbp+", TP_CFA_FP},
		    {"r10+", TP_CFA_R10},
		    {"r11+", TP_CFA_R11},
		    {"r13+", TP_CFA_R13}};
	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++) {
		if (strncmp(s->cfa, regs[i].reg, 4))
			continue;
		v = strtol(s->cfa + 4, &end, 10);
		if (*end)
			return false;
		n->cfa_fp += regs[i].cfa == TP_CFA_FP;
		n->cfa_reg += i >= 2;
		return r->cfa == regs[i].cfa && r->cfa_off == v;
	}
	return r->cfa == TP_CFA_INVALID;
}

static void check_range(const struct unwtab *t, uint64_t lo, uint64_t hi, const struct rstate *s,
			struct tally *n)
{
	const uint64_t probe[2] = {lo, hi - 1};

	if (lo >= hi)
		return;
	n->rows++;
	for (int i = 0; i < 2; i++) {
		const struct tp_urow *r = unwtab_find(t, (uint32_t)probe[i]);

		n->checked++;
		if (r && r->cfa == TP_CFA_INVALID)
			n->invalid++;
		if (r && expect_matches(s, r, n))
			continue;
		if (n->mism++ < 10)
			print_message("mismatch at %#lx: readelf cfa=%s rbp=%s ra=%s; table %s\n",
				      (unsigned long)probe[i], s->cfa, s->rbp[0] ? s->rbp : "-",
				      s->ra, r ? "" : "(none)");
		if (r && n->mism <= 10)
			print_message("  row pc=%#x cfa=%u/%d fp=%u/%d\n", r->pc, r->cfa,
				      r->cfa_off, r->fp, r->fp_off);
	}
}

/* Runs readelf on path and checks every row of every FDE it prints (of
 * .debug_frame, only those .eh_frame does not cover) against t, plus a
 * TP_CFA_NOCFI row in each gap between .eh_frame FDEs. */
static void check_against_readelf(const char *path, const struct unwtab *t, struct tally *n)
{
	char cmd[4200], line[1024], cols[16][32];
	struct rstate cie[64], cur = {0}, init = {0};
	unsigned long cie_off[64];
	size_t ncie = 0, ncols = 0, nrows_fde = 0;
	uint64_t fde_lo = 0, fde_hi = 0, row_lo = 0, prev_end = 0;
	bool in_fde = false, in_cie = false, debug = false, have_row = false;
	struct range *eh = calloc(1 << 20, sizeof(*eh));
	size_t neh = 0;
	FILE *f;

	assert_non_null(eh);

	memset(n, 0, sizeof(*n));
	n->eh_lo = UINT64_MAX;
	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp '%s' 2>/dev/null", path);
	f = popen(cmd, "r");
	assert_non_null(f);
	/* A trailing blank line closes the last entry. */
	for (bool eof = false; !eof;) {
		unsigned long off, lo, hi, cieptr;
		char kind[8];

		if (!fgets(line, sizeof(line), f)) {
			eof = true;
			strcpy(line, "\n");
		}
		if (strstr(line, "Contents of the .debug_frame section"))
			debug = true;
		if (line[0] == '\n' || strstr(line, "Contents of")) {
			/* End of an entry. */
			if (in_fde) {
				if (!nrows_fde) {
					/* No rows printed: the CIE's state holds throughout. */
					row_lo = fde_lo;
					cur = init;
					have_row = true;
				}
				if (have_row)
					check_range(t, row_lo, fde_hi, &cur, n);
			}
			in_fde = in_cie = have_row = false;
			continue;
		}
		if (sscanf(line, "%lx %*x %lx %7s", &off, &cieptr, kind) == 3 &&
		    !strcmp(kind, "CIE")) {
			in_cie = true;
			if (ncie < 64) {
				const char *aug = strchr(line, '"');
				const char *aug_end = aug ? strchr(aug + 1, '"') : NULL;
				cie_off[ncie] = off;
				memset(&cie[ncie], 0, sizeof(cie[ncie]));
				cie[ncie].signal =
				    aug_end && memchr(aug, 'S', (size_t)(aug_end - aug));
				ncie++;
			}
			continue;
		}
		if (sscanf(line, "%lx %*x %*x FDE cie=%lx pc=%lx..%lx", &off, &cieptr, &lo, &hi) ==
		    4) {
			in_fde = true;
			nrows_fde = 0;
			have_row = false;
			fde_lo = lo;
			fde_hi = hi;
			memset(&init, 0, sizeof(init));
			for (size_t i = 0; i < ncie; i++)
				if (cie_off[i] == cieptr)
					init = cie[i];
			if (debug) {
				/* Only the parts .eh_frame leaves: here, outside its span. */
				if (lo < n->eh_hi && hi > n->eh_lo)
					in_fde = false;
				else if (lo < hi && neh < (1 << 20))
					eh[neh++] = (struct range){lo, hi};
			} else if (lo < hi) {
				n->fdes++;
				if (neh < (1 << 20))
					eh[neh++] = (struct range){lo, hi};
				if (lo < n->eh_lo)
					n->eh_lo = lo;
				if (hi > n->eh_hi)
					n->eh_hi = hi;
			}
			if (debug && in_fde)
				n->fdes++;
			continue;
		}
		if (strstr(line, "LOC") && strstr(line, "CFA")) {
			char *tok, *save;

			ncols = 0;
			for (tok = strtok_r(line, " \n", &save); tok && ncols < 16;
			     tok = strtok_r(NULL, " \n", &save))
				snprintf(cols[ncols++], sizeof(cols[0]), "%s", tok);
			continue;
		}
		if ((in_fde || in_cie) && ncols) {
			struct rstate s = {0};
			char *tok, *save;
			unsigned long loc;
			size_t c = 0;

			/* A register rule prints as "r10 (r10)": one column. */
			for (tok = strtok_r(line, " \n", &save); tok && c < ncols;
			     tok = strtok_r(NULL, " \n", &save)) {
				if (tok[0] == '(')
					continue;
				if (c == 0)
					loc = strtoul(tok, NULL, 16);
				else if (!strcmp(cols[c], "CFA"))
					snprintf(s.cfa, sizeof(s.cfa), "%s", tok);
				else if (!strcmp(cols[c], "rbp"))
					snprintf(s.rbp, sizeof(s.rbp), "%s", tok);
				else if (!strcmp(cols[c], "ra"))
					snprintf(s.ra, sizeof(s.ra), "%s", tok);
				c++;
			}
			if (c == 0)
				continue;
			if (in_cie) {
				if (ncie) {
					s.signal = cie[ncie - 1].signal;
					cie[ncie - 1] = s;
				}
				continue;
			}
			s.signal = init.signal;
			if (have_row)
				check_range(t, row_lo, loc, &cur, n);
			row_lo = loc;
			cur = s;
			have_row = true;
			nrows_fde++;
		}
	}
	/* readelf exits 1 on libc.so.6 without a word: what it printed is what counts
	 * (the callers check how many FDEs it listed). */
	pclose(f);
	/* Between the FDEs, and after the last: TP_CFA_NOCFI. */
	qsort(eh, neh, sizeof(eh[0]), range_cmp);
	for (size_t i = 0; i < neh; i++) {
		if (eh[i].hi > prev_end)
			prev_end = eh[i].hi;
		if (i + 1 < neh && eh[i + 1].lo <= prev_end)
			continue;
		const struct tp_urow *r = unwtab_find(t, (uint32_t)prev_end);

		n->gaps++;
		if (!r || r->cfa != TP_CFA_NOCFI)
			fail_msg("%s: no NOCFI row at %#lx, after the FDEs up to there", path,
				 (unsigned long)prev_end);
	}
	free(eh);
}

/* Checks path's table against readelf; returns the rows it checked in
 * signal frames. */
static struct tally oracle(const char *path, size_t min_fdes)
{
	struct unwtab t;
	struct tally n;

	build_ok(path, &t);
	check_invariants(&t);
	check_against_readelf(path, &t, &n);
	print_message("%s: %u rows, %zu bytes; readelf: %zu FDEs, %zu rows (%zu probes), %zu "
		      "gaps, %zu PLT, %zu end, %zu signal, %zu rbp saved, %zu CFA=rbp, %zu "
		      "CFA=*(rbp+N), %zu CFA=r10/r11/r13, %zu rbp at rbp+N, %zu invalid; %zu "
		      "mismatches\n",
		      path, t.nrows, unwtab_bytes(&t), n.fdes, n.rows, n.checked, n.gaps, n.plt,
		      n.end, n.signal, n.fp_at, n.cfa_fp, n.cfa_deref, n.cfa_reg, n.fp_at_fp,
		      n.invalid, n.mism);
	assert_int_equal(n.mism, 0);
	assert_true(n.fdes >= min_fdes);
	assert_true(n.fdes <= t.fdes + t.fdes_bad);
	unwtab_free(&t);
	return n;
}

static void test_libc_oracle(void **state)
{
	(void)state;
	/* Its __restore_rt, the signal trampoline, is a signal frame. */
	assert_true(oracle(LIBC, 1000).signal > 0);
}

static void test_libpython312_oracle(void **state)
{
	(void)state;
	oracle(libpy312(), 1000);
}

static void test_debian_python311_oracle(void **state)
{
	(void)state;
	oracle(EXE311_DEBIAN, 1000);
}

/* Whether readelf prints, in path's CFI, a line holding what, then
 * "(DW_OP_breg6 (rbp): N" for N = off. */
static bool readelf_has(const char *path, const char *what, long off)
{
	char cmd[4200], line[512], want[64];
	bool found = false;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames '%s' 2>/dev/null", path);
	snprintf(want, sizeof(want), "(DW_OP_breg6 (rbp): %ld", off);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, what) && strstr(line, want))
			found = true;
	pclose(f);
	return found;
}

/* realign.so: GCC's realigned stack through r10 (realign_call), one through
 * r13 (drap13.S) and a stack-clash probe loop on r11 (big_frame). Every row
 * is followed, as readelf reads it; and each CFA = *(rbp + N) and rbp saved
 * at rbp + N has the N of an expression that readelf prints. */
static void test_realign(void **state)
{
	const char *path = fixture("realign.so");
	struct tally n = oracle(path, 4);
	bool kinds[16] = {false};
	struct unwtab t;

	(void)state;
	assert_true(n.cfa_deref > 0 && n.fp_at_fp > 0 && n.cfa_reg > 0);
	assert_int_equal(n.invalid, 0);
	build_ok(path, &t);
	assert_int_equal(t.rows_invalid, 0);
	for (uint32_t i = 0; i < t.nrows; i++) {
		const struct tp_urow *r = &t.rows[i];

		kinds[r->cfa & 15] = true;
		if (r->cfa == TP_CFA_FP_DEREF)
			assert_true(readelf_has(path, "DW_CFA_def_cfa_expression", r->cfa_off));
		if (r->fp == TP_FP_AT_FP)
			assert_true(readelf_has(path, "DW_CFA_expression: r6 (rbp)", r->fp_off));
	}
	assert_true(kinds[TP_CFA_FP_DEREF] && kinds[TP_CFA_R10] && kinds[TP_CFA_R11] &&
		    kinds[TP_CFA_R13]);
	unwtab_free(&t);
}

/* --- particular rows --------------------------------------------------------------- */

/* _start leaves the return address undefined: the outermost frame. */
static void test_start_is_end(void **state)
{
	struct unwtab t;
	const struct tp_urow *r;
	uint64_t entry;
	FILE *f;
	char cmd[256];

	(void)state;
	build_ok(EXE311_DEBIAN, &t);
	snprintf(cmd, sizeof(cmd), "readelf -h '%s'", EXE311_DEBIAN);
	f = popen(cmd, "r");
	assert_non_null(f);
	entry = 0;
	for (char line[256]; fgets(line, sizeof(line), f);)
		sscanf(line, " Entry point address: %lx", &entry);
	pclose(f);
	assert_true(entry > 0);
	r = unwtab_find(&t, (uint32_t)entry);
	assert_non_null(r);
	assert_int_equal(r->cfa, TP_CFA_END);
	unwtab_free(&t);
}

/* libc's .plt: PLT0 pushes twice, then each 16-byte entry's CFA depends on
 * how far into it rip is (threshold 11); the gap after .plt.got has no FDE. */
static void test_plt_and_gap(void **state)
{
	struct elf_file *ef;
	struct unwtab t;
	const struct tp_urow *r;
	uint64_t plt, pltsz;

	(void)state;
	build_ok(LIBC, &t);
	assert_int_equal(elf_file_open(LIBC, &ef), 0);
	assert_int_equal(elf_file_section(ef, ".plt", &plt, &pltsz), 0);
	elf_file_close(ef);
	r = unwtab_find(&t, (uint32_t)plt);
	assert_int_equal(r->cfa, TP_CFA_SP);
	assert_int_equal(r->cfa_off, 16);
	for (uint64_t pc = plt + 16; pc < plt + pltsz; pc += 7) {
		r = unwtab_find(&t, (uint32_t)pc);
		assert_int_equal(r->cfa, TP_CFA_PLT);
		assert_int_equal(r->cfa_off, 8);
		assert_int_equal(r->fp_off, 11);
		assert_int_equal(r->fp, TP_FP_SAME);
	}
	/* Something lies between the PLT's FDEs and the first function's. */
	r = unwtab_find(&t, (uint32_t)(plt + pltsz));
	assert_non_null(r);
	unwtab_free(&t);
}

/* .eh_frame and .debug_frame in one file, frame pointers and all. */
static void test_debug_frame(void **state)
{
	const char *path = fixture("mixed.so");
	struct unwtab t;
	struct tally n;

	(void)state;
	build_ok(path, &t);
	check_invariants(&t);
	assert_true(t.from_debug_frame >= 2);
	assert_true(t.fdes > t.from_debug_frame);
	check_against_readelf(path, &t, &n);
	assert_int_equal(n.mism, 0);
	assert_true(n.fp_at > 0);
	assert_true(n.cfa_fp > 0);
	assert_true(n.fdes >= 5);
	unwtab_free(&t);
}

/* The same bytes from memory give the same table. */
static void test_build_mem(void **state)
{
	const char *path = fixture("mixed.so");
	struct unwtab a, b;
	char *buf;
	long len;
	FILE *f;

	(void)state;
	build_ok(path, &a);
	f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = malloc(len);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, len, f), (size_t)len);
	fclose(f);
	assert_int_equal(unwtab_build_mem(buf, len, &b), 0);
	assert_int_equal(a.nrows, b.nrows);
	assert_memory_equal(a.rows, b.rows, a.nrows * sizeof(*a.rows));
	unwtab_free(&b);
	/* Truncated: an error or a table, never a crash. */
	for (long cut = 0; cut < len; cut += len / 64 + 1) {
		int err = unwtab_build_mem(buf, cut, &b);

		assert_true(err == 0 || err == -ENOEXEC || err == -ENODATA);
		unwtab_free(&b);
	}
	free(buf);
	unwtab_free(&a);
}

static void test_errors(void **state)
{
	struct unwtab t;

	(void)state;
	assert_int_equal(unwtab_build(fixture("nocfi.so"), &t), -ENODATA);
	assert_int_equal(t.nrows, 0);
	assert_int_equal(unwtab_build("/etc/passwd", &t), -ENOEXEC);
	assert_int_equal(unwtab_build("/nonexistent/unwtab", &t), -ENOENT);
	assert_int_equal(unwtab_build("/", &t), -ENOEXEC);
	assert_int_equal(unwtab_build_mem("\177ELF", 4, &t), -ENOEXEC);
	assert_null(unwtab_find(&t, 0x1000));
	unwtab_free(&t);
}

/* The one-pass interpreter (unwtab_build) and libdw row by row
 * (unwtab_build_ref) give the same table: every row, counter and page of
 * real libraries and executables, PIE, static and shared, several compilers'
 * output. Where libdw's quadratic cost stopped the reference (truncated),
 * the reference's rows must be the start of the full table. */
static void test_one_pass_matches_libdw(void **state)
{
	const char *globs[] = {LIBC,
			       EXE311_DEBIAN,
			       "/root/.pyenv/versions/*/lib/libpython*.so.1.0",
			       "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
			       "/usr/lib/x86_64-linux-gnu/libm.so.6",
			       "/usr/lib/x86_64-linux-gnu/libcrypto.so.3",
			       "/usr/lib/x86_64-linux-gnu/libelf.so.1",
			       "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
			       "/usr/bin/bash"};
	size_t compared = 0;
	(void)state;

	need_file(LIBC);
	for (size_t gi = 0; gi < sizeof(globs) / sizeof(globs[0]); gi++) {
		glob_t g;

		if (glob(globs[gi], 0, NULL, &g))
			continue;
		for (size_t i = 0; i < g.gl_pathc; i++) {
			const char *path = g.gl_pathv[i];
			struct unwtab a, b;

			if (unwtab_build(path, &a))
				continue;
			assert_int_equal(unwtab_build_ref(path, &b), 0);
			check_invariants(&a);
			if (b.truncated) {
				print_message("%s: libdw stopped at %u rows of %u\n", path, b.nrows,
					      a.nrows);
				assert_true(b.nrows <= a.nrows);
				assert_memory_equal(a.rows, b.rows,
						    (b.nrows - 1) * sizeof(*b.rows));
			} else {
				if (a.nrows != b.nrows)
					fail_msg("%s: %u rows, libdw %u", path, a.nrows, b.nrows);
				assert_memory_equal(a.rows, b.rows, a.nrows * sizeof(*a.rows));
				assert_memory_equal(a.pages, b.pages, a.npages * sizeof(*a.pages));
				assert_int_equal(a.fdes, b.fdes);
				assert_int_equal(a.fdes_bad, b.fdes_bad);
				assert_int_equal(a.rows_invalid, b.rows_invalid);
				assert_int_equal(a.truncated, 0);
			}
			unwtab_free(&a);
			unwtab_free(&b);
			compared++;
		}
		globfree(&g);
	}
	print_message("compared %zu files\n", compared);
	assert_true(compared >= 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_libc_oracle),
	    cmocka_unit_test(test_one_pass_matches_libdw),
	    cmocka_unit_test(test_libpython312_oracle),
	    cmocka_unit_test(test_debian_python311_oracle),
	    cmocka_unit_test(test_realign),
	    cmocka_unit_test(test_start_is_end),
	    cmocka_unit_test(test_plt_and_gap),
	    cmocka_unit_test(test_debug_frame),
	    cmocka_unit_test(test_build_mem),
	    cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
