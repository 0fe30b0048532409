/* test_nativesym.c - unit tests for native symbolization, on this machine's
 * real libraries, checked against readelf, nm and c++filt. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "need_file.h"

#include "cpython/rules.h"
#include "profile/nativesym.h"
#include "proc/elfsym.h"

/* Overridable with -D, for machines laid out differently. */
#ifndef LIBC
#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#endif
#ifndef LIBSTDCXX
#define LIBSTDCXX "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
#endif
#ifndef EXE311_DEBIAN
#define EXE311_DEBIAN "/usr/bin/python3.11"
#endif
#ifndef LIBPY312
#define LIBPY312 "/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0"
#endif
#ifndef MAKE_MINIDEBUG
#define MAKE_MINIDEBUG "tests/fixtures/make_minidebug.sh"
#endif

/* --- the independent sources ---------------------------------------------- */

struct rsym {
	char name[512];
	uint64_t value, size;
};

/* Reads FUNC symbols of `readelf -sW [--dyn-syms] path` (versions dropped)
 * into a malloc()ed array. */
static size_t readelf_funcs(const char *path, bool dyn_only, struct rsym **out)
{
	char cmd[1024], line[2048];
	size_t n = 0, cap = 0;
	struct rsym *v = NULL;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -W %s '%s' 2>/dev/null", dyn_only ? "--dyn-syms" : "-s",
		 path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char value[32], size[32], type[32], bind[32], vis[32], ndx[32], name[512];
		char *at;

		if (sscanf(line, " %*[0-9]: %31s %31s %31s %31s %31s %31s %511s", value, size, type,
			   bind, vis, ndx, name) != 7 ||
		    strcmp(type, "FUNC") || !strcmp(ndx, "UND"))
			continue;
		if ((at = strchr(name, '@')))
			*at = '\0';
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			v = realloc(v, cap * sizeof(*v));
			assert_non_null(v);
		}
		memcpy(v[n].name, name, sizeof(v[n].name));
		v[n].value = strtoull(value, NULL, 16);
		v[n].size = strtoull(size, NULL, 0);
		n++;
	}
	pclose(p);
	*out = v;
	return n;
}

/* The first FUNC symbol of path named name (prefix: whose name starts with
 * it). Fails the test when there is none. */
static struct rsym readelf_func(const char *path, const char *name, bool prefix)
{
	struct rsym *v, r;
	size_t n = readelf_funcs(path, false, &v);

	for (size_t i = 0; i < n; i++)
		if (prefix ? !strncmp(v[i].name, name, strlen(name)) : !strcmp(v[i].name, name)) {
			r = v[i];
			free(v);
			return r;
		}
	free(v);
	fail_msg("%s: readelf shows no function %s", path, name);
	return r;
}

static bool in_dynsym(const char *path, const char *name)
{
	struct rsym *v;
	size_t n = readelf_funcs(path, true, &v);
	bool found = false;

	for (size_t i = 0; i < n && !found; i++)
		found = !strcmp(v[i].name, name);
	free(v);
	return found;
}

static void build_id_of(const char *path, char *id, size_t size)
{
	struct elf_file *ef;

	assert_int_equal(elf_file_open(path, &ef), 0);
	assert_int_equal(elf_file_build_id(ef, id, size), 0);
	elf_file_close(ef);
}

static void lookup_ok(struct nativesym *ns, const char *path, uint64_t vaddr,
		      struct nativesym_sym *s)
{
	struct nativesym_file f = {.path = path};
	int err = nativesym_lookup(ns, &f, vaddr, s);

	if (err)
		fail_msg("%s: nativesym_lookup: %s", path, strerror(-err));
}

/* --- tests ---------------------------------------------------------------- */

/* libc's qsort, from .dynsym; and build-id and module as given. */
static void test_libc_qsort(void **state)
{
	struct nativesym *ns = nativesym_new();
	struct nativesym_sym s;
	struct rsym q;
	char id[130], buf[256];

	(void)state;
	need_file(LIBC);
	q = readelf_func(LIBC, "qsort", false);
	assert_true(q.size > 1);
	lookup_ok(ns, LIBC, q.value + q.size - 1, &s);
	assert_non_null(s.name);
	assert_string_equal(s.name, "qsort");
	assert_int_equal(s.offset, q.size - 1);
	assert_string_equal(s.module, LIBC);
	build_id_of(LIBC, id, sizeof(id));
	assert_string_equal(s.build_id, id);
	nativesym_format(&s, buf, sizeof(buf));
	assert_string_equal(buf, "qsort");
	nativesym_free(ns);
}

