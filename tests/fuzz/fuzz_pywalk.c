/* fuzz_pywalk.c - libFuzzer target: `taipan dump`'s walk over interpreters,
 * thread states and frames (pywalk.c), and the symbolizer over every frame
 * it returns, on a fake target (fuzz_target.h) whose lists the input builds:
 * loops, garbage pointers, lists cut short.
 *
 * With TAIPAN_FUZZ_SEEDS=DIR it writes seed inputs instead: for each layout
 * (the table rows, and the _Py_DebugOffsets of each ELF file named on the
 * command line) a process with two threads, one running a method called
 * from a function, then exits. With TAIPAN_FUZZ_LOOPS=1 as well, each seed
 * gets a looping thread list over a looping frame list: the worst case of
 * the bounds, which takes a second per run, so it is kept out of the corpus
 * (regressions/pywalk/ has one) to leave the fuzzer its speed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_target.h"
#include "cpython/pywalk.h"
#include "cpython/symbolize.h"

static volatile size_t sink;
static bool verbose; /* TAIPAN_FUZZ_VERBOSE: print what was walked, to check seeds */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_target t;
	struct symbolizer *sz;
	struct pywalk w;

	if (fuzz_target_load(data, size, &t))
		return 0;
	int ret = pywalk_read(&t.pp, &w);
	if (verbose)
		fprintf(stderr, "pywalk_read: %d, %zu threads, err %d\n", ret, w.nthreads, w.err);
	if (ret == 0) {
		sz = symbolizer_new(&t.pp);
		if (!sz)
			abort();
		if (w.nthreads > PYWALK_MAX_THREADS)
			abort();
		for (size_t i = 0; i < w.nthreads; i++) {
			const struct pywalk_thread *th = &w.threads[i];

			if (th->nframes > TP_MAX_FRAMES)
				abort();
			if (verbose && i < 4)
				fprintf(stderr, "thread %zu: tid %d, %u frames, err %d\n", i,
					(int)th->tid, th->nframes, th->err);
			for (uint32_t k = 0; k < th->nframes; k++) {
				struct prof_frame f;

				symbolizer_frame(sz, &th->frames[k], &f);
				sink += strlen(f.name);
				if (verbose && k < 8)
					fprintf(stderr, "  %s (%s:%d)\n", f.name,
						f.file ? f.file : "-", f.line);
			}
		}
		symbolizer_free(sz);
	}
	pywalk_free(&w);
	return 0;
}

/* --- seeds ------------------------------------------------------------------ */

static int32_t max_off(const int32_t *v, size_t n)
{
	int32_t m = 0;

	for (size_t i = 0; i < n; i++)
		if (v[i] > m)
			m = v[i];
	return m;
}

