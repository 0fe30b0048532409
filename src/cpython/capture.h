/* capture.h - a Python process's memory as taipan's walker and symbolizer
 * read it, kept in a file with the stacks the process reported itself.
 *
 * tools/capture.c records one from a live interpreter: every read the walks
 * make goes to the process and is kept. tests/unit/test_captures.c loads it
 * and walks it again, with no process and no privileges: the shared walker
 * (src/cpython/walk.h) and the symbolizer over real interpreters' memory,
 * checked against the frames, files and lines that Python itself reported.
 *
 * File format, version 1 (text lines, then the image):
 *   taipan-capture 1
 *   version 3.12.1           major 3   minor 12   hexversion 0x30c01f0
 *   interp_head 0x…          runtime 0x…          code_type 0x…
 *   layout NAME VALUE        one line per PY_LAYOUT_FIELDS entry, or instead:
 *   debug_offsets 1          the layout is the _Py_DebugOffsets at `runtime`
 *                            in the image, read as from a live 3.13+ process
 *                            (tests/fixtures/synth_image.c writes these)
 *   thread 0xTHREAD_ID       the stack Python reported, innermost first:
 *   frame LINE<TAB>FILE<TAB>NAME
 *   region 0xADDR LEN        followed by LEN bytes and a newline
 *   end
 * (each "key value" pair above is a line of its own).
 */
#ifndef TAIPAN_CAPTURE_H
#define TAIPAN_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "cpython/pyproc.h"

struct capture_frame {
	char *name, *file;
	int line;
};

/* A thread and the stack the process reported for it. */
struct capture_thread {
	uint64_t thread_id; /* PyThreadState.thread_id: pthread_self() */
	struct capture_frame *frames;
	size_t nframes;
};

struct capture_region {
	uint64_t addr;
	size_t len;
	uint8_t *data;
};

struct capture {
	/* The process: identity and layout. Its reader is the capture's:
	 * the live process, kept as it is read, or the loaded image. */
	struct pyproc pp;
	struct capture_thread *threads;
	size_t nthreads;
	struct capture_region *regions; /* sorted, neither overlapping nor touching */
	size_t nregions;
	pid_t live; /* recording from this pid, 0 once loaded from a file */
};

/* Starts recording pp's memory: c->pp becomes a copy of pp whose reads go
 * to the live process and are kept. Returns 0. */
int capture_record(struct capture *c, const struct pyproc *pp);

/* Adds a thread (and then its frames, innermost first) to what the process
 * reported. Returns 0 or -ENOMEM. */
int capture_add_thread(struct capture *c, uint64_t thread_id);
int capture_add_frame(struct capture *c, int line, const char *file, const char *name);

/* Adds one "thread 0xID" or "frame LINE<TAB>FILE<TAB>NAME" line (without
 * its newline; the tabs are overwritten), as the capture file and
 * tests/fixtures/capture_workload.py write them. Returns 0, -EINVAL for
 * another line, or -ENOMEM. */
int capture_add_stack_line(struct capture *c, char *line);

/* Writes the capture to path (through a temporary file renamed into
 * place). Returns 0 or a negative errno. */
int capture_write(const struct capture *c, const char *path);

/* Reads a capture written by capture_write(). c->pp reads from its image.
 * Returns 0, or a negative errno with err saying what is wrong. */
int capture_load(struct capture *c, const char *path, char *err, size_t errlen);

/* Frees everything and zeroes c. Accepts a zeroed c. */
void capture_free(struct capture *c);

#endif /* TAIPAN_CAPTURE_H */
