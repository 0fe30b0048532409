/* elfsym.c - symbols, sections, notes and bytes of ELF files, through libelf.
 *
 * The files come from other processes' mount namespaces and may be hostile or
 * truncated, so every offset and size taken from the file is checked before
 * use. libelf already refuses section data that lies outside the file
 * (elf_getdata, elf_getdata_rawchunk), index-checks gelf_getsym/gelf_getdyn,
 * and elf_strptr checks that a string is inside its table and terminated;
 * what is left to us is arithmetic on addresses and sizes.
 */
#include "proc/elfsym.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/safeopen.h"

#ifndef NT_GNU_BUILD_ID
#define NT_GNU_BUILD_ID 3
#endif

/* Longest build-id we accept; real ones are 8 (xxhash), 16 (md5/uuid) or
 * 20 (sha1) bytes. Anything longer is a corrupt note. */
#define BUILD_ID_MAX 64

/* The largest string table read whole (elf_strptr() reads all of it):
 * past this a symbol or dynamic table is as if absent. Symbol entries are
 * read in chunks of SYM_CHUNK, never all at once. */
#define STRTAB_MAX ((uint64_t)64 << 20)
#define SYM_CHUNK 4096
/* The most bytes read whole of any other section (.rodata, .gnu_debugdata),
 * and of a note or dynamic section. */
#define SECTION_MAX ((uint64_t)64 << 20)
#define SMALL_MAX ((uint64_t)1 << 20)

struct sym {
	const char *name; /* points into the file's string table, read by libelf */
	uint64_t value;
	uint64_t size;
	/* Preference among equal names, lower wins: .dynsym, then global
	 * .symtab entries, then local ones (several compilation units may
	 * have a static of the same name; the first one in the table wins). */
	uint32_t rank;
	uint32_t idx; /* position in the file, to make the sort total */
};

struct elf_file {
	int fd;	     /* -1 for an image in memory */
	void *image; /* that image, freed by elf_file_close() */
	size_t image_len;
	uint64_t fsize;
	Elf *elf;
	bool have_shstrndx;
	size_t shstrndx;
	/* Name-sorted, one entry per name, built on the first lookup. */
	bool syms_built;
	struct sym *syms;
	size_t nsyms;
};

static pthread_once_t libelf_once = PTHREAD_ONCE_INIT;
static bool libelf_ok;

static void libelf_init(void)
{
	libelf_ok = elf_version(EV_CURRENT) != EV_NONE;
}

/* Copies len bytes at file offset off: pread for a file (a short read,
 * the file truncated meanwhile, is -EIO), memcpy for an image. Never reads
 * past the size the file had when it was opened. */
static int read_at(struct elf_file *ef, uint64_t off, void *buf, size_t len)
{
	if (off > ef->fsize || len > ef->fsize - off)
		return -ENOENT;
	if (ef->fd < 0) {
		memcpy(buf, (const char *)ef->image + off, len);
		return 0;
	}
	for (size_t done = 0; done < len;) {
		ssize_t r = pread(ef->fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -EIO;
		done += (size_t)r;
	}
	return 0;
}

/* Whether a section's bytes (sh_size of them) are at most max and lie in
 * the file: what a whole-section read through libelf may cost. */
static bool section_fits(const struct elf_file *ef, const GElf_Shdr *sh, uint64_t max)
{
	return sh->sh_type != SHT_NOBITS && sh->sh_size <= max && sh->sh_offset <= ef->fsize &&
	       sh->sh_size <= ef->fsize - sh->sh_offset;
}

/* Whether section idx is a string table that elf_strptr() may read whole. */
static bool strtab_fits(struct elf_file *ef, size_t idx)
{
	Elf_Scn *scn = elf_getscn(ef->elf, idx);
	GElf_Shdr sh;

	return scn && gelf_getshdr(scn, &sh) && sh.sh_type == SHT_STRTAB &&
	       !(sh.sh_flags & SHF_COMPRESSED) && section_fits(ef, &sh, STRTAB_MAX);
}

/* Whether the header tables and the loadable bytes lie inside the file.
 * libelf quietly treats a section header table past the end of the file as
 * "no sections", so a truncated copy would otherwise open fine and then find
 * nothing; refusing it names the real problem. */
static bool layout_fits(Elf *elf, const GElf_Ehdr *eh, uint64_t fsize)
{
	size_t phnum;

	if (eh->e_shoff) {
		/* With e_shnum == 0 the count lives in section 0: at least
		 * that one entry must be there. */
		uint64_t n = eh->e_shnum ? eh->e_shnum : 1;

		if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > fsize ||
		    (fsize - eh->e_shoff) / eh->e_shentsize < n)
			return false;
	}
	if (elf_getphdrnum(elf, &phnum) != 0)
		return false;
	if (phnum && (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > fsize ||
		      (fsize - eh->e_phoff) / eh->e_phentsize < phnum))
		return false;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph))
			return false;
		/* A segment with no bytes in the file may point past its
		 * end: separate debug files and MiniDebugInfo keep the
		 * program headers with p_filesz 0. */
		if (ph.p_type == PT_LOAD && ph.p_filesz &&
		    (ph.p_offset > fsize || ph.p_filesz > fsize - ph.p_offset))
			return false;
	}
	return true;
}

