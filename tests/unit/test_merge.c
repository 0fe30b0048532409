/* test_merge.c - unit tests for the merge of native and interpreted frames
 * (profile/merge.c): where each eval loop's frames go, the root-most frames
 * no eval frame holds when the native walk was cut, the eval frames no
 * group fills when the interpreted walk was cut, counts that cannot match
 * (never a guess), the empty group of an eval loop between its shim and its
 * first frame, and the filtered view. Pure: arrays in, steps out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "profile/merge.h"

#define OTHER MERGE_NK_OTHER
#define EVAL MERGE_NK_EVAL
#define MACH MERGE_NK_MACHINERY

/* The steps as a string, root first: "N5 P1 D C" (native 5, interpreted 1,
 * disagree, native cut). */
static void merged(const struct merge_in *in, char *out, size_t len)
{
	struct merge_step steps[MERGE_STEPS_MAX(16, 16)];
	int gend[17];
	size_t n = merge_stack(in, gend, steps);
	size_t at = 0;
	out[0] = 0;
	assert_true(n <= MERGE_STEPS_MAX(in->nnative, in->nframes));
	for (size_t i = 0; i < n; i++) {
		const struct merge_step *s = &steps[i];
		int w = 0;
		switch (s->op) {
		case MERGE_NATIVE:
			w = snprintf(out + at, len - at, "%sN%u", i ? " " : "", s->index);
			break;
		case MERGE_PYTHON:
			w = snprintf(out + at, len - at, "%sP%u", i ? " " : "", s->index);
			break;
		case MERGE_MARK_DISAGREE:
			w = snprintf(out + at, len - at, "%sD", i ? " " : "");
			break;
		case MERGE_MARK_NATIVE_CUT:
			w = snprintf(out + at, len - at, "%sC", i ? " " : "");
			break;
		default:
			fail_msg("unknown step %u", s->op);
		}
		at += (size_t)w;
	}
}

static struct merge_in in_of(const uint8_t *kind, uint32_t nnative, const struct tp_frame *frames,
			     uint32_t nframes)
{
	return (struct merge_in){
	    .nkind = kind, .nnative = nnative, .frames = frames, .nframes = nframes};
}

/* Before 3.11 each eval-loop call runs one frame: the k-th eval frame from
 * the leaf takes the k-th frame. Everything is shown, root first. */
static void test_one_frame_per_eval(void **state)
{
	(void)state;
	/* leaf first: a C function, eval, call machinery, eval, main, _start */
	const uint8_t kind[] = {OTHER, EVAL, MACH, EVAL, OTHER, OTHER};
	const struct tp_frame frames[2] = {{0}};
	struct merge_in in = in_of(kind, 6, frames, 2);
	char got[128];
	merged(&in, got, sizeof(got));
	assert_string_equal(got, "N5 N4 P1 N2 P0 N0");
}

/* The filtered view starts at the first interpreted frame and hides the
 * call machinery after each: what was called from Python shows. */
static void test_filtered(void **state)
{
	(void)state;
	const uint8_t kind[] = {OTHER, EVAL, MACH, EVAL, OTHER, OTHER};
	const struct tp_frame frames[2] = {{0}};
	struct merge_in in = in_of(kind, 6, frames, 2);
	char got[128];
	in.filtered = true;
	merged(&in, got, sizeof(got));
	assert_string_equal(got, "P1 P0 N0");
	/* A frame that is not machinery ends the hiding: shown, and what
	 * follows it too. */
	const uint8_t kind2[] = {OTHER, MACH, OTHER, MACH, EVAL, OTHER};
	const struct tp_frame one[1] = {{0}};
	in = in_of(kind2, 6, one, 1);
	in.filtered = true;
	merged(&in, got, sizeof(got));
	assert_string_equal(got, "P0 N2 N1 N0");
}

/* From 3.11 an eval-loop call runs frames down to the next entry frame:
 * the groups end at entry frames and at the last frame. */
