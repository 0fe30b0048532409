/* test_wire.c - unit tests for packed samples (core/wire.c): what BPF's
 * submit() sends, each array cut to its used entries, unpacks to the sample
 * it packed; a record whose size does not match its counts, or whose counts
 * pass their arrays, is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/wire.h"

static struct tp_sample *full(uint16_t nk, uint16_t nu, uint16_t nf)
{
	struct tp_sample *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	s->kind = TP_EV_SAMPLE;
	s->pid = 7;
	s->tid = 8;
	s->nkstack = nk;
	s->nustack = nu;
	s->nframes = nf;
	s->state = 3;
	s->runtime = 1;
	memcpy(s->comm, "worker", 7);
	for (int i = 0; i < nk; i++)
		s->kstack[i] = 0xffffffff81000000ull + (uint64_t)i;
	for (int i = 0; i < nu; i++) {
		s->ustack[i] = 0x400000ull + 16 * (uint64_t)i;
		if (i % 3 == 0)
			s->anchored[i / 64] |= 1ull << (i % 64);
		if (i % 5 == 0)
			s->exact[i / 64] |= 1ull << (i % 64);
	}
	for (int i = 0; i < nf; i++)
		s->frames[i] = (struct tp_frame){.code = 0x7000 + (uint64_t)i, .pos = (uint32_t)i};
	return s;
}

static void round_trip(uint16_t nk, uint16_t nu, uint16_t nf)
{
	struct tp_sample *s = full(nk, nu, nf), *w = malloc(sizeof(*s)),
			 *out = calloc(1, sizeof(*s));
	size_t n;

	assert_non_null(w);
	assert_non_null(out);
	n = wire_pack(s, w);
	assert_int_equal(n, tp_sample_wire_bytes(s));
	assert_int_equal(n, TP_SAMPLE_HDR + 8u * nk + 16u * TP_UWORDS(nu) + 8u * nu +
				sizeof(struct tp_frame) * nf);
	assert_int_equal(wire_unpack(w, n, out), 0);
	assert_memory_equal(out, s, TP_SAMPLE_HDR);
	assert_memory_equal(out->kstack, s->kstack, 8u * nk);
	assert_memory_equal(out->anchored, s->anchored, 8u * TP_UWORDS(nu));
	assert_memory_equal(out->exact, s->exact, 8u * TP_UWORDS(nu));
	assert_memory_equal(out->ustack, s->ustack, 8u * nu);
	assert_memory_equal(out->frames, s->frames, sizeof(struct tp_frame) * nf);
	/* A byte more or less is not a sample. */
	assert_int_equal(wire_unpack(w, n - 1, out), -1);
	assert_int_equal(wire_unpack(w, n + 1, out), -1);
	free(s);
	free(w);
	free(out);
}

/* Empty, typical, and every array full: the deepest native stack, the
 * whole kernel stack and TP_MAX_FRAMES interpreted frames. */
static void test_round_trip(void **state)
{
	(void)state;
	round_trip(0, 0, 0);
	round_trip(12, 40, 30);
	round_trip(1, 64, 1);
	round_trip(0, 65, 0);
	round_trip(TP_KSTACK_MAX, TP_USTACK_MAX, TP_MAX_FRAMES);
}

/* A sample with no native stack costs none of its bytes on the wire. */
static void test_no_native_bytes(void **state)
{
	(void)state;
	struct tp_sample *s = full(20, 0, 10);
	assert_int_equal(tp_sample_wire_bytes(s), TP_SAMPLE_HDR + 8 * 20 + 32 * 10);
	free(s);
}

/* Counts beyond their arrays, and records shorter than a header. */
static void test_refused(void **state)
{
	(void)state;
	struct tp_sample *s = full(2, 2, 2), *w = malloc(sizeof(*s)), *out = malloc(sizeof(*s));
	assert_non_null(w);
	assert_non_null(out);
	size_t n = wire_pack(s, w);
	assert_int_equal(wire_unpack(w, TP_SAMPLE_HDR - 1, out), -1);
	w->nustack = TP_USTACK_MAX + 1;
	assert_int_equal(wire_unpack(w, n, out), -1);
	w->nustack = 2;
	w->nkstack = TP_KSTACK_MAX + 1;
	assert_int_equal(wire_unpack(w, n, out), -1);
	w->nkstack = 2;
	w->nframes = TP_MAX_FRAMES + 1;
	assert_int_equal(wire_unpack(w, n, out), -1);
	s->nframes = TP_MAX_FRAMES + 1;
	assert_int_equal(wire_pack(s, w), 0);
	free(s);
	free(w);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_no_native_bytes),
	    cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