/* Checks that elf is a 64-bit little-endian ET_EXEC/ET_DYN file whose
 * tables fit in fsize bytes, and wraps it. Returns 0 or -ENOEXEC/-ENOMEM;
 * on failure the caller still owns elf, fd and image. */
static int elf_wrap(Elf *elf, int fd, void *image, uint64_t fsize, struct elf_file **out)
{
	struct elf_file *ef;
	const char *ident;
	GElf_Ehdr ehdr;
	size_t identsz;

	if (elf_kind(elf) != ELF_K_ELF)
		return -ENOEXEC;
	ident = elf_getident(elf, &identsz);
	if (!ident || identsz < EI_NIDENT || ident[EI_CLASS] != ELFCLASS64 ||
	    ident[EI_DATA] != ELFDATA2LSB)
		return -ENOEXEC;
	if (!gelf_getehdr(elf, &ehdr) || (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN) ||
	    !layout_fits(elf, &ehdr, fsize))
		return -ENOEXEC;

	ef = calloc(1, sizeof(*ef));
	if (!ef)
		return -ENOMEM;
	ef->fd = fd;
	ef->image = image;
	ef->image_len = image ? fsize : 0;
	ef->fsize = fsize;
	ef->elf = elf;
	/* A file without usable section names still has segments: keep it
	 * open, and let the section-based lookups answer -ENOENT. */
	ef->have_shstrndx =
	    elf_getshdrstrndx(elf, &ef->shstrndx) == 0 && strtab_fits(ef, ef->shstrndx);
	*out = ef;
	return 0;
}

int elf_fd_check(int fd, uint64_t *fsize)
{
	Elf64_Ehdr eh;
	struct stat st;
	uint64_t shnum;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -ENOEXEC;
	*fsize = (uint64_t)st.st_size;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG))
		return -ENOEXEC;
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return -ENOEXEC;
	/* libelf allocates a descriptor per section when it opens the file,
	 * before anything can be checked: a count that the file's size
	 * allows but no real file has is refused first. */
	shnum = eh.e_shnum;
	if (!shnum && eh.e_shoff) {
		Elf64_Shdr s0;

		if (pread(fd, &s0, sizeof(s0), (off_t)eh.e_shoff) != (ssize_t)sizeof(s0))
			return -ENOEXEC;
		shnum = s0.sh_size;
	}
	if (shnum > ELF_MAX_SECTIONS || eh.e_phnum > ELF_MAX_SEGMENTS)
		return -ENOEXEC;
	return 0;
}

int elf_file_open_fd(int fd, struct elf_file **out)
{
	uint64_t fsize;
	Elf *elf;
	int err;

	pthread_once(&libelf_once, libelf_init);
	if (!libelf_ok) {
		err = -ENOEXEC;
		goto err_fd;
	}
	err = elf_fd_check(fd, &fsize);
	if (err)
		goto err_fd;
	/* ELF_C_READ, never ELF_C_READ_MMAP: the file's owner may truncate it
	 * while it is read, and a mapping would then raise SIGBUS. libelf
	 * reads with pread what it is asked for, and a short read is an
	 * error like any other. */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf) {
		err = -ENOEXEC;
		goto err_fd;
	}
	err = elf_wrap(elf, fd, NULL, fsize, out);
	if (err)
		goto err_elf;
	return 0;

