/* ksyms.h - kernel symbols from /proc/kallsyms. */
#ifndef TAIPAN_KSYMS_H
#define TAIPAN_KSYMS_H

#include <stdint.h>

struct ksyms;

/* Loads /proc/kallsyms (or path, for tests). Returns NULL with errno set on
 * failure; a kernel that hides addresses (all zero) gives -EPERM. */
struct ksyms *ksyms_load(const char *path);
void ksyms_free(struct ksyms *ks);

/* The symbol containing addr (the greatest start <= addr), or NULL. *off gets
 * addr - start when off is not NULL. The name is owned by ks. */
const char *ksyms_lookup(const struct ksyms *ks, uint64_t addr, uint64_t *off);

#endif /* TAIPAN_KSYMS_H */