static void test_entry_frames_group(void **state)
{
	(void)state;
	const uint8_t kind[] = {EVAL, MACH, EVAL, OTHER};
	struct tp_frame frames[3] = {{0}};
	frames[1].flags = TP_FF_ENTRY;
	struct merge_in in = in_of(kind, 4, frames, 3);
	in.interp_frames = true;
	char got[128];
	merged(&in, got, sizeof(got));
	assert_string_equal(got, "N3 P2 N1 P1 P0");
	/* Without the entry flag, one eval frame would have to run three
	 * frames and the other none: they disagree. */
	frames[1].flags = 0;
	merged(&in, got, sizeof(got));
	assert_string_equal(got, "D P2 P1 P0 N3 N2 N1 N0");
}

/* Counts that cannot match, with nothing cut, are never paired: a marker,
 * then the interpreted frames, then the native ones. */
static void test_disagree(void **state)
{
	(void)state;
	const uint8_t kind[] = {OTHER, EVAL, OTHER};
	const struct tp_frame frames[2] = {{0}};
	struct merge_in in = in_of(kind, 3, frames, 2);
	char got[128];
	merged(&in, got, sizeof(got));
	assert_string_equal(got, "D P1 P0 N2 N1 N0");
	/* No eval frame at all (a stripped interpreter named nothing). */
	const uint8_t none[] = {OTHER, OTHER};
	in = in_of(none, 2, frames, 2);
	merged(&in, got, sizeof(got));
	assert_string_equal(got, "D P1 P0 N1 N0");
}

/* The native walk stopped short: the root-most groups no eval frame holds
 * go at the root, above the native part's marker. */
static void test_native_cut(void **state)
{
	(void)state;
	const uint8_t kind[] = {EVAL, OTHER};
	const struct tp_frame frames[3] = {{0}};
	struct merge_in in = in_of(kind, 2, frames, 3);
	in.nat_cut = true;
	char got[128];
	merged(&in, got, sizeof(got));
	assert_string_equal(got, "P2 P1 C N1 P0");
	/* Cut, and the counts match: the marker is at the root. */
	const struct tp_frame one[1] = {{0}};
	in = in_of(kind, 2, one, 1);
	in.nat_cut = true;
	merged(&in, got, sizeof(got));
	assert_string_equal(got, "C N1 P0");
}

/* The interpreted walk stopped short: eval frames beyond the groups it
 * read are shown as native frames. */
static void test_interp_cut(void **state)
{
	(void)state;
	const uint8_t kind[] = {EVAL, EVAL, OTHER};
	const struct tp_frame frames[1] = {{0}};
	struct merge_in in = in_of(kind, 3, frames, 1);
	in.py_cut = true;
	char got[128];
	merged(&in, got, sizeof(got));
	assert_string_equal(got, "N2 N1 P0");
	/* More groups than eval frames is no cut of the interpreted walk:
	 * they disagree. */
	const struct tp_frame two[2] = {{0}};
	const uint8_t one_eval[] = {EVAL, OTHER};
	in = in_of(one_eval, 2, two, 2);
	in.py_cut = true;
	merged(&in, got, sizeof(got));
	assert_string_equal(got, "D P1 P0 N1 N0");
}

/* The innermost eval loop between its shim and its first frame runs no
 * frame: an empty group, so the outer eval frame keeps its own. */
static void test_top_shim(void **state)
{
	(void)state;
	const uint8_t kind[] = {EVAL, EVAL, OTHER};
	const struct tp_frame frames[1] = {{0}};
	struct merge_in in = in_of(kind, 3, frames, 1);
	in.interp_frames = true;
	in.top_shim = true;
	char got[128];
	merged(&in, got, sizeof(got));
	assert_string_equal(got, "N2 P0");
	in.top_shim = false;
	merged(&in, got, sizeof(got));
	assert_string_equal(got, "D P0 N2 N1 N0");
}

/* A sample becomes the merge's input: its flags and errors say what was
 * cut and whether the top eval loop runs no frame. */