err_elf:
	elf_end(elf);
err_fd:
	close(fd);
	return err;
}

int elf_file_open(const char *path, struct elf_file **out)
{
	int fd = safe_open(path);

	if (fd < 0)
		return fd;
	return elf_file_open_fd(fd, out);
}

int elf_file_open_mem(void *image, size_t size, struct elf_file **out)
{
	Elf *elf;
	int err;

	pthread_once(&libelf_once, libelf_init);
	if (!libelf_ok)
		return -ENOEXEC;
	elf = elf_memory(image, size);
	if (!elf)
		return -ENOEXEC;
	err = elf_wrap(elf, -1, image, size, out);
	if (err)
		elf_end(elf);
	return err;
}

void elf_file_close(struct elf_file *ef)
{
	if (!ef)
		return;
	free(ef->syms);
	elf_end(ef->elf);
	if (ef->fd >= 0)
		close(ef->fd);
	free(ef->image);
	free(ef);
}

/* --- sections ------------------------------------------------------------- */

static const char *scn_name(struct elf_file *ef, const GElf_Shdr *sh)
{
	if (!ef->have_shstrndx)
		return NULL;
	return elf_strptr(ef->elf, ef->shstrndx, sh->sh_name);
}

static Elf_Scn *find_scn(struct elf_file *ef, const char *name, GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(ef->elf, scn))) {
		const char *n;

		if (!gelf_getshdr(scn, sh))
			continue;
		n = scn_name(ef, sh);
		if (n && !strcmp(n, name))
			return scn;
	}
	return NULL;
}

int elf_file_section(struct elf_file *ef, const char *name, uint64_t *addr, uint64_t *size)
{
	GElf_Shdr sh;

	if (!find_scn(ef, name, &sh))
		return -ENOENT;
	*addr = sh.sh_addr;
	*size = sh.sh_size;
	return 0;
}

int elf_file_read(struct elf_file *ef, uint64_t vaddr, void *buf, size_t len)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	if (len == 0)
		return 0;
	if (vaddr + len < vaddr)
		return -ENOENT;
	while ((scn = elf_nextscn(ef->elf, scn))) {
		uint64_t off;

		if (!gelf_getshdr(scn, &sh))
			continue;
		/* Only sections that are part of the memory image (SHF_ALLOC;
		 * .symtab or .comment have address 0 and would match low
		 * addresses) and that have bytes in the file. */
		if (!(sh.sh_flags & SHF_ALLOC) || (sh.sh_flags & SHF_COMPRESSED) ||
		    sh.sh_type == SHT_NOBITS || sh.sh_type == SHT_NULL)
			continue;
		if (vaddr < sh.sh_addr || vaddr - sh.sh_addr >= sh.sh_size ||
		    len > sh.sh_size - (vaddr - sh.sh_addr))
			continue;
		/* Raw bytes, as the loader maps them: just these, not the
		 * whole section. */
		off = vaddr - sh.sh_addr;
		return read_at(ef, sh.sh_offset + off, buf, len) ? -ENOENT : 0;
	}
	return -ENOENT;
}

int elf_file_section_bytes(struct elf_file *ef, const char *name, const void **data, size_t *len)
{
	GElf_Shdr sh;
	Elf_Scn *scn;
	Elf_Data *d;

	scn = find_scn(ef, name, &sh);
	if (!scn || (sh.sh_flags & SHF_COMPRESSED) || !section_fits(ef, &sh, SECTION_MAX))
		return -ENOENT;
	d = elf_rawdata(scn, NULL);
	if (!d || !d->d_buf)
		return -ENOENT;
	*data = d->d_buf;
	*len = d->d_size;
	return 0;
}

int elf_file_loads(struct elf_file *ef, struct elf_load *out, size_t max, size_t *n)
{
	size_t phnum;

	*n = 0;
	if (elf_getphdrnum(ef->elf, &phnum) != 0)
		return -ENOEXEC;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(ef->elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (*n == max)
			return -E2BIG;
		out[*n].offset = ph.p_offset;
		out[*n].vaddr = ph.p_vaddr;
		out[*n].filesz = ph.p_filesz;
		out[*n].memsz = ph.p_memsz;
		out[*n].align = ph.p_align;
		out[*n].exec = ph.p_flags & PF_X;
		(*n)++;
	}
	return 0;
}

