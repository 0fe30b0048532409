/* elfsym.h - what taipan reads from ELF files, through libelf. */
#ifndef TAIPAN_ELFSYM_H
#define TAIPAN_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An open ELF file. Not thread-safe: use one per thread or lock around it.
 * Strings and pointers it hands out stay valid until elf_file_close(). */
struct elf_file;

/* What no real ELF file has more of: a file claiming more is refused before
 * libelf sizes its descriptors by the claim. */
#define ELF_MAX_SECTIONS 65536
#define ELF_MAX_SEGMENTS 4096

/* Opens an ELF file for reading (safe_open(): a regular file only).
 * Returns 0 and *out (close it with elf_file_close()), -ENOENT/-EACCES/…
 * from open(2), -ENOMEM, or -ENOEXEC when it is not a regular file holding
 * a readable 64-bit little-endian ET_EXEC/ET_DYN ELF (truncated files
 * included). Never executes anything. The file is read with pread, never
 * mapped: its owner may truncate it meanwhile, which makes reads fail, not
 * taipan crash. Each table read whole is bounded (string tables 64 MiB,
 * other sections 64 MiB); symbol tables are read in chunks. */
int elf_file_open(const char *path, struct elf_file **out);
/* elf_file_open() of a descriptor open for reading, which ef owns from
 * now on (closed on failure too). */
int elf_file_open_fd(int fd, struct elf_file **out);
/* Whether fd is a regular file that starts as a 64-bit little-endian ELF
 * with believable section and segment counts, with its size: the checks
 * before libelf opens it. Returns 0, -ENOEXEC, or fstat's errno. */
int elf_fd_check(int fd, uint64_t *fsize);
/* elf_file_open() on an image in memory (an ELF unpacked from another
 * file's .gnu_debugdata). On success ef owns image, which must come from
 * malloc() and is freed by elf_file_close(); on failure (-ENOEXEC, -ENOMEM,
 * the same checks as elf_file_open()) the caller still owns it. */
int elf_file_open_mem(void *image, size_t size, struct elf_file **out);
/* Closes it. Accepts NULL. */
void elf_file_close(struct elf_file *ef);

/* Looks up a symbol by exact name: .dynsym first, then .symtab (absent in
 * stripped files), where a global wins over a local of the same name.
 * Undefined symbols are ignored. Returns 0 with its value (a link-time
 * virtual address) and size (size may be NULL), -ENOENT, or -ENOMEM. TLS
 * symbols are returned as their st_value too. The first call indexes all
 * symbols (O(n log n)); later calls are O(log n). */
int elf_file_symbol(struct elf_file *ef, const char *name, uint64_t *value, uint64_t *size);

/* Looks up a section by name. Returns 0 with its address and size, or -ENOENT. */
int elf_file_section(struct elf_file *ef, const char *name, uint64_t *addr, uint64_t *size);

/* Copies len bytes at link-time virtual address vaddr from the file's
 * contents (one allocated section with file data, not NOBITS, that holds the
 * whole range). Returns 0, or -ENOENT when the range is not wholly backed by
 * one such section (e.g. it runs into .bss); buf is then untouched. */
int elf_file_read(struct elf_file *ef, uint64_t vaddr, void *buf, size_t len);

/* The raw bytes of a section that has them in the file (not SHT_NOBITS,
 * not SHF_COMPRESSED), allocated or not: e.g. .gnu_debugdata. *data is
 * owned by ef. Returns 0, or -ENOENT. */
int elf_file_section_bytes(struct elf_file *ef, const char *name, const void **data, size_t *len);

/* One PT_LOAD segment. */
struct elf_load {
	uint64_t offset, vaddr, filesz, memsz, align;
	bool exec;
};

/* The PT_LOAD segments, in file order, into out[0..max). Returns 0 with *n,
 * -E2BIG when there are more than max (*n == max, out filled), or -ENOEXEC. */
int elf_file_loads(struct elf_file *ef, struct elf_load *out, size_t max, size_t *n);

