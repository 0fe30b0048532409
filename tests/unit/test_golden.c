/* test_golden.c - every output format, byte for byte, against files kept in
 * tests/unit/golden/: a refactor of the profile model or of an encoder must
 * leave what users read exactly as it was, or change these files in the same
 * commit and say why.
 *
 * Two profiles go through every encoder: one of --mode cpu and one of --mode
 * wall. Between them they hold every frame kind (Python, native named and
 * unnamed, with and without a build-id, kernel, markers), two processes of
 * two Python versions (one in a pid namespace and a container's cgroup),
 * every thread state and GIL state, a frameless sample, hostile names, and
 * stacks added out of order. pprof is compared uncompressed (gzip's bytes
 * belong to zlib), as a hex dump so the file stays text.
 *
 * A difference writes what the encoder gave to build/golden-got/NAME and
 * fails; TAIPAN_GOLDEN_UPDATE=1 writes the files instead (then read the diff
 * before committing it).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cmocka.h>

#include "output/output.h"
#include "profile/profile.h"
#include "profile_build.h"

#define GOLDEN_DIR "tests/unit/golden"
#define GOT_DIR "build/golden-got"

/* The labels of a sample of a Python process (version v), in state st with
 * the GIL in g. */
#define LABELS(p, t, ns, tname, v, st, g)                                                          \
	{                                                                                          \
		.pid = (p), .tid = (t), .ns_pid = (ns), .thread_name = (tname), .comm = "python3", \
		.runtime = "python", .runtime_version = (v), .version_alias = "python_version",    \
		.lock_name = "gil",                                                                \
		.cgroup = (ns) ? "/system.slice/docker-0123456789ab.scope" : NULL,                 \
		.container_id = (ns) ? "0123456789ab" : NULL, .state = (st), .lock = (g)           \
	}

struct frames {
	uint32_t mod, main, main21, work, work_other_file, weird, evil;
	uint32_t call, call_nobid, unnamed, kernel, kernel_anon, trunc, unknown;
};

static void add_frames(struct profile *p, struct frames *f)
{
	f->mod = pb_py(p, "<module>", "/srv/app/main.py", 10, 1);
	f->main = pb_py(p, "main", "/srv/app/main.py", 20, 15);
	f->main21 = pb_py(p, "main", "/srv/app/main.py", 21, 15);
	f->work = pb_py(p, "Worker.run", "/srv/app/lib/work.py", 42, 40);
	/* The same name in another file is another function. */
	f->work_other_file = pb_py(p, "Worker.run", "/srv/app/lib/other.py", 7, 5);
	f->weird = pb_py(p, "weird;name\nx \"q\" <b>&amp;</b>", "odd dir/odd'.py", 3, 0);
	f->evil = pb_py(p, EVIL_FN, EVIL_FILE, 1, 1);
	f->call =
	    pb_frame(p, (struct prof_frame){.name = "PyObject_Call",
					    .module = "/usr/lib/libpython3.12.so.1.0",
					    .build_id = "0123456789abcdef0123456789abcdef01234567",
					    .addr = 0x1b2c3d,
					    .kind = PROF_FRAME_NATIVE});
	f->call_nobid = pb_frame(p, (struct prof_frame){.name = "qsort",
							.module = "/lib/x86_64-linux-gnu/libc.so.6",
							.addr = 0x4b00f,
							.kind = PROF_FRAME_NATIVE});
	f->unnamed = pb_frame(p, (struct prof_frame){.name = "libz.so.1+0x10764",
						     .module = "/lib/x86_64-linux-gnu/libz.so.1",
						     .build_id = "fedcba98",
						     .addr = 0x10764,
						     .kind = PROF_FRAME_NATIVE});
	f->kernel = pb_frame(p, (struct prof_frame){.name = "do_syscall_64",
						    .module = "[kernel]",
						    .addr = 0xffffffff81000010ull,
						    .kind = PROF_FRAME_KERNEL});
	f->kernel_anon = pb_frame(p, (struct prof_frame){.name = "0xffffffff8123abcd",
							 .module = "[kernel]",
							 .addr = 0xffffffff8123abcdull,
							 .kind = PROF_FRAME_KERNEL});
	f->trunc =
	    pb_frame(p, (struct prof_frame){.name = "[truncated]", .kind = PROF_FRAME_MARKER});
	f->unknown =
	    pb_frame(p, (struct prof_frame){.name = "[unknown]", .kind = PROF_FRAME_MARKER});
}

/* A --mode cpu profile: counts, GIL states, two Pythons. */
static struct profile *cpu_profile(void)
{
	struct profile *p = profile_new();
	assert_non_null(p);
	profile_set_timing(p, 10000000, 1700000000123456789ull, 2000000000);
	profile_set_mode(p, PROF_MODE_CPU);
	struct frames f;
	add_frames(p, &f);