int elf_file_tls(struct elf_file *ef, uint64_t *memsz, uint64_t *align)
{
	size_t n;

	if (elf_getphdrnum(ef->elf, &n) != 0)
		return -ENOENT;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(ef->elf, i, &ph) || ph.p_type != PT_TLS)
			continue;
		*memsz = ph.p_memsz;
		*align = ph.p_align;
		return 0;
	}
	return -ENOENT;
}

/* st_value of symbol idx of the symbol table in section link (0 when it
 * cannot be read or is undefined). */
static uint64_t sym_value(struct elf_file *ef, size_t link, uint32_t idx)
{
	Elf_Scn *scn = elf_getscn(ef->elf, link);
	GElf_Shdr sh;
	Elf64_Sym sym;

	if (!idx || !scn || !gelf_getshdr(scn, &sh) || sh.sh_entsize != sizeof(Elf64_Sym) ||
	    (uint64_t)idx >= sh.sh_size / sizeof(Elf64_Sym) || !section_fits(ef, &sh, UINT64_MAX) ||
	    read_at(ef, sh.sh_offset + (uint64_t)idx * sizeof(sym), &sym, sizeof(sym)) ||
	    sym.st_shndx == SHN_UNDEF)
		return 0;
	return sym.st_value;
}

int elf_file_dynreloc(struct elf_file *ef, uint64_t vaddr, struct elf_reloc *out)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	Elf64_Rela *chunk = NULL;
	int ret = -ENOENT;

	while (ret == -ENOENT && (scn = elf_nextscn(ef->elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA ||
		    !(sh.sh_flags & SHF_ALLOC) || sh.sh_entsize != sizeof(Elf64_Rela) ||
		    (sh.sh_flags & SHF_COMPRESSED) || !section_fits(ef, &sh, UINT64_MAX))
			continue;
		if (!chunk && !(chunk = malloc(SYM_CHUNK * sizeof(*chunk))))
			return -ENOMEM;
		uint64_t n = sh.sh_size / sizeof(Elf64_Rela);
		for (uint64_t i = 0; i < n && ret == -ENOENT;) {
			size_t k = n - i < SYM_CHUNK ? (size_t)(n - i) : SYM_CHUNK;
			/* 64-bit little-endian files only (elf_wrap). */
			if (read_at(ef, sh.sh_offset + i * sizeof(Elf64_Rela), chunk,
				    k * sizeof(*chunk)))
				break;
			for (size_t j = 0; j < k; j++) {
				if (chunk[j].r_offset != vaddr)
					continue;
				uint32_t sym = (uint32_t)ELF64_R_SYM(chunk[j].r_info);
				*out = (struct elf_reloc){
				    .type = (uint32_t)ELF64_R_TYPE(chunk[j].r_info),
				    .sym = sym,
				    .symval = sym_value(ef, sh.sh_link, sym),
				    .addend = chunk[j].r_addend,
				};
				ret = 0;
				break;
			}
			i += k;
		}
	}
	free(chunk);
	return ret;
}

/* Name of symbol idx of the symbol table in section link into buf (""
 * when it cannot be read). */
static void sym_name(struct elf_file *ef, size_t link, uint32_t idx, char *buf, size_t len)
{
	Elf_Scn *scn = elf_getscn(ef->elf, link);
	GElf_Shdr sh;
	Elf64_Sym sym;
	const char *name;

	buf[0] = 0;
	if (!idx || !scn || !gelf_getshdr(scn, &sh) || sh.sh_entsize != sizeof(Elf64_Sym) ||
	    (uint64_t)idx >= sh.sh_size / sizeof(Elf64_Sym) || !section_fits(ef, &sh, UINT64_MAX) ||
	    read_at(ef, sh.sh_offset + (uint64_t)idx * sizeof(sym), &sym, sizeof(sym)) ||
	    !strtab_fits(ef, sh.sh_link) || !(name = elf_strptr(ef->elf, sh.sh_link, sym.st_name)))
		return;
	snprintf(buf, len, "%s", name);
}

