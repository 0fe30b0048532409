/* merge.c - the order of a stack's native and Python frames (merge.h). */
#include <string.h>

#include "profile/merge.h"

/* Python frames [leaf, root], root first. */
static size_t put_python(struct merge_step *out, size_t n, int root, int leaf)
{
	for (int i = root; i >= leaf; i--)
		out[n++] = (struct merge_step){MERGE_PYTHON, (uint32_t)i};
	return n;
}

/* Each eval-loop frame of the native stack is replaced by the Python frames
 * its call runs. On 3.11+ an eval-loop call runs the frames from the
 * innermost not yet placed down to the next entry frame; before, one frame
 * each. */
size_t merge_stack(const struct merge_in *in, int *gend, struct merge_step *out)
{
	int nat = (int)in->nnative, nevals = 0, ngroups = 0;
	size_t n = 0;
	for (int i = 0; i < nat; i++)
		nevals += in->nkind[i] == MERGE_NK_EVAL;
	/* Group ends (innermost first): group g is frames [gend[g-1]+1, gend[g]].
	 * The innermost eval loop between its shim and its first frame, or
	 * after its last one was popped: a group of no frames. */
	if (in->top_shim)
		gend[ngroups++] = -1;
	for (int i = 0; i < (int)in->nframes; i++)
		if (!in->interp_frames || (in->frames[i].flags & TP_FF_ENTRY) ||
		    i == (int)in->nframes - 1)
			gend[ngroups++] = i;
	/* Which side may hold more: the one whose root part is complete. */
	bool ok = ngroups == nevals || (in->nat_cut && ngroups > nevals) ||
		  (in->py_cut && nevals > ngroups);
	if (!ok) {
		out[n++] = (struct merge_step){MERGE_MARK_DISAGREE, 0};
		n = put_python(out, n, (int)in->nframes - 1, 0);
		for (int i = nat - 1; i >= 0; i--)
			out[n++] = (struct merge_step){MERGE_NATIVE, (uint32_t)i};
		return n;
	}
	/* Groups no eval frame holds (the native stack was cut): at the root,
	 * above the native part's marker. */
	for (int g = ngroups - 1; g >= nevals; g--)
		n = put_python(out, n, gend[g], g ? gend[g - 1] + 1 : 0);
	if (in->nat_cut)
		out[n++] = (struct merge_step){MERGE_MARK_NATIVE_CUT, 0};
	/* Eval frames from the root: the k-th from the leaf takes group k.
	 * The filtered view starts at the first Python frame, and after each
	 * one hides the interpreter's call machinery up to the first frame
	 * that is not machinery. */
	bool filtered = in->filtered && ngroups > 0;
	bool hiding = filtered;
	int k = nevals - 1;
	for (int i = nat - 1; i >= 0; i--) {
		bool eval = in->nkind[i] == MERGE_NK_EVAL;
		if (!eval || k >= ngroups) {
			bool root = k == nevals - 1 && nevals > 0;
			if (hiding && (root || in->nkind[i] == MERGE_NK_MACHINERY || eval)) {
				k -= eval;
				continue;
			}
			hiding = false;
			out[n++] = (struct merge_step){MERGE_NATIVE, (uint32_t)i};
			k -= eval;
			continue;
		}
		n = put_python(out, n, gend[k], k ? gend[k - 1] + 1 : 0);
		hiding = filtered;
		k--;
	}
	return n;
}

void merge_anchor_kinds(const struct tp_sample *smp, uint8_t *nkind)
{
	uint32_t nat = smp->nustack > TP_USTACK_MAX ? TP_USTACK_MAX : smp->nustack;
	if (!(smp->flags & TP_SF_ANCHORED))
		return;
	for (uint32_t i = 0; i < nat; i++)
		if ((smp->anchored[i >> 6] >> (i & 63)) & 1)
			nkind[i] = MERGE_NK_EVAL;
}

struct merge_in merge_in_sample(const struct tp_sample *smp, const uint8_t *nkind,
				bool interp_frames, bool filtered)
{
	return (struct merge_in){
	    .nkind = nkind,
	    .nnative = smp->nustack > TP_USTACK_MAX ? TP_USTACK_MAX : smp->nustack,
	    .frames = smp->frames,
	    .nframes = smp->nframes,
	    .top_shim = smp->flags & TP_SF_TOP_SHIM,
	    .interp_frames = interp_frames,
	    .py_cut = smp->err != TP_ERR_NONE,
	    .nat_cut = smp->uerr != TP_UERR_NONE,
	    .filtered = filtered,
	};
}
