/* ksyms.h - kernel symbols from /proc/kallsyms. */
#ifndef TAIPAN_KSYMS_H
#define TAIPAN_KSYMS_H

#include <stdint.h>

struct ksyms;

/* Loads the text symbols (types t, T, w, W) of /proc/kallsyms (or of path
 * when not NULL, for tests). Returns a table to free with ksyms_free(), or
 * NULL with errno set: EPERM when the kernel hides addresses (all zero, see
 * kernel.kptr_restrict), ENOENT when there is no text symbol, ENOMEM, or
 * errno from open(2)/read(2). Where several symbols share an address, one is
 * kept: global before local before weak, then the first listed. */
struct ksyms *ksyms_load(const char *path);
/* Frees it. Accepts NULL. */
void ksyms_free(struct ksyms *ks);

/* The symbol containing addr (the greatest start <= addr), or NULL when addr
 * is below the first symbol. kallsyms has no sizes, so an address past the
 * last symbol still matches it. *off gets addr - start when off is not NULL.
 * The name (without any "[module]") is owned by ks. O(log n). */
const char *ksyms_lookup(const struct ksyms *ks, uint64_t addr, uint64_t *off);

#endif /* TAIPAN_KSYMS_H */