int elf_file_plt(struct elf_file *ef, size_t max, int (*fn)(const struct elf_func *f, void *ctx),
		 void *ctx)
{
	GElf_Shdr rela, plt, got = {0};
	uint64_t first = 16; /* .plt's first entry calls the resolver */
	Elf64_Rela *chunk = NULL;
	int ret = 0;

	if (!find_scn(ef, ".rela.plt", &rela) || rela.sh_type != SHT_RELA ||
	    rela.sh_entsize != sizeof(Elf64_Rela) || !section_fits(ef, &rela, UINT64_MAX))
		return 0;
	if (find_scn(ef, ".plt.sec", &plt))
		first = 0;
	else if (!find_scn(ef, ".plt", &plt))
		return 0;
	/* A stub's place is its GOT slot's, past .got.plt's three reserved
	 * words: the relocations need not be in the stubs' order (libc's). */
	bool by_slot = find_scn(ef, ".got.plt", &got) && got.sh_size >= 24;
	uint64_t n = rela.sh_size / sizeof(Elf64_Rela);
	if (n > max)
		n = max;
	if (!(chunk = malloc(SYM_CHUNK * sizeof(*chunk))))
		return -ENOMEM;
	for (uint64_t i = 0; i < n && !ret;) {
		size_t k = n - i < SYM_CHUNK ? (size_t)(n - i) : SYM_CHUNK;
		if (read_at(ef, rela.sh_offset + i * sizeof(Elf64_Rela), chunk, k * sizeof(*chunk)))
			break;
		for (size_t j = 0; j < k && !ret; j++) {
			uint64_t slot = i + j, off = chunk[j].r_offset - got.sh_addr;
			char name[256];
			if (by_slot) {
				if (chunk[j].r_offset < got.sh_addr + 24 || off >= got.sh_size ||
				    off % 8)
					continue;
				slot = off / 8 - 3;
			}
			uint64_t at = first + 16 * slot;
			if (ELF64_R_TYPE(chunk[j].r_info) != R_X86_64_JUMP_SLOT ||
			    at + 16 > plt.sh_size)
				continue;
			sym_name(ef, rela.sh_link, (uint32_t)ELF64_R_SYM(chunk[j].r_info), name,
				 sizeof(name) - 4);
			if (!name[0])
				continue;
			strcat(name, "@plt");
			struct elf_func f = {
			    .name = name, .value = plt.sh_addr + at, .size = 16, .bind = STB_LOCAL};
			ret = fn(&f, ctx);
		}
		i += k;
	}
	free(chunk);
	return ret;
}