/* libc's internal functions, which .dynsym lacks, through libc6-dbg's file
 * under /usr/lib/debug/.build-id/; also reached through a process root. */
static void test_libc_debug_file(void **state)
{
	const char *const internals[] = {"msort_with_tmp", "start_thread"};
	struct nativesym *ns = nativesym_new();
	char id[130], dbg[512];

	(void)state;
	need_file(LIBC);
	build_id_of(LIBC, id, sizeof(id));
	snprintf(dbg, sizeof(dbg), "/usr/lib/debug/.build-id/%.2s/%s.debug", id, id + 2);
	need_file(dbg);
	for (size_t i = 0; i < 2; i++) {
		struct rsym r = readelf_func(dbg, internals[i], true);
		struct nativesym_file f = {.path = "/proc/self/root" LIBC,
					   .root = "/proc/self/root"};
		struct nativesym_sym s;

		assert_false(in_dynsym(LIBC, r.name));
		assert_true(r.size > 2);
		lookup_ok(ns, LIBC, r.value + r.size / 2, &s);
		assert_non_null(s.name);
		assert_string_equal(s.name, r.name);
		assert_int_equal(s.offset, r.size / 2);
		assert_int_equal(s.source, NATIVESYM_SRC_DEBUG);

		/* The same through /proc/self/root: the module is the path
		 * the process sees, and the index is the one already built. */
		assert_int_equal(nativesym_lookup(ns, &f, r.value, &s), 0);
		assert_string_equal(s.name, r.name);
		assert_string_equal(s.module, LIBC);
	}
	nativesym_free(ns);
}

static int cmp_rsym(const void *a, const void *b)
{
	const struct rsym *x = a, *y = b;

	return x->value < y->value ? -1 : x->value > y->value;
}

/* The first of cand[0..n) that an FDE of .eh_frame (readelf
 * --debug-dump=frames) covers: the compiler's own record that a function is
 * there. 0 when none is. */
static uint64_t first_in_fde(const char *path, const uint64_t *cand, size_t n)
{
	char cmd[1024], line[1024];
	size_t best = n;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -W --debug-dump=frames '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *pc = strstr(line, " pc=");
		uint64_t lo, hi;

		if (!pc || sscanf(pc, " pc=%" SCNx64 "..%" SCNx64, &lo, &hi) != 2)
			continue;
		for (size_t i = 0; i < best; i++)
			if (cand[i] >= lo && cand[i] < hi)
				best = i;
	}
	pclose(p);
	return best < n ? cand[best] : 0;
}

/* Debian's static, stripped python3.11: the eval loop is named from
 * .dynsym; code of a static function, between .dynsym's functions, is
 * left unnamed instead of taking its neighbour's name. */
static void test_python311_stripped(void **state)
{
	struct nativesym *ns = nativesym_new();
	struct nativesym_sym s;
	struct rsym ev, *v;
	uint64_t gap, cand[64];
	size_t n, nc = 0;
	char buf[256];

	(void)state;
	need_file(EXE311_DEBIAN);
	ev = readelf_func(EXE311_DEBIAN, "_PyEval_EvalFrameDefault", false);
	lookup_ok(ns, EXE311_DEBIAN, ev.value + 100, &s);
	assert_non_null(s.name);
	assert_string_equal(s.name, "_PyEval_EvalFrameDefault");
	assert_int_equal(s.offset, 100);
	assert_int_equal(s.source, NATIVESYM_SRC_DYNSYM);
	assert_true(cpython_is_eval_loop(s.name));

	/* The middle of gaps of 4 KiB between .dynsym functions, the first
	 * of which .eh_frame says holds a function. */
	n = readelf_funcs(EXE311_DEBIAN, true, &v);
	assert_true(n > 1000);
	qsort(v, n, sizeof(*v), cmp_rsym);
	for (size_t i = 0; i + 1 < n && nc < 64; i++) {
		uint64_t end = v[i].value + v[i].size;

		if (v[i + 1].value >= end + 4096)
			cand[nc++] = end + 2048;
	}
	free(v);
	gap = first_in_fde(EXE311_DEBIAN, cand, nc);
	if (!gap)
		fail_msg("%s: no 4 KiB gap between .dynsym functions with an FDE", EXE311_DEBIAN);
	lookup_ok(ns, EXE311_DEBIAN, gap, &s);
	if (s.name)
		fail_msg("0x%" PRIx64 " is in a static function, but was named %s", gap, s.name);
	assert_int_equal(s.source, NATIVESYM_SRC_NONE);
	nativesym_format(&s, buf, sizeof(buf));
	snprintf(buf + 128, 128, "python3.11+0x%" PRIx64, gap);
	assert_string_equal(buf, buf + 128);
	nativesym_free(ns);
}

