/* fuzz_unwtab.c - libFuzzer target: unwind tables (unwtab.h) from an ELF
 * image whose bytes are the input.
 *
 * Whole-image mutations mostly break the ELF headers, which taipan refuses
 * at once. So a custom mutator spends most of its mutations inside the
 * image's .eh_frame, .eh_frame_hdr and .debug_frame, keeping their size and
 * place: corrupt CFI in an otherwise valid file, what libdw and our FDE
 * decoder must survive. Every table built is checked against its promises
 * (sorted, merged, page index exact).
 */
#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proc/unwtab.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static volatile uint32_t sink;

/* The file range of one of the CFI sections of the image (the n-th found,
 * modulo their count), or 0. A bounded walk of the section headers. */
static size_t cfi_range(const uint8_t *d, size_t size, unsigned int pick, size_t *off)
{
	static const char *const names[] = {".eh_frame", ".eh_frame_hdr", ".debug_frame"};
	size_t offs[8], lens[8], n = 0;
	const Elf64_Shdr *str;
	Elf64_Ehdr eh;

	if (size < sizeof(eh))
		return 0;
	memcpy(&eh, d, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    eh.e_shoff > size || eh.e_shnum > (size - eh.e_shoff) / sizeof(Elf64_Shdr) ||
	    eh.e_shstrndx >= eh.e_shnum || eh.e_shoff % 8)
		return 0;
	str = (const Elf64_Shdr *)(d + eh.e_shoff) + eh.e_shstrndx;
	if (str->sh_offset > size || str->sh_size > size - str->sh_offset)
		return 0;
	for (unsigned int i = 0; i < eh.e_shnum && n < 8; i++) {
		const Elf64_Shdr *sh = (const Elf64_Shdr *)(d + eh.e_shoff) + i;

		if (sh->sh_type != SHT_PROGBITS || sh->sh_offset > size ||
		    sh->sh_size > size - sh->sh_offset || !sh->sh_size ||
		    sh->sh_name >= str->sh_size)
			continue;
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
			size_t len = strlen(names[k]) + 1;

			if (str->sh_size - sh->sh_name >= len &&
			    !memcmp(d + str->sh_offset + sh->sh_name, names[k], len)) {
				offs[n] = sh->sh_offset;
				lens[n++] = sh->sh_size;
			}
		}
	}
	if (!n)
		return 0;
	*off = offs[pick % n];
	return lens[pick % n];
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	size_t off, len;

	/* Four mutations in five go to the CFI, in place. */
	if (seed % 5 && (len = cfi_range(data, size, seed / 5, &off))) {
		LLVMFuzzerMutate(data + off, len, len);
		return size;
	}
	return LLVMFuzzerMutate(data, size, max_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct unwtab t;
	uint32_t j = 0;

	if (unwtab_build_mem(data, size, &t))
		return 0;
	if (!t.nrows || !t.npages || t.base > t.rows[0].pc)
		abort();
	for (uint32_t i = 1; i < t.nrows; i++)
		if (t.rows[i - 1].pc >= t.rows[i].pc ||
		    (t.rows[i - 1].cfa == t.rows[i].cfa &&
		     t.rows[i - 1].cfa_off == t.rows[i].cfa_off &&
		     t.rows[i - 1].fp == t.rows[i].fp && t.rows[i - 1].fp_off == t.rows[i].fp_off))
			abort();
	for (uint32_t p = 0; p < t.npages; p++) {
		uint32_t at = t.base + (p << TP_UPAGE_SHIFT);

		while (j + 1 < t.nrows && t.rows[j + 1].pc <= at)
			j++;
		if (t.pages[p] != j)
			abort();
	}
	for (uint32_t i = 0; i < t.nrows; i++) {
		if (unwtab_find(&t, t.rows[i].pc) != &t.rows[i] ||
		    (i && unwtab_find(&t, t.rows[i].pc - 1) != &t.rows[i - 1]))
			abort();
		sink += t.rows[i].cfa;
	}
	if (t.rows[0].pc && unwtab_find(&t, t.rows[0].pc - 1))
		abort();
	sink += unwtab_find(&t, UINT32_MAX)->cfa + (uint32_t)unwtab_bytes(&t);
	unwtab_free(&t);
	return 0;
}