/* A defined function symbol (STT_FUNC or STT_GNU_IFUNC). */
struct elf_func {
	const char *name; /* owned by the elf_file */
	uint64_t value;	  /* link-time virtual address */
	uint64_t size;	  /* 0 when the object did not say */
	int bind;	  /* STB_LOCAL, STB_GLOBAL, STB_WEAK, ... */
	bool dynsym;	  /* from .dynsym, else .symtab */
};

/* Calls fn for each defined, named function symbol of .symtab and .dynsym,
 * in table order (the same function may come twice, once from each). Stops
 * when fn returns non-zero and returns that, else 0 (also when there is no
 * symbol table). */
int elf_file_funcs(struct elf_file *ef, int (*fn)(const struct elf_func *f, void *ctx), void *ctx);

/* Calls fn for each stub of the procedure linkage table that names a
 * function, as "NAME@plt" (what perf and objdump call it) at its link-time
 * address, 16 bytes: entry i of .rela.plt (R_X86_64_JUMP_SLOT) is the
 * (i+1)-th of .plt, or the i-th of .plt.sec where the file has one (IBT).
 * At most max entries. Stops when fn returns non-zero and returns that,
 * else 0 (also when the file has no PLT). */
int elf_file_plt(struct elf_file *ef, size_t max, int (*fn)(const struct elf_func *f, void *ctx),
		 void *ctx);

/* The lowest p_vaddr of a PT_LOAD segment, rounded down to its p_align; the
 * load bias of a mapped file is (address of its offset-0 mapping) - this.
 * 0 when there is no PT_LOAD. */
uint64_t elf_file_base_vaddr(struct elf_file *ef);

/* One dynamic relocation (SHT_RELA with SHF_ALLOC: .rela.dyn). */
struct elf_reloc {
	uint32_t type;	 /* R_X86_64_* */
	uint32_t sym;	 /* its symbol's index in the dynamic symbol table, 0 for none */
	uint64_t symval; /* that symbol's st_value (0 for none or undefined) */
	int64_t addend;	 /* r_addend */
};

/* The dynamic relocation that applies at link-time address vaddr (the
 * first one, in table order). Tables are read in chunks. Returns 0 with
 * *out, or -ENOENT. */
int elf_file_dynreloc(struct elf_file *ef, uint64_t vaddr, struct elf_reloc *out);

/* The PT_TLS segment: the size of the module's TLS block (p_memsz) and its
 * alignment. Returns 0, or -ENOENT when the file has no TLS. */
int elf_file_tls(struct elf_file *ef, uint64_t *memsz, uint64_t *align);

/* The function (its FDE, from .eh_frame) that holds link-time address
 * vaddr: [*start, *end). Returns 0, or -ENOENT when no FDE covers it. */
int elf_file_fde_range(struct elf_file *ef, uint64_t vaddr, uint64_t *start, uint64_t *end);

/* The DT_SONAME, or NULL. Owned by ef. */
const char *elf_file_soname(struct elf_file *ef);

/* Whether DT_NEEDED names a library whose name starts with prefix: 1 if so
 * (and *name points at the first such name, owned by ef, when name is not
 * NULL), else 0, also when there is no readable dynamic section. */
int elf_file_needs(struct elf_file *ef, const char *prefix, const char **name);

/* The GNU build-id as lowercase hex into buf (size >= 2*20+1 is enough for
 * SHA-1 ids). Looks in PT_NOTE segments, then SHT_NOTE sections. Returns 0,
 * -ENOENT, or -ENOSPC when buf is too small. */
int elf_file_build_id(struct elf_file *ef, char *buf, size_t bufsz);

/* Calls fn for each non-empty NUL-terminated string in the read-only data
 * section (.rodata), s pointing into the file's bytes (len excludes the NUL);
 * stops when fn returns non-zero and returns that value, else 0. Returns
 * -ENOENT when there is no .rodata with file data (so let fn return positive
 * values). .rodata also holds non-text bytes: expect some junk "strings". */
int elf_file_rodata_strings(struct elf_file *ef, int (*fn)(const char *s, size_t len, void *ctx),
			    void *ctx);

#endif /* TAIPAN_ELFSYM_H */
