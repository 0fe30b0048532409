/* unwtab.h - native unwind tables: an ELF file's call-frame information as
 * the compact rows (struct tp_urow) that BPF follows.
 *
 * A table covers [rows[0].pc, ∞) in the file's link-time addresses: each row
 * holds from its pc up to the next row's pc, and the last row (TP_CFA_NOCFI,
 * after the last FDE) holds for everything beyond. Rows are sorted by pc,
 * strictly increasing, and no two adjacent rows are equal. See
 * doc/design/native-stacks.md ("Native unwind tables").
 */
#ifndef TAIPAN_UNWTAB_H
#define TAIPAN_UNWTAB_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "taipan_abi.h"

/* Most rows one table holds (libpython3.12 needs about 100,000): beyond it
 * the table stops, and `truncated` says so. */
#define UNWTAB_MAX_ROWS (4u << 20)

/* Why a row is TP_CFA_INVALID: the rules that the unwinder cannot follow,
 * counted for `make cfi-rules` (tools/cfirules.c) and the tests. */
enum unwtab_why {
	UNWTAB_WHY_RA,	     /* the return address is not saved at CFA - 8 */
	UNWTAB_WHY_FP,	     /* rbp's rule is none of: kept, at CFA + N, at rbp + N */
	UNWTAB_WHY_CFA_REG,  /* the CFA is on a register other than rsp, rbp, r10, r11, r13 */
	UNWTAB_WHY_CFA_EXPR, /* a CFA expression other than *(rbp + N) and the PLT's */
	UNWTAB_WHY_RANGE,    /* an offset too large for the row's fields */
	UNWTAB_WHY_LIBDW,    /* libdw could not give the row: corrupt or unsupported CFI */
	UNWTAB_WHY_N
};

struct unwtab {
	uint32_t base;	 /* rows[0].pc rounded down to 1 << TP_UPAGE_SHIFT */
	uint32_t npages; /* pages up to and including the last row's */
	uint32_t *pages; /* pages[i]: the row covering base + (i << TP_UPAGE_SHIFT) */
	uint32_t nrows;
	struct tp_urow *rows;
	/* What the build met, for --stats and the tests. */
	uint32_t fdes;			    /* FDEs turned into rows */
	uint32_t fdes_bad;		    /* FDEs skipped: undecodable, empty, outside the file */
	uint32_t from_debug_frame;	    /* of fdes, those taken from .debug_frame */
	uint32_t rows_invalid;		    /* TP_CFA_INVALID rows (before merging) */
	uint32_t invalid_why[UNWTAB_WHY_N]; /* of rows_invalid, by enum unwtab_why */
	uint32_t truncated;		    /* 1 when a limit stopped the build: a partial table */
};

/* Builds the table of the ELF file at path. Returns 0 and fills *out (free it
 * with unwtab_free()), or: -ENOENT/-EACCES/... from open(2); -ENOEXEC when it
 * is not a regular file holding a 64-bit x86-64 ET_EXEC/ET_DYN ELF, or its
 * segments reach 4 GiB; -ENODATA when it has no usable CFI at all; -ENOMEM.
 * Corrupt CFI gives an error or a partial table (invalid rows, a counter),
 * never a crash or a hang. The file is opened with safe_open() (a regular
 * file only) and read with pread, never mapped: truncated while it is read,
 * it fails a read, never raises SIGBUS. */
int unwtab_build(const char *path, struct unwtab *out);
/* The same from a descriptor open for reading, which it closes. */
int unwtab_build_fd(int fd, struct unwtab *out);

/* The same with every row interpreted by libdw, none by taipan's own
 * one-pass interpreter: slower (about 5x), for the tests that check the two
 * agree. */
int unwtab_build_ref(const char *path, struct unwtab *out);

/* The same from an ELF image in memory (copied; image is not kept). */
int unwtab_build_mem(const void *image, size_t len, struct unwtab *out);

/* The rules that packed tables share (struct tp_urule), each once: the
 * index of a rule is its place in v, which never changes. Zeroed: empty. */
struct unwtab_rules {
	struct tp_urule *v;
	uint32_t n, cap;
	uint64_t *keys; /* open addressing over the rules' 8 bytes; 0: free */
	uint32_t *ids;
	uint32_t hcap;
};

/* The index of rule (that of row r) in rules, added if new: 0 with *id
 * set, -ENOSPC when rules holds TP_MAX_URULES already, or -ENOMEM. */
int unwtab_rule_id(struct unwtab_rules *rules, const struct tp_urow *r, uint32_t *id);
void unwtab_rules_free(struct unwtab_rules *rules);

/* The table as BPF holds it (struct tp_ufile), as 32-bit words: the page
 * index (two words a page), then a word per row, naming its rule in rules
 * (which gains the rules it lacked), then a zero word if needed to make
 * the count even (whole elements). A malloc'd array of unwtab_words(t)
 * words, or NULL with errno ENOMEM, or ENOSPC when rules is full. */
uint32_t *unwtab_pack(const struct unwtab *t, struct unwtab_rules *rules);
static inline uint32_t unwtab_words(const struct unwtab *t)
{
	return (2 * t->npages + t->nrows + 1) & ~1u;
}

/* Frees what a build allocated and zeroes *t. Accepts a zeroed table. */
void unwtab_free(struct unwtab *t);

/* Bytes of the packed rows and page index: what BPF holds of the table,
 * its rules aside (shared, and few). */
size_t unwtab_bytes(const struct unwtab *t);

/* The row covering pc: the last row whose pc is <= pc, found through the
 * page index then a binary search inside the page's rows. NULL below the
 * first row (or for an empty table). This is the reference the BPF lookup
 * mirrors. */
const struct tp_urow *unwtab_find(const struct unwtab *t, uint32_t pc);

#endif /* TAIPAN_UNWTAB_H */