static void seed(const char *dir, unsigned int major, unsigned int minor, const void *dobuf,
		 const char *tag)
{
	bool loop = getenv("TAIPAN_FUZZ_LOOPS") != NULL;
	struct pyproc pp;
	struct fuzz_seed s;
	char name[64];

	if (fuzz_layout(major, minor, dobuf, FUZZ_DO_LEN, &pp))
		return;
	const struct py_layout *l = &pp.layout;
	const struct tp_py_offsets *o = &pp.tp.off;
	uint32_t fl = o->flags;
	fuzz_seed_begin(&s, major, minor, dobuf, FUZZ_DO_LEN, 0);

	uint64_t code_type = fuzz_seed_type(&s, l, "code", 0);
	/* Py_TPFLAGS_TYPE_SUBCLASS on the metaclass: its instances are classes. */
	uint64_t meta = fuzz_seed_type(&s, l, "type", 1ULL << 31);
	uint64_t cls = fuzz_seed_type(&s, l, "app.Worker", 0);
	fuzz_seed_put64(&s, cls + (uint64_t)l->obj_type, meta);
	uint64_t self = fuzz_seed_alloc(&s, 64);
	fuzz_seed_put64(&s, self, 1);
	fuzz_seed_put64(&s, self + (uint64_t)l->obj_type, cls);
	uint64_t meth = fuzz_seed_code(&s, &pp, code_type, "work", "Worker.work",
				       "/srv/app/worker.py", 10, "self");
	uint64_t func =
	    fuzz_seed_code(&s, &pp, code_type, "main", "main", "/srv/app/main.py", 1, NULL);

	/* inner (the method) -> [shim] -> outer (the function). */
	size_t fsize = (size_t)(l->frame_localsplus > 0 ? l->frame_localsplus : 0) + 64;
	if (fsize < TP_FRAME_BUF)
		fsize = TP_FRAME_BUF;
	uint64_t inner = fuzz_seed_alloc(&s, fsize), shim = fuzz_seed_alloc(&s, fsize),
		 outer = fuzz_seed_alloc(&s, fsize);
	uint64_t tag_bit = (fl & TP_LF_STACKREF) ? 1 : 0;
	struct {
		uint64_t at, code, back;
		unsigned int unit;
		uint8_t owner;
	} fr[] = {
	    {inner, meth, (fl & TP_LF_OWNER) ? shim : outer, 2, 0},
	    {shim, func, outer, 0, 3},
	    {outer, func, 0, 1, 0},
	};
	for (size_t i = 0; i < sizeof(fr) / sizeof(fr[0]); i++) {
		if (fr[i].at == shim && !(fl & TP_LF_OWNER))
			continue;
		uint64_t back = loop && fr[i].at == outer ? inner : fr[i].back;
		fuzz_seed_put64(&s, fr[i].at + o->frame_back, back);
		fuzz_seed_put64(&s, fr[i].at + o->frame_code, fr[i].code | tag_bit);
		if (fl & TP_LF_LASTI_PTR) {
			fuzz_seed_put64(&s, fr[i].at + o->frame_lasti,
					fr[i].code + fuzz_seed_pos(&pp, fr[i].unit));
		} else {
			uint32_t lasti = fuzz_seed_pos(&pp, fr[i].unit);
			fuzz_seed_put(&s, fr[i].at + o->frame_lasti, &lasti, 4);
		}
		if (fl & TP_LF_OWNER)
			fuzz_seed_put(&s, fr[i].at + o->frame_owner, &fr[i].owner, 1);
		if ((fl & TP_LF_IS_ENTRY) && fr[i].at == outer) {
			uint8_t one = 1;
			fuzz_seed_put(&s, fr[i].at + o->frame_is_entry, &one, 1);
		}
		if (fl & TP_LF_SELF_CLASS)
			fuzz_seed_put64(&s, fr[i].at + o->frame_localsplus,
					fr[i].code == meth ? self : 0);
	}

	/* A struct pthread with the tid at glibc's offset. */
	uint64_t pthread = fuzz_seed_alloc(&s, 1024);
	int32_t tid = getpid();
	fuzz_seed_put(&s, pthread + 0x2d0, &tid, 4);

	int32_t ts_offs[] = {
	    l->ts_next,		 l->ts_interp,	  l->ts_frame,		 l->ts_cframe,
	    l->ts_current_frame, l->ts_thread_id, l->ts_native_thread_id};
	size_t tsize = (size_t)max_off(ts_offs, sizeof(ts_offs) / sizeof(ts_offs[0])) + 8;
	int32_t in_offs[] = {l->interp_next, l->interp_tstate_head};
	size_t isize = (size_t)max_off(in_offs, 2) + 8;
	uint64_t interp = fuzz_seed_alloc(&s, isize);
	uint64_t ts1 = fuzz_seed_alloc(&s, tsize), ts2 = fuzz_seed_alloc(&s, tsize);
	uint64_t top = inner;
	if (fl & TP_LF_CFRAME) {
		uint64_t cf = fuzz_seed_alloc(&s, (size_t)l->cframe_current_frame + 8);
		fuzz_seed_put64(&s, cf + (uint64_t)l->cframe_current_frame, inner);
		top = cf;
	}
	fuzz_seed_put64(&s, ts1 + o->ts_frame, top);
	fuzz_seed_put64(&s, ts1 + o->ts_next, ts2);
	fuzz_seed_put64(&s, ts1 + o->ts_thread_id, pthread);
	fuzz_seed_put64(&s, ts2 + o->ts_thread_id, pthread + 8);
	if (loop)
		fuzz_seed_put64(&s, ts2 + o->ts_next, ts1);
	if (l->ts_interp >= 0) {
		fuzz_seed_put64(&s, ts1 + (uint64_t)l->ts_interp, interp);
		fuzz_seed_put64(&s, ts2 + (uint64_t)l->ts_interp, interp);
	}
	if (l->ts_native_thread_id >= 0)
		fuzz_seed_put64(&s, ts1 + (uint64_t)l->ts_native_thread_id, (uint64_t)tid);
	fuzz_seed_put64(&s, interp + o->interp_tstate_head, ts1);
	uint64_t root = fuzz_seed_alloc(&s, 8);
	fuzz_seed_put64(&s, root, interp);

	fuzz_seed_set_header(&s, root, code_type, NULL, 0);
	snprintf(name, sizeof(name), "%s%s%u.%u", tag, loop ? "loop-" : "", major, minor);
	fuzz_seed_write(&s, dir, name);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	verbose = fuzz_init_seeding(*argc, *argv, seed);
	return 0;
}
