/* output_fixture.h - what the unit tests of the folded and pprof encoders
 * (test_output.c) and of writing a profile's file (test_output_file.c)
 * share: a test profile of two threads, and a gzipped pprof unpacked.
 * Include it after <cmocka.h>. */
#ifndef TAIPAN_OUTPUT_FIXTURE_H
#define TAIPAN_OUTPUT_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "output/output.h"
#include "profile/profile.h"
#include "profile.pb-c.h"
#include "profile_build.h"

/* A format of output_formats[] by its name. */
#define FMT(name) output_format_from_name(name)
#define PERIOD_NS 10000000ull /* 100 Hz */
#define START_NS 1700000000000000000ull
#define DURATION_NS 2000000000ull

/* Frame ids of the test profile. */
struct ids {
	uint32_t mod, main, main21, run, weird, native, kernel, trunc;
};

static const struct prof_labels thread_a = {
    .pid = 100,
    .tid = 100,
    .thread_name = "MainThread",
    .comm = "python3",
    .runtime = "python",
    .runtime_version = "3.11.4",
    .version_alias = "python_version",
    .lock_name = "gil",
};

static const struct prof_labels thread_b = {
    .pid = 100,
    .tid = 101,
    .ns_pid = 7,
    .thread_name = "worker",
    .comm = "python3",
    .runtime = "python",
    .runtime_version = "3.11.4",
    .version_alias = "python_version",
    .lock_name = "gil",
};

/* Two threads of one process share a Python stack (4 and 2 samples); the
 * main thread also has a truncated stack that goes through native code into
 * the kernel (2 samples). So the leaves split 6:2, 75% / 25%. */
static inline struct profile *build_profile(struct ids *id)
{
	struct profile *p = profile_new();
	assert_non_null(p);
	profile_set_timing(p, PERIOD_NS, START_NS, DURATION_NS);

	id->mod = pb_py(p, "<module>", "app.py", 10, 1);
	id->main = pb_py(p, "main", "app.py", 20, 15);
	/* Another line of main: a location of its own, the same function. */
	id->main21 = pb_py(p, "main", "app.py", 21, 15);
	id->run = pb_py(p, "Worker.run", "lib/work.py", 42, 40);
	id->weird = pb_py(p, "weird;name\nx", "odd.py", 3, 1);
	id->native = pb_frame(p, (struct prof_frame){.name = "PyObject_Call",
						     .module = "/usr/lib/libpython3.11.so.1.0",
						     .addr = 0x7f0000001234,
						     .kind = PROF_FRAME_NATIVE});
	id->kernel = pb_frame(p, (struct prof_frame){.name = "do_syscall_64",
						     .module = "[kernel]",
						     .addr = 0xffffffff81000010ull,
						     .kind = PROF_FRAME_KERNEL});
	id->trunc =
	    pb_frame(p, (struct prof_frame){.name = "[truncated]", .kind = PROF_FRAME_MARKER});

	uint32_t py[] = {id->mod, id->main, id->run};
	uint32_t mixed[] = {id->trunc, id->weird, id->native, id->kernel};
	uint32_t only_mod[] = {id->mod};
	assert_int_equal(profile_add(p, py, 3, &thread_a, 3), 0);
	assert_int_equal(profile_add(p, py, 3, &thread_a, 1), 0);
	assert_int_equal(profile_add(p, py, 3, &thread_b, 2), 0);
	assert_int_equal(profile_add(p, mixed, 4, &thread_a, 2), 0);
	/* A stack with no samples must not appear anywhere. */
	assert_int_equal(profile_add(p, only_mod, 1, &thread_b, 0), 0);
	return p;
}

/* Inflates a gzip member; returns a buffer to free and its length. */
static inline uint8_t *gunzip(const uint8_t *in, size_t inlen, size_t *outlen)
{
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
	size_t cap = 4096, len = 0;
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
	assert_int_equal(zs.avail_in, 0); /* one member, nothing after it */
	inflateEnd(&zs);
	*outlen = len;
	return out;
}

static inline Perftools__Profiles__Profile *unpack_gz(const uint8_t *gz, size_t gzlen)
{
	size_t len;
	uint8_t *raw = gunzip(gz, gzlen, &len);
	Perftools__Profiles__Profile *prof = perftools__profiles__profile__unpack(NULL, len, raw);
	free(raw);
	assert_non_null(prof);
	return prof;
}

#endif /* TAIPAN_OUTPUT_FIXTURE_H */