static void test_merge_in_sample(void **state)
{
	(void)state;
	static struct tp_sample smp;
	const uint8_t kind[TP_USTACK_MAX] = {EVAL};
	memset(&smp, 0, sizeof(smp));
	smp.nustack = TP_USTACK_MAX + 5; /* more than were kept: the kept ones */
	smp.nframes = 3;
	smp.flags = TP_SF_TOP_SHIM;
	smp.err = TP_ERR_NONE + 1;
	smp.uerr = TP_UERR_NONE;
	struct merge_in in = merge_in_sample(&smp, kind, true, true);
	assert_int_equal(in.nnative, TP_USTACK_MAX);
	assert_int_equal(in.nframes, 3);
	assert_ptr_equal(in.frames, smp.frames);
	assert_ptr_equal(in.nkind, kind);
	assert_true(in.top_shim);
	assert_true(in.interp_frames);
	assert_true(in.py_cut);
	assert_false(in.nat_cut);
	assert_true(in.filtered);
	smp.flags = 0;
	smp.err = TP_ERR_NONE;
	smp.uerr = TP_UERR_NONE + 1;
	in = merge_in_sample(&smp, kind, false, false);
	assert_false(in.top_shim || in.interp_frames || in.py_cut || in.filtered);
	assert_true(in.nat_cut);
}

/* A stripped 3.13: the eval loop's frames carry no name (the pieces its
 * compiler made: _PyEval_EvalFrameDefault.cold), but the native walk
 * found each eval-loop call by the entry frame on its stack: those are
 * eval loops. A named eval loop that holds none stays one (the Python walk
 * missed its frames: the merge must fail). */
static void test_anchors_decide(void **state)
{
	(void)state;
	static struct tp_sample smp;
	memset(&smp, 0, sizeof(smp));
	/* Leaf first: a C function, an unnamed anchored frame, machinery, a
	 * frame named as the eval loop but not anchored, the second anchored
	 * one (native frame 68: the second word of the mask), the root. */
	uint8_t kind[70];
	memset(kind, OTHER, sizeof(kind));
	kind[2] = MACH;
	kind[3] = EVAL;
	smp.nustack = 70;
	smp.anchored[0] = 1ULL << 1;
	smp.anchored[1] = 1ULL << (68 - 64);
	/* Without TP_SF_ANCHORED the names stand. */
	merge_anchor_kinds(&smp, kind);
	assert_int_equal(kind[1], OTHER);
	assert_int_equal(kind[3], EVAL);
	smp.flags = TP_SF_ANCHORED;
	merge_anchor_kinds(&smp, kind);
	for (int i = 0; i < 70; i++)
		assert_int_equal(kind[i], i == 1 || i == 3 || i == 68 ? EVAL
					  : i == 2		      ? MACH
								      : OTHER);
	/* Two groups of frames: with the unanchored eval loop, three calls
	 * for two groups fail to merge; without it, one group per anchored
	 * call, merged in place. */
	struct tp_frame frames[3] = {{0}};
	frames[0].flags = TP_FF_ENTRY;
	struct merge_in in = merge_in_sample(&smp, kind, true, false);
	in.nframes = 3;
	in.frames = frames;
	struct merge_step steps[MERGE_STEPS_MAX(70, 3)];
	int gend[4];
	size_t n = merge_stack(&in, gend, steps);
	assert_int_equal(steps[0].op, MERGE_MARK_DISAGREE);
	kind[3] = OTHER;
	n = merge_stack(&in, gend, steps);
	assert_int_equal(n, 70 - 2 + 3);
	assert_int_equal(steps[0].op, MERGE_NATIVE);
	assert_int_equal(steps[0].index, 69);
	assert_int_equal(steps[1].op, MERGE_PYTHON);
	assert_int_equal(steps[1].index, 2);
	assert_int_equal(steps[2].op, MERGE_PYTHON);
	assert_int_equal(steps[2].index, 1);
	for (int i = 67; i >= 2; i--) { /* the native frames between the calls */
		assert_int_equal(steps[3 + 67 - i].op, MERGE_NATIVE);
		assert_int_equal(steps[3 + 67 - i].index, i);
	}
	assert_int_equal(steps[69].op, MERGE_PYTHON);
	assert_int_equal(steps[69].index, 0);
	assert_int_equal(steps[70].op, MERGE_NATIVE);
	assert_int_equal(steps[70].index, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_one_frame_per_eval), cmocka_unit_test(test_filtered),
	    cmocka_unit_test(test_entry_frames_group), cmocka_unit_test(test_disagree),
	    cmocka_unit_test(test_native_cut),	       cmocka_unit_test(test_interp_cut),
	    cmocka_unit_test(test_top_shim),	       cmocka_unit_test(test_merge_in_sample),
	    cmocka_unit_test(test_anchors_decide),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
