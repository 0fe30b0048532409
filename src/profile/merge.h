/* merge.h - where a stack's Python frames go among its native frames
 * (doc/design/native-stacks.md, "Merging"): the pairing of eval-loop calls
 * with the Python frames each runs, shared by the sampling session and
 * `taipan dump`.
 *
 * Pure: arrays in, an order out, no allocation and no naming.
 */
#ifndef TAIPAN_MERGE_H
#define TAIPAN_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "taipan_abi.h"

/* What the merge needs to know of a native frame. */
enum merge_nkind {
	MERGE_NK_OTHER = 0, /* anything else: shown */
	MERGE_NK_EVAL,	    /* the eval loop: its Python frames go in its place */
	MERGE_NK_MACHINERY, /* the interpreter's call machinery (a runtime's rules) */
};

/* One step of a merged stack. */
enum merge_op {
	MERGE_NATIVE = 0,      /* native frame index */
	MERGE_PYTHON,	       /* Python frame index */
	MERGE_MARK_DISAGREE,   /* the counts cannot match: both parts follow, unmerged */
	MERGE_MARK_NATIVE_CUT, /* the native walk stopped short here (the sample's uerr) */
};

struct merge_step {
	uint32_t op; /* enum merge_op */
	uint32_t index;
};

struct merge_in {
	const uint8_t *nkind; /* enum merge_nkind of each native frame, innermost first */
	uint32_t nnative;
	const struct tp_frame *frames; /* Python frames, innermost first */
	uint32_t nframes;
	bool top_shim;	    /* TP_SF_TOP_SHIM: the innermost eval loop runs no frame */
	bool interp_frames; /* TP_LF_INTERP_FRAME: an eval-loop call runs up to an entry frame */
	bool py_cut;	    /* the Python walk stopped short (its root part is missing) */
	bool nat_cut;	    /* the native walk stopped short */
	bool filtered;	    /* the filtered view (doc/design/native-stacks.md) */
};

/* The merge_in of sample smp, whose native frames have the kinds nkind[0 ..
 * smp->nustack), for a runtime whose eval-loop calls each run frames up to
 * an entry frame (interp_frames) or one frame each. */
struct merge_in merge_in_sample(const struct tp_sample *smp, const uint8_t *nkind,
				bool interp_frames, bool filtered);

/* Where the runtime's walk left anchors (TP_SF_ANCHORED), each native
 * frame that holds one is an eval-loop call, whatever its name: sets
 * nkind[i] (i < smp->nustack) to MERGE_NK_EVAL for it. A stripped
 * interpreter names none of the pieces the compiler made of its eval loop
 * (doc/design/native-stacks.md, "Merging"). An eval loop by name that holds
 * none stays one: its Python frames are missing (a caller link that skipped
 * them, or its first instructions, before it linked its entry frame), and
 * the merge fails as it did by names alone, never guessing. */
void merge_anchor_kinds(const struct tp_sample *smp, uint8_t *nkind);

/* Room merge_stack() needs in out: every frame and one marker. */
#define MERGE_STEPS_MAX(nnative, nframes) ((size_t)(nnative) + (nframes) + 1)

/* The merged stack, root first, into out (MERGE_STEPS_MAX() entries), using
 * gend (nframes + 1 ints) as scratch. Returns the number of steps; when the
 * counts cannot match, the first step is MERGE_MARK_DISAGREE and the Python
 * frames then the native ones follow, never a guess. */
size_t merge_stack(const struct merge_in *in, int *gend, struct merge_step *out);

#endif /* TAIPAN_MERGE_H */