/* pyenv's libpython3.12 has a .symtab, with the eval loop's cold part. */
static void test_libpython312_cold(void **state)
{
	struct nativesym *ns = nativesym_new();
	struct nativesym_sym s;
	struct rsym cold, hot;

	(void)state;
	need_file(LIBPY312);
	cold = readelf_func(LIBPY312, "_PyEval_EvalFrameDefault.cold", false);
	hot = readelf_func(LIBPY312, "_PyEval_EvalFrameDefault", false);
	lookup_ok(ns, LIBPY312, cold.value + cold.size / 2, &s);
	assert_non_null(s.name);
	assert_string_equal(s.name, "_PyEval_EvalFrameDefault.cold");
	assert_int_equal(s.source, NATIVESYM_SRC_SYMTAB);
	assert_true(cpython_is_eval_loop(s.name));
	lookup_ok(ns, LIBPY312, hot.value + hot.size - 1, &s);
	assert_string_equal(s.name, "_PyEval_EvalFrameDefault");
	assert_true(cpython_is_eval_loop(s.name));
	nativesym_free(ns);
}

/* A mangled .dynsym name of libstdc++, demangled as c++filt does. */
static void test_cxx_demangled(void **state)
{
	const char *mangled = "_ZNSt6thread4joinEv";
	struct nativesym *ns = nativesym_new();
	char cmd[256], want[256] = "";
	struct nativesym_sym s;
	struct rsym r;
	FILE *p;

	(void)state;
	need_file(LIBSTDCXX);
	r = readelf_func(LIBSTDCXX, mangled, false);
	snprintf(cmd, sizeof(cmd), "c++filt %s", mangled);
	p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(want, sizeof(want), p));
	pclose(p);
	want[strcspn(want, "\n")] = '\0';
	assert_string_equal(want, "std::thread::join()");
	lookup_ok(ns, LIBSTDCXX, r.value + 1, &s);
	assert_non_null(s.name);
	assert_string_equal(s.name, want);
	/* Demangled once: the same string the second time. */
	{
		const char *first = s.name;

		lookup_ok(ns, LIBSTDCXX, r.value + 2, &s);
		assert_ptr_equal(s.name, first);
	}
	nativesym_free(ns);
}

/* A binary made as Fedora's find-debuginfo makes MiniDebugInfo: stripped,
 * with its static functions only in .gnu_debugdata. */
static void test_minidebuginfo(void **state)
{
	char dir[] = "/tmp/test_nativesym.XXXXXX", cmd[512], path[256], line[256];
	struct nativesym *ns = nativesym_new();
	struct elf_file *ef;
	struct nativesym_sym s;
	uint64_t addr = 0, a, sz;
	const void *data;
	size_t len;
	FILE *fp;

	(void)state;
	need_file(MAKE_MINIDEBUG);
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "%s %s >%s/log 2>&1", MAKE_MINIDEBUG, dir, dir);
	if (system(cmd) != 0)
		fail_msg("%s failed: see %s/log", MAKE_MINIDEBUG, dir);
	/* nm of the binary before it was stripped. */
	snprintf(path, sizeof(path), "%s/prog.nm", dir);
	fp = fopen(path, "r");
	assert_non_null(fp);
	while (fgets(line, sizeof(line), fp))
		if (strstr(line, " t spin_local"))
			addr = strtoull(line, NULL, 16);
	fclose(fp);
	assert_true(addr != 0);

	snprintf(path, sizeof(path), "%s/prog", dir);
	assert_int_equal(elf_file_open(path, &ef), 0);
	assert_int_equal(elf_file_section(ef, ".symtab", &a, &sz), -ENOENT);
	assert_int_equal(elf_file_section_bytes(ef, ".gnu_debugdata", &data, &len), 0);
	elf_file_close(ef);

	lookup_ok(ns, path, addr + 1, &s);
	assert_non_null(s.name);
	assert_string_equal(s.name, "spin_local");
	assert_int_equal(s.offset, 1);
	assert_int_equal(s.source, NATIVESYM_SRC_MINIDEBUG);
	nativesym_free(ns);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* A missing file, a text file, a directory and a truncated ELF are errors
 * that name the reason; none crashes, and the caller still gets the module. */
