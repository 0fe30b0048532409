/* cfirules.c - taipan-cfirules: what the native unwinder makes of ELF files'
 * call-frame information (src/proc/unwtab.c), rule by rule.
 *
 *   taipan-cfirules [--strict] FILE...
 *
 * For each file: its table's rows by how they find the CFA and the caller's
 * rbp, then the rows it cannot follow, by why (enum unwtab_why). Those are
 * counted as libdw gives them, before equal neighbours merge; the rest are
 * the table's rows. --strict exits 1 when any file has a row it cannot
 * follow. `make cfi-rules` runs it over the libraries the issue names.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc/unwtab.h"

static const char *const cfa_names[] = {
    [TP_CFA_INVALID] = "invalid", [TP_CFA_SP] = "sp",	     [TP_CFA_FP] = "fp",
    [TP_CFA_PLT] = "plt",	  [TP_CFA_END] = "end",	     [TP_CFA_NOCFI] = "no-cfi",
    [TP_CFA_SIGNAL] = "signal",	  [TP_CFA_FP_DEREF] = "*fp", [TP_CFA_R10] = "r10",
    [TP_CFA_R11] = "r11",	  [TP_CFA_R13] = "r13",
};
#define NCFA (sizeof(cfa_names) / sizeof(cfa_names[0]))

static const char *const fp_names[] = {
    [TP_FP_SAME] = "kept",
    [TP_FP_AT] = "at-cfa",
    [TP_FP_AT_FP] = "at-rbp",
};
#define NFP (sizeof(fp_names) / sizeof(fp_names[0]))

static const char *const why_names[UNWTAB_WHY_N] = {
    [UNWTAB_WHY_RA] = "return-address",	   [UNWTAB_WHY_FP] = "rbp-rule",
    [UNWTAB_WHY_CFA_REG] = "cfa-register", [UNWTAB_WHY_CFA_EXPR] = "cfa-expression",
    [UNWTAB_WHY_RANGE] = "offset-range",   [UNWTAB_WHY_LIBDW] = "undecodable",
};

/* Prints one file's census; returns its rows that cannot be followed, or
 * -1 when it has no table. */
static long census(const char *path)
{
	uint64_t by_cfa[NCFA] = {0}, by_fp[NFP] = {0}, other = 0;
	const char *sep = " (";
	struct unwtab t;
	long bad = 0;
	int err = unwtab_build(path, &t);

	if (err) {
		printf("%s: no table: %s\n", path,
		       err == -ENODATA ? "no call-frame information" : strerror(-err));
		return err == -ENODATA ? 0 : -1;
	}
	for (uint32_t i = 0; i < t.nrows; i++) {
		const struct tp_urow *r = &t.rows[i];

		if (r->cfa < NCFA)
			by_cfa[r->cfa]++;
		else
			other++;
		if (r->fp < NFP)
			by_fp[r->fp]++;
		else
			other++;
	}
	printf("%s: %u rows, %zu bytes, %u FDEs (%u from .debug_frame, %u skipped)%s\n", path,
	       t.nrows, unwtab_bytes(&t), t.fdes, t.from_debug_frame, t.fdes_bad,
	       t.truncated ? ", TRUNCATED" : "");
	printf("  cfa:");
	for (size_t k = 0; k < NCFA; k++)
		if (k != TP_CFA_INVALID)
			printf(" %s %lu", cfa_names[k], (unsigned long)by_cfa[k]);
	printf("\n  rbp:");
	for (size_t k = 0; k < NFP; k++)
		printf(" %s %lu", fp_names[k], (unsigned long)by_fp[k]);
	if (other)
		printf("\n  unknown kinds: %lu", (unsigned long)other);
	printf("\n  cannot follow: %u", t.rows_invalid);
	for (int w = 0; w < UNWTAB_WHY_N; w++)
		if (t.invalid_why[w]) {
			printf("%s %s %u", sep, why_names[w], t.invalid_why[w]);
			sep = ",";
		}
	if (*sep == ',')
		printf(")");
	printf("\n");
	bad = t.rows_invalid;
	unwtab_free(&t);
	return bad;
}

int main(int argc, char **argv)
{
	bool strict = false;
	long total = 0;
	int first = 1, failed = 0;

	if (argc > 1 && !strcmp(argv[1], "--strict")) {
		strict = true;
		first = 2;
	}
	if (first >= argc || !strcmp(argv[1], "--help")) {
		fprintf(stderr,
			"usage: taipan-cfirules [--strict] FILE...\n"
			"  prints each ELF file's native unwind rows by rule kind, and the\n"
			"  rows taipan cannot follow; --strict exits 1 if there are any\n");
		return 2;
	}
	for (int i = first; i < argc; i++) {
		long bad = census(argv[i]);

		if (bad < 0)
			failed = 1;
		else
			total += bad;
	}
	printf("total rows that cannot be followed: %ld\n", total);
	if (failed)
		return 2;
	return strict && total ? 1 : 0;
}
