/* fuzz_symbolize.c - libFuzzer target: the symbolizer reading code objects,
 * names, file names and line tables out of a fake target (fuzz_target.h).
 *
 * Each input names a layout, up to 16 frames as BPF records them and the
 * memory they point into. Every frame is symbolized three times: cold, from
 * the cache, and with another identity, which makes the symbolizer throw the
 * cached code object away and read the address again.
 *
 * With TAIPAN_FUZZ_SEEDS=DIR it writes seed inputs instead, one per layout
 * (the table rows, and the _Py_DebugOffsets of each ELF file named on the
 * command line), and exits.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "cpython/symbolize.h"

static volatile size_t sink;
static bool verbose; /* TAIPAN_FUZZ_VERBOSE: print the frames, to check seeds */

static void touch(const char *s)
{
	/* strlen makes AddressSanitizer check every byte up to the NUL. */
	if (s)
		sink += strlen(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_target t;
	struct symbolizer *sz;
	uint64_t codes, failed;

	if (fuzz_target_load(data, size, &t))
		return 0;
	sz = symbolizer_new(&t.pp);
	if (!sz)
		abort();
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < t.nframes; i++) {
			struct tp_frame f = t.frames[i];
			struct prof_frame out;

			if (round == 2)
				f.ident = ~f.ident;
			int ret = symbolizer_frame(sz, &f, &out);
			if (verbose)
				fprintf(stderr, "round %d frame %zu: %d %s (%s:%d, first %d)\n",
					round, i, ret, out.name, out.file ? out.file : "-",
					out.line, out.first_line);
			if (!out.name)
				abort();
			touch(out.name);
			touch(out.file);
		}
	}
	/* Re-reads of replaced code objects count as failures too, so
	 * failed is not bounded by codes. */
	symbolizer_counts(sz, &codes, &failed);
	sink += codes + failed;
	symbolizer_free(sz);
	return 0;
}

/* --- seeds ------------------------------------------------------------------ */

static void seed(const char *dir, unsigned int major, unsigned int minor, const void *dobuf,
		 const char *tag)
{
	struct pyproc pp;
	struct fuzz_seed s;
	struct tp_frame fr[4];
	char name[64];

	if (fuzz_layout(major, minor, dobuf, FUZZ_DO_LEN, &pp))
		return;
	const struct py_layout *l = &pp.layout;
	fuzz_seed_begin(&s, major, minor, dobuf, FUZZ_DO_LEN, 4);
	uint64_t code_type = fuzz_seed_type(&s, l, "code", 0);
	uint64_t cls = fuzz_seed_type(&s, l, "app.Worker", 0);
	uint64_t meth = fuzz_seed_code(&s, &pp, code_type, "work", "Worker.work",
				       "/srv/app/worker.py", 10, "self");
	uint64_t func =
	    fuzz_seed_code(&s, &pp, code_type, "main", "main", "/srv/app/main.py", 1, NULL);
	fr[0] = (struct tp_frame){.code = meth, .aux = cls, .pos = fuzz_seed_pos(&pp, 2)};
	fr[1] = (struct tp_frame){.code = func, .pos = fuzz_seed_pos(&pp, 1)};
	/* A frame that has not started, and a pointer to nothing. */
	fr[2] = (struct tp_frame){.code = func,
				  .pos = (pp.tp.off.flags & TP_LF_LASTI_PTR) ? 0 : UINT32_MAX};
	fr[3] = (struct tp_frame){.code = 0xdead0000, .pos = 7};
	fuzz_seed_set_header(&s, 0, code_type, fr, 4);
	snprintf(name, sizeof(name), "%s%u.%u", tag, major, minor);
	fuzz_seed_write(&s, dir, name);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	verbose = fuzz_init_seeding(*argc, *argv, seed);
	return 0;
}
