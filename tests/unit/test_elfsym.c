/* test_elfsym.c - unit tests for the ELF reader, on real interpreter binaries. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "need_file.h"

#include "proc/elfsym.h"

/* Overridable with -D, for machines laid out differently. */
#ifndef LIBPY311
#define LIBPY311 "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0"
#endif
#ifndef EXE311_PYENV
#define EXE311_PYENV "/root/.pyenv/versions/3.11.7/bin/python3.11"
#endif
#ifndef EXE311_DEBIAN
#define EXE311_DEBIAN "/usr/bin/python3.11"
#endif
#ifndef LIBPY36
#define LIBPY36 "/root/.pyenv/versions/3.6.15/lib/libpython3.6m.so.1.0"
#endif

static struct elf_file *open_ok(const char *path)
{
	struct elf_file *ef = NULL;
	int err;

	need_file(path);
	err = elf_file_open(path, &ef);
	if (err)
		fail_msg("%s: elf_file_open: %s", path, strerror(-err));
	return ef;
}

static bool is_lower_hex(const char *s)
{
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

/* Checks the build-id against the bytes of .note.gnu.build-id read through
 * elf_file_read(): two independent paths to the same note. */
static void check_build_id(struct elf_file *ef)
{
	char id[64], hex[64];
	unsigned char note[16 + 20];
	uint64_t addr, size;

	assert_int_equal(elf_file_build_id(ef, id, sizeof(id)), 0);
	assert_int_equal(strlen(id), 40);
	assert_true(is_lower_hex(id));
	/* Too small a buffer is an error, not a truncated id. */
	assert_int_equal(elf_file_build_id(ef, id, 40), -ENOSPC);

	assert_int_equal(elf_file_section(ef, ".note.gnu.build-id", &addr, &size), 0);
	assert_int_equal(size, sizeof(note));
	assert_int_equal(elf_file_read(ef, addr, note, sizeof(note)), 0);
	for (int i = 0; i < 20; i++)
		sprintf(hex + 2 * i, "%02x", note[16 + i]);
	assert_string_equal(id, hex);
}

static void test_libpython311(void **state)
{
	struct elf_file *ef = open_ok(LIBPY311);
	uint64_t rt, rtsz, ver, versz, addr, size, v = 0, bss, bsssz;
	const char *name = NULL;
	unsigned char buf[16];

	(void)state;
	assert_int_equal(elf_file_symbol(ef, "_PyRuntime", &rt, &rtsz), 0);
	assert_true(rt != 0);
	assert_true(rtsz > 1000);
	assert_int_equal(elf_file_symbol(ef, "Py_Version", &ver, &versz), 0);
	assert_int_equal(versz, 8);
	/* size is optional */
	assert_int_equal(elf_file_symbol(ef, "Py_Version", &ver, NULL), 0);

	/* .PyRuntime starts exactly at _PyRuntime (3.10+). */
	assert_int_equal(elf_file_section(ef, ".PyRuntime", &addr, &size), 0);
	assert_int_equal(addr, rt);
	assert_int_equal(size, rtsz);

	assert_int_equal(elf_file_read(ef, ver, &v, sizeof(v)), 0);
	assert_int_equal(v, 0x030b07f0);

	/* _PyRuntime has initialised data in the file. */
	assert_int_equal(elf_file_read(ef, rt, buf, sizeof(buf)), 0);
	/* .bss follows .PyRuntime: a read across the boundary, or inside
	 * .bss, has no bytes in the file. */
	assert_int_equal(elf_file_section(ef, ".bss", &bss, &bsssz), 0);
	assert_int_equal(bss, addr + size);
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(elf_file_read(ef, addr + size - 4, buf, 8), -ENOENT);
	assert_int_equal(buf[0], 0x5a); /* untouched */
	assert_int_equal(elf_file_read(ef, addr + size - 4, buf, 4), 0);
	assert_int_equal(elf_file_read(ef, bss, buf, 8), -ENOENT);
	assert_int_equal(elf_file_read(ef, UINT64_MAX - 3, buf, 8), -ENOENT);
	/* Address 0 is inside no allocated section (non-alloc ones such as
	 * .comment have address 0). */
	assert_int_equal(elf_file_read(ef, 0, buf, 4), -ENOENT);

	/* Undefined (imported) symbols are not definitions. */
	assert_int_equal(elf_file_symbol(ef, "malloc", &v, NULL), -ENOENT);
	assert_int_equal(elf_file_symbol(ef, "no_such_symbol_xyz", &v, NULL), -ENOENT);
	assert_int_equal(elf_file_symbol(ef, "", &v, NULL), -ENOENT);
	assert_int_equal(elf_file_section(ef, ".no_such", &addr, &size), -ENOENT);

	assert_string_equal(elf_file_soname(ef), "libpython3.11.so.1.0");
	assert_int_equal(elf_file_needs(ef, "libpython", &name), 0);
	assert_int_equal(elf_file_needs(ef, "libc.", &name), 1);
	assert_string_equal(name, "libc.so.6");
	assert_int_equal(elf_file_base_vaddr(ef), 0);
	check_build_id(ef);
	elf_file_close(ef);
}

struct find_ctx {
	const char *prefix;
	char found[64];
	size_t count;
};

static int find_prefix(const char *s, size_t len, void *ctx)
{
	struct find_ctx *f = ctx;

	f->count++;
	assert_int_equal(strlen(s), len);
	if (len < sizeof(f->found) && !strncmp(s, f->prefix, strlen(f->prefix))) {
		memcpy(f->found, s, len + 1);
		return 7;
	}
	return 0;
}

static int count_all(const char *s, size_t len, void *ctx)
{
	(void)s;
	assert_true(len > 0);
	(*(size_t *)ctx)++;
	return 0;
}

static void test_debian_python311(void **state)
{
	struct elf_file *ef = open_ok(EXE311_DEBIAN);
	struct find_ctx f = {.prefix = "3.11."};
	uint64_t rt, ver, addr, size, v = 0;
	const char *name = (const char *)1;
	size_t nstr = 0;
	unsigned micro;

	(void)state;
	/* Stripped: only .dynsym, which the interpreter exports itself
	 * (-export-dynamic) since libpython is linked in statically. */
	assert_int_equal(elf_file_section(ef, ".symtab", &addr, &size), -ENOENT);
	assert_int_equal(elf_file_section(ef, ".dynsym", &addr, &size), 0);
	assert_int_equal(elf_file_symbol(ef, "_PyRuntime", &rt, NULL), 0);
	assert_int_equal(elf_file_symbol(ef, "Py_Version", &ver, NULL), 0);
	assert_int_equal(elf_file_section(ef, ".PyRuntime", &addr, &size), 0);
	assert_int_equal(addr, rt);

	assert_int_equal(elf_file_needs(ef, "libpython", &name), 0);
	assert_ptr_equal(name, (const char *)1);
	assert_null(elf_file_soname(ef));
	/* Non-PIE: linked at 0x400000. */
	assert_int_equal(elf_file_base_vaddr(ef), 0x400000);
	check_build_id(ef);

	/* The version string in .rodata agrees with Py_Version. */
	assert_int_equal(elf_file_rodata_strings(ef, find_prefix, &f), 7);
	print_message("%s: .rodata version string \"%s\" after %zu strings\n", EXE311_DEBIAN,
		      f.found, f.count);
	assert_int_equal(sscanf(f.found, "3.11.%u", &micro), 1);
	assert_int_equal(elf_file_read(ef, ver, &v, sizeof(v)), 0);
	assert_int_equal(v >> 16, 0x030b);
	assert_int_equal((v >> 8) & 0xff, micro);

	assert_int_equal(elf_file_rodata_strings(ef, count_all, &nstr), 0);
	assert_true(nstr > f.count);
	elf_file_close(ef);
}

static void test_pyenv_python311_exe(void **state)
{
	struct elf_file *ef = open_ok(EXE311_PYENV);
	const char *name = NULL;
	uint64_t v;

	(void)state;
	assert_int_equal(elf_file_needs(ef, "libpython", &name), 1);
	assert_string_equal(name, "libpython3.11.so.1.0");
	assert_int_equal(elf_file_needs(ef, "libpython", NULL), 1);
	/* The symbols live in the library, not here. */
	assert_int_equal(elf_file_symbol(ef, "_PyRuntime", &v, NULL), -ENOENT);
	assert_int_equal(elf_file_symbol(ef, "main", &v, NULL), 0);
	assert_null(elf_file_soname(ef));
	assert_int_equal(elf_file_base_vaddr(ef), 0);
	check_build_id(ef);
	elf_file_close(ef);
}

static void test_libpython36(void **state)
{
	struct elf_file *ef = open_ok(LIBPY36);
	uint64_t head, headsz, fn, v;
	char id[41];

	(void)state;
	/* interp_head is static: only a local .symtab entry, in .bss. */
	assert_int_equal(elf_file_symbol(ef, "interp_head", &head, &headsz), 0);
	assert_int_equal(headsz, 8);
	assert_int_equal(elf_file_read(ef, head, &v, sizeof(v)), -ENOENT);
	assert_int_equal(elf_file_symbol(ef, "PyInterpreterState_Head", &fn, NULL), 0);
	assert_true(fn != head);
	assert_int_equal(elf_file_symbol(ef, "_PyRuntime", &v, NULL), -ENOENT);
	assert_int_equal(elf_file_symbol(ef, "Py_Version", &v, NULL), -ENOENT);
	assert_string_equal(elf_file_soname(ef), "libpython3.6m.so.1.0");
	assert_int_equal(elf_file_build_id(ef, id, sizeof(id)), 0);
	elf_file_close(ef);
}

static void test_symbol_lookups_are_indexed(void **state)
{
	struct elf_file *ef = open_ok(LIBPY311);
	struct timespec t0, t1;
	uint64_t v, v0;
	double ms;

	(void)state;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(elf_file_symbol(ef, "_PyRuntime", &v0, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	print_message("libpython3.11: first lookup (builds the index) %.2f ms\n", ms);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 100000; i++) {
		assert_int_equal(elf_file_symbol(ef, "_PyRuntime", &v, NULL), 0);
		assert_int_equal(elf_file_symbol(ef, "PyUnicode_AsUTF8", &v, NULL), 0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	print_message("libpython3.11: 200000 more lookups %.2f ms\n", ms);
	/* A linear scan of ~15k symbols per call would take seconds. */
	assert_true(ms < 2000);
	elf_file_close(ef);
}

static char *tmp_path(const char *tag)
{
	char *p;

	if (asprintf(&p, "/tmp/taipan-test-elfsym-%d-%s", (int)getpid(), tag) < 0)
		fail();
	return p;
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* The whole of path, malloc'd; *size gets its size. */
static unsigned char *slurp(const char *path, size_t *size)
{
	struct stat st;
	unsigned char *buf;
	int fd;

	need_file(path);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc(st.st_size);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, st.st_size), st.st_size);
	close(fd);
	*size = st.st_size;
	return buf;
}

/* Calls everything on ef with arguments that make sense for most files; the
 * point is to reach every code path on damaged input, not the answers. */
static int count_plt(const struct elf_func *f, void *ctx)
{
	(void)f;
	(*(size_t *)ctx)++;
	return 0;
}

static void exercise(struct elf_file *ef)
{
	uint64_t v, s, base;
	const char *name;
	char id[41], buf[64];
	size_t n = 0;

	elf_file_symbol(ef, "main", &v, &s);
	elf_file_symbol(ef, "_PyRuntime", &v, &s);
	elf_file_symbol(ef, "Py_Version", &v, &s);
	elf_file_section(ef, ".rodata", &v, &s);
	base = elf_file_base_vaddr(ef);
	elf_file_read(ef, base, buf, sizeof(buf));
	if (elf_file_section(ef, ".rodata", &v, &s) == 0)
		elf_file_read(ef, v, buf, s < sizeof(buf) ? s : sizeof(buf));
	if (elf_file_section(ef, ".dynamic", &v, &s) == 0)
		elf_file_read(ef, v, buf, 16);
	elf_file_soname(ef);
	elf_file_needs(ef, "libpython", &name);
	elf_file_needs(ef, "", &name);
	elf_file_build_id(ef, id, sizeof(id));
	elf_file_rodata_strings(ef, count_all, &n);
	elf_file_plt(ef, 65536, count_plt, &n);
}

struct plt_seen {
	char names[4096][64];
	uint64_t at[4096];
	size_t n;
};

static int plt_one(const struct elf_func *f, void *ctx)
{
	struct plt_seen *p = ctx;
	if (p->n < 4096) {
		snprintf(p->names[p->n], sizeof(p->names[0]), "%s", f->name);
		p->at[p->n++] = f->value;
	}
	assert_int_equal(f->size, 16);
	return 0;
}

/* elf_file_plt() names each stub as objdump -d does ("ADDR <NAME@plt>:"),
 * but the IRELATIVE ones, which no symbol names ("*ABS*+0x...@plt"). */
static void check_plt(const char *path)
{
	struct elf_file *ef = open_ok(path);
	struct plt_seen *p = calloc(1, sizeof(*p));
	char cmd[512], line[512];
	size_t want = 0;
	assert_non_null(p);
	assert_int_equal(elf_file_plt(ef, 65536, plt_one, p), 0);
	snprintf(cmd, sizeof(cmd), "objdump -d -j .plt -j .plt.sec '%s' 2>/dev/null", path);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long at;
		char name[256];
		size_t len;
		/* The resolver's entry is "FIRST@plt-0x10". */
		if (sscanf(line, "%llx <%255[^>]>:", &at, name) != 2 || (len = strlen(name)) < 4 ||
		    strcmp(name + len - 4, "@plt") || !strncmp(name, "*ABS*", 5))
			continue;
		bool found = false;
		for (size_t i = 0; i < p->n && !found; i++)
			found = p->at[i] == at && !strcmp(p->names[i], name);
		if (!found)
			fail_msg("%s: objdump's %s at 0x%llx not given", path, name, at);
		want++;
	}
	pclose(f);
	print_message("%s: %zu PLT stubs named, as objdump names them\n", path, p->n);
	assert_true(want > 0);
	assert_int_equal(p->n, want);
	free(p);
	elf_file_close(ef);
}

static void test_plt_names_equal_objdump(void **state)
{
	(void)state;
	check_plt(EXE311_DEBIAN);
	check_plt(LIBPY311);
	check_plt("/usr/lib/x86_64-linux-gnu/libc.so.6");
	/* With IBT the stubs that are called are .plt.sec's. */
	char *src = tmp_path("ibt.c"), *exe = tmp_path("ibt"), cmd[1024];
	static const char prog[] =
	    "#include <stdio.h>\n#include <stdlib.h>\n"
	    "int main(int c, char **v) { char *p = malloc(8); "
	    "puts(v[0]); printf(\"%d\\n\", atoi(v[0])); free(p); return c; }\n";
	write_file(src, prog, sizeof(prog) - 1);
	snprintf(cmd, sizeof(cmd), "cc -O2 -fcf-protection=full -Wl,-z,ibtplt -o '%s' '%s'", exe,
		 src);
	assert_int_equal(system(cmd), 0);
	check_plt(exe);
	unlink(src);
	unlink(exe);
	free(src);
	free(exe);
}

static void test_not_elf(void **state)
{
	char *path = tmp_path("text"), *empty = tmp_path("empty");
	struct elf_file *ef = (struct elf_file *)1;
	static const char text[] = "#!/bin/sh\necho this is not an ELF file\n";

	(void)state;
	write_file(path, text, sizeof(text) - 1);
	write_file(empty, "", 0);
	assert_int_equal(elf_file_open(path, &ef), -ENOEXEC);
	assert_int_equal(elf_file_open(empty, &ef), -ENOEXEC);
	assert_int_equal(elf_file_open("/tmp", &ef), -ENOEXEC);
	assert_int_equal(elf_file_open("/dev/null", &ef), -ENOEXEC);
	assert_ptr_equal(ef, (struct elf_file *)1); /* untouched */
	unlink(path);
	unlink(empty);
	free(path);
	free(empty);
}

static void test_missing(void **state)
{
	struct elf_file *ef = NULL;

	(void)state;
	assert_int_equal(elf_file_open("/nonexistent/taipan/libpython3.11.so", &ef), -ENOENT);
	assert_null(ef);
	elf_file_close(NULL);
}

static void test_wrong_kind(void **state)
{
	size_t size;
	unsigned char *orig = slurp(EXE311_PYENV, &size);
	char *path = tmp_path("kind");
	struct elf_file *ef = NULL;
	static const struct {
		size_t off;
		unsigned char val;
		const char *what;
	} patches[] = {
	    {4, 1, "ELFCLASS32"}, {5, 2, "big-endian"},	  {16, 1, "ET_REL"},
	    {16, 4, "ET_CORE"},	  {0, 0x7e, "bad magic"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(patches) / sizeof(patches[0]); i++) {
		unsigned char *copy = malloc(size);

		assert_non_null(copy);
		memcpy(copy, orig, size);
		copy[patches[i].off] = patches[i].val;
		write_file(path, copy, size);
		if (elf_file_open(path, &ef) != -ENOEXEC)
			fail_msg("%s: not refused", patches[i].what);
		free(copy);
	}
	unlink(path);
	free(path);
	free(orig);
}

static void test_truncated(void **state)
{
	static const char *files[] = {LIBPY311, EXE311_DEBIAN, EXE311_PYENV};
	static const size_t lens[] = {4096, 100, 64, 63, 1};
	char *path = tmp_path("trunc");

	(void)state;
	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		size_t size;
		unsigned char *orig = slurp(files[f], &size);

		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			struct elf_file *ef = NULL;
			int err;

			write_file(path, orig, lens[l] < size ? lens[l] : size);
			err = elf_file_open(path, &ef);
			/* The section headers are at the end of the file, so
			 * every prefix must be refused outright. */
			if (err != -ENOEXEC)
				fail_msg("%s cut to %zu bytes: got %d", files[f], lens[l], err);
		}
		/* Cut just before the section headers' end: still refused. */
		write_file(path, orig, size - 1);
		{
			struct elf_file *ef = NULL;

			assert_int_equal(elf_file_open(path, &ef), -ENOEXEC);
		}
		free(orig);
	}
	unlink(path);
	free(path);
}

/* xorshift64: a fixed seed makes every run damage the file the same way. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_corrupt_no_crash(void **state)
{
	size_t size, opened = 0, rounds = 3000;
	unsigned char *orig = slurp(EXE311_PYENV, &size), *copy = malloc(size);
	char *path = tmp_path("fuzz");
	uint64_t seed = 0x7a1face5eed5ULL;
	const char *env = getenv("TAIPAN_FUZZ_ROUNDS");
	uint64_t shoff;

	(void)state;
	/* More rounds on demand, e.g. for a long sanitizer run. */
	if (env && atol(env) > 0)
		rounds = atol(env);
	assert_non_null(copy);
	memcpy(&shoff, orig + 0x28, sizeof(shoff));
	assert_true(shoff < size);
	for (size_t r = 0; r < rounds; r++) {
		struct elf_file *ef = NULL;
		size_t flips = 1 + rnd(&seed) % 8, len = size;

		memcpy(copy, orig, size);
		for (size_t i = 0; i < flips; i++) {
			size_t off;

			/* Aim at the headers (ELF, program, section), where
			 * damage changes how the rest is read. */
			switch (rnd(&seed) % 3) {
			case 0:
				off = rnd(&seed) % 0x400;
				break;
			case 1:
				off = shoff + rnd(&seed) % (size - shoff);
				break;
			default:
				off = rnd(&seed) % size;
			}
			switch (rnd(&seed) % 4) {
			case 0:
				copy[off] = 0xff;
				break;
			case 1:
				copy[off] = 0;
				break;
			default:
				copy[off] = rnd(&seed);
			}
		}
		/* Now and then, also shorten the file. */
		if (rnd(&seed) % 8 == 0)
			len = rnd(&seed) % size;
		write_file(path, copy, len);
		if (elf_file_open(path, &ef) == 0) {
			opened++;
			exercise(ef);
			elf_file_close(ef);
		}
	}
	print_message("corrupt copies of %s: %zu of %zu opened and survived every call\n",
		      EXE311_PYENV, opened, rounds);
	assert_true(opened > 0);
	unlink(path);
	free(path);
	free(copy);
	free(orig);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_libpython311),
	    cmocka_unit_test(test_debian_python311),
	    cmocka_unit_test(test_pyenv_python311_exe),
	    cmocka_unit_test(test_libpython36),
	    cmocka_unit_test(test_symbol_lookups_are_indexed),
	    cmocka_unit_test(test_plt_names_equal_objdump),
	    cmocka_unit_test(test_not_elf),
	    cmocka_unit_test(test_missing),
	    cmocka_unit_test(test_wrong_kind),
	    cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_corrupt_no_crash),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