	static const struct prof_labels main_held =
	    LABELS(100, 100, 0, "MainThread", "3.12.1", PROF_STATE_NONE, PROF_LOCK_HELD);
	static const struct prof_labels w_wait =
	    LABELS(100, 101, 0, "worker-1", "3.12.1", PROF_STATE_NONE, PROF_LOCK_WAITING);
	static const struct prof_labels w_rel =
	    LABELS(100, 101, 0, "worker-1", "3.12.1", PROF_STATE_NONE, PROF_LOCK_RELEASED);
	static const struct prof_labels old =
	    LABELS(200, 200, 7, "MainThread", "2.7.18", PROF_STATE_NONE, PROF_LOCK_NONE);
	static const struct prof_labels evil =
	    LABELS(300, 301, 0, EVIL_THREAD, "3.13.15t", PROF_STATE_NONE, PROF_LOCK_NONE);

	/* Out of order and repeated: the encoders sort what they must. */
	pb_add(p, &w_wait, 2, 5, f.mod, f.main, f.work, f.call, f.kernel);
	pb_add(p, &main_held, 5, 3, f.mod, f.main, f.work);
	pb_add(p, &main_held, 1, 3, f.mod, f.main21, f.work_other_file);
	pb_add(p, &w_rel, 3, 5, f.mod, f.main, f.call_nobid, f.unnamed, f.kernel_anon);
	pb_add(p, &main_held, 2, 3, f.mod, f.main, f.work);
	pb_add(p, &old, 4, 2, f.trunc, f.weird);
	pb_add(p, &old, 1, 0);
	pb_add(p, &evil, 1, 3, f.unknown, f.evil, f.kernel);
	pb_add(p, &w_wait, 0, 1, f.mod); /* no samples: nowhere */
	return p;
}

/* A --mode wall profile: running samples and time off the CPU. */
static struct profile *wall_profile(void)
{
	struct profile *p = profile_new();
	assert_non_null(p);
	profile_set_timing(p, 1000000, 1700000000000000000ull, 5000000000ull);
	profile_set_mode(p, PROF_MODE_WALL);
	struct frames f;
	add_frames(p, &f);

	static const struct prof_labels run =
	    LABELS(100, 100, 0, "MainThread", "3.12.1", PROF_STATE_RUNNING, PROF_LOCK_HELD);
	static const struct prof_labels sleep =
	    LABELS(100, 101, 0, "worker-1", "3.12.1", PROF_STATE_SLEEPING, PROF_LOCK_RELEASED);
	static const struct prof_labels runnable =
	    LABELS(100, 102, 0, "worker-2", "3.12.1", PROF_STATE_RUNNABLE, PROF_LOCK_WAITING);
	static const struct prof_labels blocked =
	    LABELS(200, 201, 7, "io", "2.7.18", PROF_STATE_BLOCKED, PROF_LOCK_NONE);

	uint32_t on[] = {f.mod, f.main, f.work};
	uint32_t off[] = {f.mod, f.main21, f.call, f.kernel};
	uint32_t io[] = {f.trunc, f.weird, f.kernel_anon};
	assert_int_equal(profile_add(p, on, 3, &run, 7), 0);
	assert_int_equal(profile_add_off(p, off, 4, &sleep, 2, 1500000000ull), 0);
	assert_int_equal(profile_add_off(p, on, 3, &runnable, 1, 3000000ull), 0);
	assert_int_equal(profile_add_off(p, io, 3, &blocked, 1, 250000000ull), 0);
	assert_int_equal(profile_add_off(p, off, 4, &sleep, 1, 500000000ull), 0);
	return p;
}

/* Inflates one gzip member into a buffer to free. */
static uint8_t *gunzip(const char *in, size_t inlen, size_t *outlen)
{
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
	size_t cap = 1 << 16, len = 0;
	uint8_t *out = malloc(cap);
	assert_non_null(out);
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)inlen;
	int rc;
	do {
		if (len == cap) {
			cap *= 2;
			out = realloc(out, cap);
			assert_non_null(out);
		}
		zs.next_out = out + len;
		zs.avail_out = (uInt)(cap - len);
		rc = inflate(&zs, Z_NO_FLUSH);
		assert_true(rc == Z_OK || rc == Z_STREAM_END);
		len = cap - zs.avail_out;
	} while (rc != Z_STREAM_END);
	assert_int_equal(zs.avail_in, 0);
	inflateEnd(&zs);
	*outlen = len;
	return out;
}

/* b as lines of 32 hex digits. */
static char *hexdump(const uint8_t *b, size_t n, size_t *outlen)
{
	char *s = malloc(n * 2 + n / 32 + 2);
	assert_non_null(s);
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		o += (size_t)sprintf(s + o, "%02x", b[i]);
		if (i % 32 == 31 || i + 1 == n)
			s[o++] = '\n';
	}
	s[o] = '\0';
	*outlen = o;
	return s;
}

