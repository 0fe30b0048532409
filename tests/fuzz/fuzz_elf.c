/* fuzz_elf.c - libFuzzer target: every query of elfsym.h, and the native
 * symbolizer of nativesym.h, on an ELF file whose bytes are the input.
 *
 * elf_file_open() takes a path, as taipan opens binaries through
 * /proc/PID/map_files, so the input is written to a memfd and opened as
 * /proc/self/fd/N: the same open, fstat and mmap as for a real file.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpython/rules.h"
#include "profile/nativesym.h"
#include "proc/elfsym.h"
#include "ruby/ectls.h"
#include "ruby/rbids.h"
#include "ruby/rbproc.h"

static int memfd = -1;
static char path[64];
static volatile size_t sink;

static int each_func(const struct elf_func *f, void *ctx)
{
	size_t *n = ctx;

	sink += strlen(f->name) + f->value + f->size;
	return ++*n == 1000000;
}

/* What the native symbolizer does with the file: index it (symbols, and
 * .gnu_debugdata unpacked and parsed as an ELF in memory), then look up
 * addresses around each function and convert file offsets. A new cache per
 * input: the memfd keeps one inode. */
static void native_names(struct elf_file *ef)
{
	struct nativesym_file f = {.path = path};
	struct nativesym *ns = nativesym_new();
	struct elf_load loads[16];
	struct nativesym_sym s;
	uint64_t v;
	char buf[128];
	size_t n;

	if (!ns)
		abort();
	if (nativesym_lookup(ns, &f, 0, &s) == 0) {
		nativesym_format(&s, buf, sizeof(buf));
		if (elf_file_loads(ef, loads, 16, &n) == 0 || n == 16) {
			for (size_t i = 0; i < n; i++) {
				nativesym_lookup(ns, &f, loads[i].vaddr + 1, &s);
				nativesym_vaddr(ns, &f, loads[i].offset, &v);
				nativesym_vaddr(ns, &f, loads[i].offset + loads[i].filesz, &v);
			}
		}
		nativesym_lookup(ns, &f, UINT64_MAX, &s);
		if (s.name)
			sink += strlen(s.name) + cpython_is_eval_loop(s.name) +
				cpython_is_call_machinery(s.name, true);
	}
	nativesym_free(ns);
}

/* Names taipan looks up (pyproc.c), and a few that real files have. */
static const char *const symbols[] = {
    "_PyRuntime",	"Py_Version",	 "PyCode_Type", "interp_head",
    "_Py_DebugOffsets", "Py_GetVersion", "main",	"",
};
static const char *const sections[] = {".rodata", ".data", ".PyRuntime", ".dynamic", ".bss", ""};

static int each_string(const char *s, size_t len, void *ctx)
{
	size_t *n = ctx;

	/* Every byte handed out must be inside the section, and s[len] its NUL. */
	if (s[len] != '\0' || memchr(s, '\0', len))
		abort();
	sink += (unsigned char)s[0] + (unsigned char)s[len - 1];
	return ++*n == 100000; /* stops early sometimes, as version detection does */
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	memfd = memfd_create("fuzz_elf", MFD_CLOEXEC);
	if (memfd < 0) {
		perror("memfd_create");
		exit(1);
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct elf_file *ef;
	uint64_t v, sz, addr;
	uint8_t buf[256];
	char id[2 * 64 + 1], small[9];
	const char *name;
	size_t n = 0;

	/* The file is closed (and unmapped) before it is rewritten: truncating
	 * a mapped file would raise SIGBUS, which elf_file_open() documents. */
	if (ftruncate(memfd, 0) || pwrite(memfd, data, size, 0) != (ssize_t)size)
		abort();
	if (elf_file_open(path, &ef))
		return 0;
	for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
		if (elf_file_symbol(ef, symbols[i], &v, &sz))
			continue;
		/* What pyproc.c does with a symbol: read what it points at. */
		elf_file_read(ef, v, buf, sz && sz < sizeof(buf) ? sz : sizeof(buf));
		elf_file_read(ef, v, buf, 1);
	}
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		if (elf_file_section(ef, sections[i], &addr, &sz))
			continue;
		elf_file_read(ef, addr, buf, sz < sizeof(buf) ? sz : sizeof(buf));
		elf_file_read(ef, addr + sz - 1, buf, 1);
		elf_file_read(ef, addr + sz, buf, 1);
	}
	elf_file_read(ef, UINT64_MAX - 4, buf, 8);
	elf_file_read(ef, 0, buf, sizeof(buf));
	sink += elf_file_base_vaddr(ef);
	if ((name = elf_file_soname(ef)))
		sink += strlen(name);
	if (elf_file_needs(ef, "libpython", &name))
		sink += strlen(name);
	elf_file_needs(ef, "", NULL);
	if (!elf_file_build_id(ef, id, sizeof(id)))
		sink += strlen(id);
	elf_file_build_id(ef, small, sizeof(small));
	elf_file_rodata_strings(ef, each_string, &n);
	/* Where a Ruby library keeps its execution context: its readers'
	 * code, their GOT entry's relocations, the TLS segment. */
	struct rb_ectls t;
	char err[256];
	if (!rb_ectls_find(ef, &t, err, sizeof(err)))
		sink += t.dtpoff;
	/* The eval loop found through calls and FDEs, the method names
	 * through rb_id2str's code. */
	struct rb_range exec, core;
	struct rb_ids ids;
	if (!rbproc_find_eval(ef, &exec, &core))
		sink += exec.lo + core.hi;
	if (!rb_ids_find(ef, &ids))
		sink += ids.symbols;
	uint64_t lo, hi;
	if (!elf_file_fde_range(ef, 0x1000, &lo, &hi))
		sink += hi - lo;
	n = 0;
	elf_file_funcs(ef, each_func, &n);
	{
		const void *data;
		size_t len;

		if (!elf_file_section_bytes(ef, ".gnu_debugdata", &data, &len) && len)
			sink += ((const unsigned char *)data)[len - 1];
	}
	native_names(ef);
	elf_file_close(ef);
	return 0;
}