uint64_t elf_file_base_vaddr(struct elf_file *ef)
{
	uint64_t base = UINT64_MAX;
	size_t n;

	if (elf_getphdrnum(ef->elf, &n) != 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		uint64_t v;

		if (!gelf_getphdr(ef->elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		v = ph.p_vaddr;
		/* A p_align that is not a power of two is corrupt; ignore it
		 * rather than produce a nonsense mask. */
		if (ph.p_align > 1 && !(ph.p_align & (ph.p_align - 1)))
			v &= ~(ph.p_align - 1);
		if (v < base)
			base = v;
	}
	return base == UINT64_MAX ? 0 : base;
}

/* --- symbols -------------------------------------------------------------- */

static int sym_cmp(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Calls fn for each entry of the symbol table sh (SHT_SYMTAB or
 * SHT_DYNSYM) with its name, entries read SYM_CHUNK at a time (a table is
 * never read whole), names through libelf from the linked string table,
 * which must be at most STRTAB_MAX. An entry without a name is passed with
 * name NULL. Stops when fn returns non-zero and returns that; a table that
 * cannot be read (or whose reading fails part way) ends quietly, 0. */
static int each_sym(struct elf_file *ef, const GElf_Shdr *sh,
		    int (*fn)(struct elf_file *ef, const GElf_Shdr *sh, const GElf_Sym *gs,
			      const char *name, void *ctx),
		    void *ctx)
{
	Elf64_Sym *chunk;
	uint64_t n;
	int r = 0;

	if (sh->sh_entsize != sizeof(Elf64_Sym) || (sh->sh_flags & SHF_COMPRESSED) ||
	    !section_fits(ef, sh, UINT64_MAX))
		return 0;
	if (!strtab_fits(ef, sh->sh_link))
		return 0;
	chunk = malloc(SYM_CHUNK * sizeof(*chunk));
	if (!chunk)
		return -ENOMEM;
	n = sh->sh_size / sizeof(Elf64_Sym);
	for (uint64_t i = 0; i < n && !r;) {
		size_t k = n - i < SYM_CHUNK ? (size_t)(n - i) : SYM_CHUNK;

		/* Only 64-bit little-endian files are opened (elf_wrap):
		 * the entries are the host's own Elf64_Sym. */
		if (read_at(ef, sh->sh_offset + i * sizeof(Elf64_Sym), chunk, k * sizeof(*chunk)))
			break;
		for (size_t j = 0; j < k && !r; j++) {
			const char *name = chunk[j].st_name
					       ? elf_strptr(ef->elf, sh->sh_link, chunk[j].st_name)
					       : NULL;

			r = fn(ef, sh, &chunk[j], name && *name ? name : NULL, ctx);
		}
		i += k;
	}
	free(chunk);
	return r;
}

struct add_syms_ctx {
	bool is_dynsym;
	size_t *cap;
};

/* Appends one defined, named symbol of a SYMTAB/DYNSYM section. ctx->cap
 * and the array grow together; idx numbers entries across tables. */
static int add_sym(struct elf_file *ef, const GElf_Shdr *sh, const GElf_Sym *gs, const char *name,
		   void *ctx)
{
	struct add_syms_ctx *c = ctx;
	struct sym *s;
	int type;

	(void)sh;
	if (!name || gs->st_shndx == SHN_UNDEF)
		return 0;
	type = GELF_ST_TYPE(gs->st_info);
	if (type == STT_FILE || type == STT_SECTION)
		return 0;
	if (ef->nsyms == *c->cap) {
		size_t ncap = *c->cap ? *c->cap * 2 : 1024;
		struct sym *nv = realloc(ef->syms, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		ef->syms = nv;
		*c->cap = ncap;
	}
	s = &ef->syms[ef->nsyms];
	s->name = name;
	s->value = gs->st_value;
	s->size = gs->st_size;
	s->rank = c->is_dynsym ? 0 : GELF_ST_BIND(gs->st_info) == STB_LOCAL ? 2 : 1;
	s->idx = ef->nsyms;
	ef->nsyms++;
	return 0;
}

static int build_syms(struct elf_file *ef)
{
	Elf_Scn *scn = NULL;
	size_t cap = 0, j;
	GElf_Shdr sh;
	int err;

	while ((scn = elf_nextscn(ef->elf, scn))) {
		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		struct add_syms_ctx c = {.is_dynsym = sh.sh_type == SHT_DYNSYM, .cap = &cap};

		err = each_sym(ef, &sh, add_sym, &c);
		if (err) {
			free(ef->syms);
			ef->syms = NULL;
			ef->nsyms = 0;
			return err;
		}
	}
	if (ef->nsyms) {
		qsort(ef->syms, ef->nsyms, sizeof(*ef->syms), sym_cmp);
		/* Keep only the preferred entry of each name. */
		for (size_t i = j = 1; i < ef->nsyms; i++)
			if (strcmp(ef->syms[i].name, ef->syms[j - 1].name))
				ef->syms[j++] = ef->syms[i];
		ef->nsyms = j;
	}
	ef->syms_built = true;
	return 0;
}

int elf_file_symbol(struct elf_file *ef, const char *name, uint64_t *value, uint64_t *size)
{
	size_t lo = 0, hi;
	int err;

	if (!ef->syms_built) {
		err = build_syms(ef);
		if (err)
			return err;
	}
	hi = ef->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(ef->syms[mid].name, name);

		if (c == 0) {
			*value = ef->syms[mid].value;
			if (size)
				*size = ef->syms[mid].size;
			return 0;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -ENOENT;
}

struct funcs_ctx {
	int (*fn)(const struct elf_func *f, void *ctx);
	void *ctx;
};

static int one_func(struct elf_file *ef, const GElf_Shdr *sh, const GElf_Sym *gs, const char *name,
		    void *ctx)
{
	struct funcs_ctx *c = ctx;
	struct elf_func f;
	int type;

	(void)ef;
	/* Defined code only: SHN_UNDEF are imports, and SHN_ABS/SHN_COMMON
	 * and reserved indices have no address in a section. */
	if (!name || gs->st_shndx == SHN_UNDEF || gs->st_shndx >= SHN_LORESERVE)
		return 0;
	type = GELF_ST_TYPE(gs->st_info);
	if (type != STT_FUNC && type != STT_GNU_IFUNC)
		return 0;
	f.name = name;
	f.value = gs->st_value;
	f.size = gs->st_size;
	f.bind = GELF_ST_BIND(gs->st_info);
	f.dynsym = sh->sh_type == SHT_DYNSYM;
	return c->fn(&f, c->ctx);
}

int elf_file_funcs(struct elf_file *ef, int (*fn)(const struct elf_func *f, void *ctx), void *ctx)
{
	struct funcs_ctx c = {.fn = fn, .ctx = ctx};
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(ef->elf, scn))) {
		int r;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		r = each_sym(ef, &sh, one_func, &c);
		if (r)
			return r;
	}
	return 0;
}

/* --- dynamic section ------------------------------------------------------ */

/* Calls fn for each string-valued entry with this tag in the dynamic section
 * until fn returns true; returns that string or NULL. Reads the section
 * header table only: files stripped of section headers answer NULL. */
static const char *dyn_find(struct elf_file *ef, GElf_Sxword tag,
			    bool (*fn)(const char *s, const void *ctx), const void *ctx)
{
	size_t entsz = gelf_fsize(ef->elf, ELF_T_DYN, 1, EV_CURRENT);
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	if (!entsz)
		return NULL;
	while ((scn = elf_nextscn(ef->elf, scn))) {
		Elf_Data *d;
		size_t n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC)
			continue;
		if (!section_fits(ef, &sh, SMALL_MAX) || !strtab_fits(ef, sh.sh_link))
			return NULL;
		d = elf_getdata(scn, NULL);
		if (!d)
			return NULL;
		n = d->d_size / entsz;
		for (size_t i = 0; i < n; i++) {
			const char *s;
			GElf_Dyn dyn;

			if (!gelf_getdyn(d, i, &dyn) || dyn.d_tag == DT_NULL)
				break;
			if (dyn.d_tag != tag)
				continue;
			s = elf_strptr(ef->elf, sh.sh_link, dyn.d_un.d_val);
			if (s && fn(s, ctx))
				return s;
		}
		return NULL; /* there is only one dynamic section */
	}
	return NULL;
}

static bool any_string(const char *s, const void *ctx)
{
	(void)s;
	(void)ctx;
	return true;
}

static bool has_prefix(const char *s, const void *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

const char *elf_file_soname(struct elf_file *ef)
{
	return dyn_find(ef, DT_SONAME, any_string, NULL);
}

int elf_file_needs(struct elf_file *ef, const char *prefix, const char **name)
{
	const char *s = dyn_find(ef, DT_NEEDED, has_prefix, prefix);

	if (!s)
		return 0;
	if (name)
		*name = s;
	return 1;
}

/* --- notes ---------------------------------------------------------------- */

/* Looks for the GNU build-id in one block of notes. Returns 0, -ENOENT when
 * it is not there, or -ENOSPC when buf is too small. */
static int build_id_in(Elf_Data *d, char *buf, size_t bufsz)
{
	static const char hex[] = "0123456789abcdef";
	size_t off = 0, next, name_off, desc_off;
	GElf_Nhdr nh;

	if (!d || !d->d_buf)
		return -ENOENT;
	/* gelf_getnote() returns 0 for a note that runs past the data. */
	while (off < d->d_size && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		const unsigned char *desc = (const unsigned char *)d->d_buf + desc_off;

		off = next;
		if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
		    memcmp((const char *)d->d_buf + name_off, "GNU", 4))
			continue;
		if (nh.n_descsz == 0 || nh.n_descsz > BUILD_ID_MAX)
			continue;
		if (bufsz < 2 * (size_t)nh.n_descsz + 1)
			return -ENOSPC;
		for (size_t i = 0; i < nh.n_descsz; i++) {
			buf[2 * i] = hex[desc[i] >> 4];
			buf[2 * i + 1] = hex[desc[i] & 15];
		}
		buf[2 * nh.n_descsz] = '\0';
		return 0;
	}
	return -ENOENT;
}

int elf_file_build_id(struct elf_file *ef, char *buf, size_t bufsz)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t n;
	int err;

	/* Segments first: they are what the loader uses and survive
	 * section-header stripping. */
	if (elf_getphdrnum(ef->elf, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;
			Elf_Data *d;

			if (!gelf_getphdr(ef->elf, i, &ph) || ph.p_type != PT_NOTE ||
			    ph.p_filesz > SMALL_MAX)
				continue;
			/* Notes in 8-aligned segments use 8-byte padding. The
			 * chunk is checked against the file size by libelf. */
			d = elf_getdata_rawchunk(ef->elf, ph.p_offset, ph.p_filesz,
						 ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
			err = build_id_in(d, buf, bufsz);
			if (err != -ENOENT)
				return err;
		}
	}
	while ((scn = elf_nextscn(ef->elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE ||
		    !section_fits(ef, &sh, SMALL_MAX))
			continue;
		/* elf_getdata() picks the note type from sh_addralign. */
		err = build_id_in(elf_getdata(scn, NULL), buf, bufsz);
		if (err != -ENOENT)
			return err;
	}
	return -ENOENT;
}

/* --- strings -------------------------------------------------------------- */

int elf_file_rodata_strings(struct elf_file *ef, int (*fn)(const char *s, size_t len, void *ctx),
			    void *ctx)
{
	const char *p, *end, *z;
	Elf_Data *d;
	GElf_Shdr sh;
	Elf_Scn *scn;

	scn = find_scn(ef, ".rodata", &sh);
	if (!scn || !section_fits(ef, &sh, SECTION_MAX))
		return -ENOENT;
	d = elf_rawdata(scn, NULL);
	if (!d || !d->d_buf)
		return -ENOENT;
	p = d->d_buf;
	end = p + d->d_size;
	/* An unterminated tail is not a string: never hand fn bytes past the
	 * section. */
	for (; p < end && (z = memchr(p, '\0', end - p)); p = z + 1) {
		int r;

		if (z == p)
			continue;
		r = fn(p, z - p, ctx);
		if (r)
			return r;
	}
	return 0;
}

/* .eh_frame_hdr's search table as GNU ld writes it: pairs of 32-bit
 * offsets from the section's start (DW_EH_PE_datarel | sdata4), the
 * functions' starts sorted, each with its FDE. */
#define EH_HDR_TABLE_ENC 0x3b

int elf_file_fde_range(struct elf_file *ef, uint64_t vaddr, uint64_t *start, uint64_t *end)
{
	uint64_t hdr, hsize;
	uint8_t h[12];
	if (elf_file_section(ef, ".eh_frame_hdr", &hdr, &hsize) || hsize < sizeof(h) ||
	    elf_file_read(ef, hdr, h, sizeof(h)) || h[0] != 1 || h[2] != 0x03 ||
	    h[3] != EH_HDR_TABLE_ENC)
		return -ENOENT;
	uint32_t count;
	memcpy(&count, h + 8, sizeof(count));
	if (!count || (uint64_t)count * 8 > hsize - sizeof(h))
		return -ENOENT;
	/* The last entry whose start is at or before vaddr. */
	uint64_t lo = 0, hi = count;
	int32_t e[2] = {0, 0};
	while (hi - lo > 1) {
		uint64_t mid = (lo + hi) / 2;
		int32_t m[2];
		if (elf_file_read(ef, hdr + sizeof(h) + mid * 8, m, sizeof(m)))
			return -ENOENT;
		if (hdr + (int64_t)m[0] <= vaddr)
			lo = mid;
		else
			hi = mid;
	}
	if (elf_file_read(ef, hdr + sizeof(h) + lo * 8, e, sizeof(e)) ||
	    hdr + (int64_t)e[0] > vaddr)
		return -ENOENT;
	/* The FDE: length, CIE pointer, pc_begin and pc_range, which GCC
	 * writes pc-relative sdata4 and sdata4; pc_begin must be the table's
	 * start, or the encoding is another. */
	uint64_t fde = hdr + (int64_t)e[1], fn = hdr + (int64_t)e[0];
	int32_t f[4];
	if (elf_file_read(ef, fde, f, sizeof(f)) || f[0] == -1 || fde + 8 + (int64_t)f[2] != fn ||
	    f[3] <= 0)
		return -ENOENT;
	if (vaddr >= fn + (uint64_t)f[3])
		return -ENOENT;
	*start = fn;
	*end = fn + (uint64_t)f[3];
	return 0;
}