static void test_bad_files(void **state)
{
	char dir[] = "/tmp/test_nativesym.XXXXXX", path[256], cmd[512];
	struct nativesym *ns = nativesym_new();
	struct nativesym_file f = {.path = path};
	struct nativesym_sym s;
	uint64_t v;

	(void)state;
	need_file(LIBPY312);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/missing.so", dir);
	assert_int_equal(nativesym_lookup(ns, &f, 0x1000, &s), -ENOENT);
	assert_string_equal(s.module, path);
	assert_string_equal(s.build_id, "");
	assert_null(s.name);

	snprintf(path, sizeof(path), "%s/text.so", dir);
	write_file(path, "#!/bin/sh\nexit 0\n", 17);
	assert_int_equal(nativesym_lookup(ns, &f, 0x1000, &s), -ENOEXEC);
	/* Remembered by device and inode: the same answer again. */
	assert_int_equal(nativesym_lookup(ns, &f, 0x1000, &s), -ENOEXEC);
	assert_int_equal(nativesym_vaddr(ns, &f, 0, &v), -ENOEXEC);

	assert_int_equal(nativesym_lookup(ns, &(struct nativesym_file){.path = dir}, 0, &s),
			 -ENOEXEC);

	/* The first 64 KiB of libpython: headers that promise what is gone. */
	snprintf(path, sizeof(path), "%s/truncated.so", dir);
	snprintf(cmd, sizeof(cmd), "head -c 65536 %s > %s", LIBPY312, path);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(nativesym_lookup(ns, &f, 0x1000, &s), -ENOEXEC);

	nativesym_free(ns);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* Two inodes with one build-id share one index; the bound evicts. */
static void test_cache(void **state)
{
	char dir[] = "/tmp/test_nativesym.XXXXXX", copy[256], cmd[512];
	struct nativesym *ns = nativesym_new();
	struct nativesym_sym s;
	size_t files, bytes;
	struct rsym q, ev;

	(void)state;
	need_file(LIBC);
	need_file(LIBPY312);
	q = readelf_func(LIBC, "qsort", false);
	assert_non_null(mkdtemp(dir));
	snprintf(copy, sizeof(copy), "%s/libc.so.6", dir);
	snprintf(cmd, sizeof(cmd), "cp %s %s", LIBC, copy);
	assert_int_equal(system(cmd), 0);

	lookup_ok(ns, LIBC, q.value, &s);
	lookup_ok(ns, copy, q.value, &s);
	assert_string_equal(s.name, "qsort");
	assert_string_equal(s.module, copy);
	nativesym_counts(ns, &files, &bytes);
	assert_int_equal(files, 1);
	assert_true(bytes > 0);

	lookup_ok(ns, LIBPY312, 0, &s);
	nativesym_counts(ns, &files, &bytes);
	assert_int_equal(files, 2);
	nativesym_set_limits(ns, 1, 1 << 30);
	nativesym_counts(ns, &files, &bytes);
	assert_int_equal(files, 1);
	/* Evicted files come back on demand, under the bound. */
	lookup_ok(ns, copy, q.value, &s);
	assert_string_equal(s.name, "qsort");
	nativesym_counts(ns, &files, &bytes);
	assert_int_equal(files, 1);

	/* Rewritten in place, as an upgrade may leave a file: the same
	 * device and inode, another size and mtime, so another index. */
	ev = readelf_func(LIBPY312, "_PyEval_EvalFrameDefault", false);
	snprintf(cmd, sizeof(cmd), "cp %s %s", LIBPY312, copy);
	assert_int_equal(system(cmd), 0);
	lookup_ok(ns, copy, ev.value, &s);
	assert_non_null(s.name);
	assert_string_equal(s.name, "_PyEval_EvalFrameDefault");
	nativesym_free(ns);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* File offsets become link-time addresses through the PT_LOAD that holds
 * them (python3.11 is not PIE: its text is at 0x4xxxxx). */
static void test_vaddr(void **state)
{
	struct nativesym *ns = nativesym_new();
	struct nativesym_file f = {.path = EXE311_DEBIAN};
	char cmd[512], line[512];
	uint64_t off = 0, va = 0, filesz = 0, v;
	FILE *p;

	(void)state;
	need_file(EXE311_DEBIAN);
	snprintf(cmd, sizeof(cmd), "readelf -lW %s 2>/dev/null", EXE311_DEBIAN);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		uint64_t o, a, pa, fs;

		if (strstr(line, " R E ") &&
		    sscanf(line, " LOAD 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64 " 0x%" SCNx64, &o,
			   &a, &pa, &fs) == 4) {
			off = o;
			va = a;
			filesz = fs;
		}
	}
	pclose(p);
	assert_true(filesz > 0x1000);
	assert_int_equal(nativesym_vaddr(ns, &f, off + 0x123, &v), 0);
	assert_int_equal(v, va + 0x123);
	assert_int_equal(nativesym_vaddr(ns, &f, UINT64_MAX - 5, &v), -ERANGE);
	nativesym_free(ns);
}

static void test_classify(void **state)
{
	(void)state;
	assert_true(cpython_is_eval_loop("_PyEval_EvalFrameDefault"));
	assert_true(cpython_is_eval_loop("_PyEval_EvalFrameDefault.cold"));
	assert_true(cpython_is_eval_loop("_PyEval_EvalFrameDefault.constprop.0"));
	assert_true(cpython_is_eval_loop("PyEval_EvalFrameEx"));
	assert_false(cpython_is_eval_loop("_PyEval_EvalFrameDefaultX"));
	assert_false(cpython_is_eval_loop("_PyEval_EvalFrame"));
	assert_false(cpython_is_eval_loop("PyEval_EvalFrame"));
	assert_false(cpython_is_eval_loop(NULL));

	assert_true(cpython_is_interpreter("/usr/lib/libpython3.12.so.1.0", NULL));
	assert_true(cpython_is_interpreter("/usr/bin/python3.11", NULL));
	assert_false(cpython_is_interpreter("/usr/lib/x86_64-linux-gnu/libc.so.6", NULL));
	/* A renamed interpreter is known by what pyproc found. */
	assert_true(cpython_is_interpreter("/tmp/renamed", "/tmp/renamed"));
	assert_false(cpython_is_interpreter("/usr/bin/python3.11", "/tmp/renamed"));

	assert_true(cpython_is_call_machinery("PyObject_Vectorcall", true));
	assert_true(cpython_is_call_machinery("_PyFunction_Vectorcall", true));
	assert_true(cpython_is_call_machinery("cfunction_vectorcall_FASTCALL_KEYWORDS", true));
	assert_true(cpython_is_call_machinery("method_vectorcall_O.cold", true));
	assert_true(cpython_is_call_machinery("call_function", true));
	assert_true(cpython_is_call_machinery("slot_tp_call", true));
	/* Builtins' own code, the eval loop, other modules, unnamed frames. */
	assert_false(cpython_is_call_machinery("list_sort_impl", true));
	assert_false(cpython_is_call_machinery("sre_ucs1_match", true));
	assert_false(cpython_is_call_machinery("time_sleep", true));
	assert_false(cpython_is_call_machinery("_PyEval_EvalFrameDefault", true));
	assert_false(cpython_is_call_machinery("PyObject_Vectorcall", false));
	assert_false(cpython_is_call_machinery(NULL, true));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_libc_qsort),
	    cmocka_unit_test(test_libc_debug_file),
	    cmocka_unit_test(test_python311_stripped),
	    cmocka_unit_test(test_libpython312_cold),
	    cmocka_unit_test(test_cxx_demangled),
	    cmocka_unit_test(test_minidebuginfo),
	    cmocka_unit_test(test_bad_files),
	    cmocka_unit_test(test_cache),
	    cmocka_unit_test(test_vaddr),
	    cmocka_unit_test(test_classify),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
