/* elfsym.h - what taipan reads from ELF files, through libelf. */
#ifndef TAIPAN_ELFSYM_H
#define TAIPAN_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

struct elf_file;

/* Opens an ELF file for reading. Returns 0 and *out, -ENOENT/-EACCES/… from
 * open(2), or -ENOEXEC when it is not a readable 64-bit little-endian ELF.
 * Never executes anything. */
int elf_file_open(const char *path, struct elf_file **out);
/* Closes it. Accepts NULL. */
void elf_file_close(struct elf_file *ef);

/* Looks up a symbol by exact name: .dynsym first, then .symtab (absent in
 * stripped files). Returns 0 with its value (a link-time virtual address) and
 * size, or -ENOENT. TLS symbols are returned as their st_value too. */
int elf_file_symbol(struct elf_file *ef, const char *name, uint64_t *value, uint64_t *size);

/* Looks up a section by name. Returns 0 with its address and size, or -ENOENT. */
int elf_file_section(struct elf_file *ef, const char *name, uint64_t *addr, uint64_t *size);

/* Copies len bytes at link-time virtual address vaddr from the file's
 * contents (a section with file data, not NOBITS). Returns 0, or -ENOENT when
 * the range is not wholly backed by the file. */
int elf_file_read(struct elf_file *ef, uint64_t vaddr, void *buf, size_t len);

/* The lowest p_vaddr of a PT_LOAD segment, rounded down to its p_align; the
 * load bias of a mapped file is (address of its offset-0 mapping) - this. */
uint64_t elf_file_base_vaddr(struct elf_file *ef);

/* The DT_SONAME, or NULL. Owned by ef. */
const char *elf_file_soname(struct elf_file *ef);

/* Whether DT_NEEDED names a library whose name starts with prefix; if so and
 * name is not NULL, *name points at it (owned by ef). */
int elf_file_needs(struct elf_file *ef, const char *prefix, const char **name);

/* The GNU build-id as lowercase hex into buf (size >= 2*20+1 is enough for
 * SHA-1 ids). Returns 0 or -ENOENT. */
int elf_file_build_id(struct elf_file *ef, char *buf, size_t bufsz);

/* Calls fn for each NUL-terminated string in the read-only data section
 * (.rodata); stops when fn returns non-zero and returns that value, else 0. */
int elf_file_rodata_strings(struct elf_file *ef, int (*fn)(const char *s, size_t len, void *ctx),
			    void *ctx);

#endif /* TAIPAN_ELFSYM_H */