enum enc {
	ENC_FOLDED,
	ENC_FOLDED_LINES,
	ENC_FOLDED_THREADS,
	ENC_FOLDED_BOTH,
	ENC_PPROF,
	ENC_SPEEDSCOPE,
	ENC_HTML
};

/* What encoder e writes for p, as it is kept in a golden file. */
static char *encode(const struct profile *p, enum enc e, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	assert_non_null(f);
	struct output_opts o = {
	    .folded_lines = e == ENC_FOLDED_LINES || e == ENC_FOLDED_BOTH,
	    .folded_threads = e == ENC_FOLDED_THREADS || e == ENC_FOLDED_BOTH,
	};
	int rc;
	switch (e) {
	case ENC_PPROF:
		rc = output_write_pprof(p, f, NULL);
		break;
	case ENC_SPEEDSCOPE:
		rc = output_write_speedscope(p, f, NULL);
		break;
	case ENC_HTML:
		rc = output_write_html(p, f, NULL);
		break;
	default:
		rc = output_write_folded(p, f, &o);
		break;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(fclose(f), 0);
	if (e != ENC_PPROF) {
		*len = n;
		return buf;
	}
	size_t rawlen;
	uint8_t *raw = gunzip(buf, n, &rawlen);
	free(buf);
	char *hex = hexdump(raw, rawlen, len);
	free(raw);
	return hex;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 1 << 16;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
	}
	fclose(f);
	*len = n;
	return buf;
}

static void spill(const char *path, const char *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* Compares what encoder e writes for p with GOLDEN_DIR/name; returns 1 on a
 * difference (reported), 0 when equal. */
static int check(const struct profile *p, enum enc e, const char *name)
{
	char path[512];
	size_t len, wantlen;
	char *got = encode(p, e, &len);
	snprintf(path, sizeof(path), "%s/%s", GOLDEN_DIR, name);
	const char *update = getenv("TAIPAN_GOLDEN_UPDATE");
	if (update && *update && strcmp(update, "0")) {
		spill(path, got, len);
		print_message("wrote %s (%zu bytes)\n", path, len);
		free(got);
		return 0;
	}
	char *want = slurp(path, &wantlen);
	int bad = 0;
	if (!want) {
		print_error("%s: missing (%s); TAIPAN_GOLDEN_UPDATE=1 writes it\n", path,
			    strerror(errno));
		bad = 1;
	} else if (wantlen != len || memcmp(want, got, len)) {
		size_t at = 0;
		while (at < len && at < wantlen && want[at] == got[at])
			at++;
		mkdir("build", 0755);
		mkdir(GOT_DIR, 0755);
		char gotpath[512];
		snprintf(gotpath, sizeof(gotpath), "%s/%s", GOT_DIR, name);
		spill(gotpath, got, len);
		print_error("%s: differs from byte %zu (%zu bytes, want %zu); got is in %s: "
			    "diff it, and if the change is meant, TAIPAN_GOLDEN_UPDATE=1\n",
			    path, at, len, wantlen, gotpath);
		bad = 1;
	}
	free(want);
	free(got);
	return bad;
}

static const struct {
	enum enc e;
	const char *suffix;
} encoders[] = {
    {ENC_FOLDED, ".folded"},
    {ENC_FOLDED_LINES, "-lines.folded"},
    {ENC_FOLDED_THREADS, "-threads.folded"},
    {ENC_FOLDED_BOTH, "-lines-threads.folded"},
    {ENC_PPROF, ".pprof.hex"},
    {ENC_SPEEDSCOPE, ".speedscope.json"},
    {ENC_HTML, ".html"},
};

static void check_all(struct profile *p, const char *stem)
{
	int bad = 0;
	for (size_t i = 0; i < sizeof(encoders) / sizeof(encoders[0]); i++) {
		char name[128];
		snprintf(name, sizeof(name), "%s%s", stem, encoders[i].suffix);
		bad += check(p, encoders[i].e, name);
	}
	profile_free(p);
	assert_int_equal(bad, 0);
}

static void test_cpu_profile(void **state)
{
	(void)state;
	check_all(cpu_profile(), "cpu");
}

static void test_wall_profile(void **state)
{
	(void)state;
	check_all(wall_profile(), "wall");
}

/* The same profile twice gives the same bytes: nothing depends on the
 * time, a pointer or a hash seed. */
static void test_deterministic(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(encoders) / sizeof(encoders[0]); i++) {
		struct profile *a = cpu_profile(), *b = cpu_profile();
		size_t la, lb;
		char *x = encode(a, encoders[i].e, &la);
		char *y = encode(b, encoders[i].e, &lb);
		assert_int_equal(la, lb);
		assert_memory_equal(x, y, la);
		free(x);
		free(y);
		profile_free(a);
		profile_free(b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cpu_profile),
	    cmocka_unit_test(test_wall_profile),
	    cmocka_unit_test(test_deterministic),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
