/* fuzz_target.h - a fake Python process for the fuzzers of the code that
 * reads target memory (symbolize.c, pywalk.c).
 *
 * Those readers take every address from the target and read it with
 * process_vm_readv. Here the target is the fuzzer itself: the input becomes a
 * memory image mapped at a fixed address in this process, and a struct pyproc
 * whose pid is getpid(), so each pointer the readers follow is a value from
 * the input. A pointer into the image reads the input's bytes; any other one
 * reads whatever this process has there or, usually, fails with EFAULT, as a
 * hostile or dying target would make it.
 *
 * Input layout (all integers little-endian):
 *   u8 major, u8 minor      the Python version: its row of py_layout_table,
 *                           or for 3.13+ without a row, a _Py_DebugOffsets
 *                           of FUZZ_DO_LEN bytes follows (parsed and
 *                           validated as taipan does for a live target)
 *   [FUZZ_DO_LEN bytes]     the _Py_DebugOffsets, 3.13+ only
 *   u64 root                &interpreters.head: where pywalk starts
 *   u64 code_type           &PyCode_Type, 0 when unknown (no type check)
 *   u8 nframes              frames for the symbolizer, at most FUZZ_MAX_FRAMES
 *   nframes x tp_frame      as BPF sends them (32 bytes each)
 *   image                   the rest, mapped at FUZZ_IMAGE_BASE
 * The format only depends on version numbers, so regression inputs stay
 * valid when table rows are added.
 */
#ifndef TAIPAN_FUZZ_TARGET_H
#define TAIPAN_FUZZ_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpython/pyproc.h"
#include "taipan_abi.h"

/* Low enough for AddressSanitizer's low application range on x86-64 (below
 * 0x7fff8000), away from where a non-PIE binary, its heap and the shared
 * libraries land. */
#define FUZZ_IMAGE_BASE 0x50000000ULL
#define FUZZ_IMAGE_MAX (256 * 1024)
#define FUZZ_DO_LEN 1024
#define FUZZ_MAX_FRAMES 16

struct fuzz_target {
	struct pyproc pp;
	uint64_t root;
	const struct tp_frame *frames; /* points into an aligned copy, valid until the next load */
	size_t nframes;
};

/* Maps the image area. Call once, from LLVMFuzzerInitialize; exits on
 * failure (the fuzzer cannot run without it). */
void fuzz_target_init(void);

/* Splits one input into *t and maps its image. Returns 0, or -1 when the
 * input is too short or names a layout taipan would refuse. */
int fuzz_target_load(const uint8_t *data, size_t size, struct fuzz_target *t);

/* Builders for seed inputs: a buffer that grows, and helpers that lay out
 * real-looking objects for one layout. */
struct fuzz_seed {
	uint8_t *buf;
	size_t len, cap;
	size_t image; /* where the image starts in buf */
};

/* Starts a seed for major.minor (with the _Py_DebugOffsets bytes dobuf, of
 * dolen bytes, for 3.13+) and room for nframes frames in its header. */
void fuzz_seed_begin(struct fuzz_seed *s, unsigned int major, unsigned int minor, const void *dobuf,
		     size_t dolen, size_t nframes);
/* Reserves len zeroed bytes of the image, 16-aligned; returns their target address. */
uint64_t fuzz_seed_alloc(struct fuzz_seed *s, size_t len);
/* Writes into the image at a target address. */
void fuzz_seed_put(struct fuzz_seed *s, uint64_t addr, const void *p, size_t len);
void fuzz_seed_put64(struct fuzz_seed *s, uint64_t addr, uint64_t v);
/* Fills the header once the image is built: the image's addresses do not
 * depend on it. nframes must be what fuzz_seed_begin() was given. */
void fuzz_seed_set_header(struct fuzz_seed *s, uint64_t root, uint64_t code_type,
			  const struct tp_frame *frames, size_t nframes);
/* Writes the seed to dir/name and frees it. */
void fuzz_seed_write(struct fuzz_seed *s, const char *dir, const char *name);

/* A str (2.7: PyStringObject) holding text; returns its address. */
uint64_t fuzz_seed_str(struct fuzz_seed *s, const struct py_layout *l, const char *text);
/* A bytes (2.7: str) object; returns its address. */
uint64_t fuzz_seed_bytes(struct fuzz_seed *s, const struct py_layout *l, const void *p, size_t n);

/* The layout and flags of major.minor as fuzz_target_load() builds them
 * (NULL layout: from the _Py_DebugOffsets in dobuf). Returns 0 or -1. */
int fuzz_layout(unsigned int major, unsigned int minor, const void *dobuf, size_t dolen,
		struct pyproc *pp);

/* A type object named name with tp_flags flags; returns its address. */
uint64_t fuzz_seed_type(struct fuzz_seed *s, const struct py_layout *l, const char *name,
			uint64_t flags);
/* A code object (with a short real line table of pp's kind, and first argument
 * arg0 when not NULL) whose type is code_type; returns its address. */
uint64_t fuzz_seed_code(struct fuzz_seed *s, const struct pyproc *pp, uint64_t code_type,
			const char *name, const char *qualname, const char *file, int firstlineno,
			const char *arg0);
/* The position BPF would record for code unit `unit` of a code object. */
uint32_t fuzz_seed_pos(const struct pyproc *pp, unsigned int unit);
/* LLVMFuzzerInitialize of a harness that makes its own seeds: calls
 * fuzz_target_init, and with TAIPAN_FUZZ_SEEDS=DIR writes seeds into DIR and
 * exits. seed is called once per row of the offsets table (dobuf NULL, tag
 * "row-"), and once for every ELF file among the arguments (those starting
 * with '-' are skipped) whose _PyRuntime holds a _Py_DebugOffsets taipan
 * accepts (dobuf that struct, tag "FILENAME-"). Returns whether
 * TAIPAN_FUZZ_VERBOSE is set. */
bool fuzz_init_seeding(int argc, char **argv,
		       void (*seed)(const char *dir, unsigned int major, unsigned int minor,
				    const void *dobuf, const char *tag));

/* Reads the first len bytes of the _PyRuntime of the ELF file at path.
 * Returns how many were read (0 when there is no such symbol). */
size_t fuzz_read_runtime(const char *path, void *buf, size_t len);

#endif /* TAIPAN_FUZZ_TARGET_H */
