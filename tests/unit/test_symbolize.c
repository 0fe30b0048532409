/* test_symbolize.c - unit tests for the symbolizer, reading a code object
 * laid out in a buffer through a pyproc reader. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cpython/symbolize.h"

#define BASE 0x10000ULL

/* Offsets of the fake objects in the image. */
enum {
	CODE = 0x000,
	NAME = 0x100,
	FILE_NAME = 0x200,
	IMAGE_LEN = 0x300,
};

/* Offsets in the fake code object, and in the fake compact ASCII str. */
enum {
	CO_TYPE = 8,
	CO_NAME = 16,
	CO_FILENAME = 24,
	CO_LINETABLE = 32,
	CO_FIRSTLINENO = 40,
	STR_LENGTH = 16,
	STR_STATE = 32,
	STR_DATA = 40,
};

struct image {
	uint8_t b[IMAGE_LEN];
};

static int image_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct image *im = ctx;
	if (addr < BASE || addr - BASE > IMAGE_LEN || len > IMAGE_LEN - (addr - BASE))
		return -EFAULT;
	memcpy(buf, im->b + (addr - BASE), len);
	return 0;
}

static void put64(struct image *im, size_t off, uint64_t v)
{
	memcpy(im->b + off, &v, 8);
}

static void put_str(struct image *im, size_t off, const char *s)
{
	uint32_t state = (1u << 2) | (1u << 5) | (1u << 6); /* kind 1, compact, ascii */
	put64(im, off + STR_LENGTH, strlen(s));
	memcpy(im->b + off + STR_STATE, &state, 4);
	memcpy(im->b + off + STR_DATA, s, strlen(s));
}

/* A code object "f" in "m.py" that starts on line 7, with no line table, and
 * a process description whose co_firstlineno offset is firstlineno_off. */
static void build(struct image *im, struct pyproc *pp, int32_t firstlineno_off)
{
	memset(im, 0, sizeof(*im));
	/* Non-zero bytes at the head of the object: what a read before the
	 * offset table's first field would pick up. */
	memset(im->b + CODE, 0x11, 8);
	put64(im, CODE + CO_NAME, BASE + NAME);
	put64(im, CODE + CO_FILENAME, BASE + FILE_NAME);
	int32_t first = 7;
	memcpy(im->b + CODE + CO_FIRSTLINENO, &first, 4);
	put_str(im, NAME, "f");
	put_str(im, FILE_NAME, "m.py");

	memset(pp, 0, sizeof(*pp));
	memset(&pp->layout, 0xff, sizeof(pp->layout)); /* every field absent (-1) */
	struct py_layout *l = &pp->layout;
	l->obj_type = CO_TYPE;
	l->code_name = CO_NAME;
	l->code_filename = CO_FILENAME;
	l->code_linetable = CO_LINETABLE;
	l->code_firstlineno = firstlineno_off;
	l->unicode_length = STR_LENGTH;
	l->unicode_state = STR_STATE;
	l->unicode_ascii_size = STR_DATA;
	l->unicode_compact_size = STR_DATA;
	pp->read = image_read;
	pp->read_ctx = im;
}

static void symbolize_one(struct pyproc *pp, struct prof_frame *out)
{
	struct tp_frame f = {.code = BASE + CODE};
	struct symbolizer *sz = symbolizer_new(pp);
	assert_non_null(sz);
	assert_int_equal(symbolizer_frame(sz, &f, out), 0);
	assert_string_equal(out->name, "f");
	assert_string_equal(out->file, "m.py");
	symbolizer_free(sz);
}

static void test_firstlineno(void **state)
{
	struct image im;
	struct pyproc pp;
	struct prof_frame out;
	(void)state;

	build(&im, &pp, CO_FIRSTLINENO);
	symbolize_one(&pp, &out);
	assert_int_equal(out.first_line, 7);
	assert_int_equal(out.line, 7);
}

/* A layout without co_firstlineno (-1) gives line 0, not bytes read from
 * before the code object's copy. */
static void test_no_firstlineno(void **state)
{
	struct image im;
	struct pyproc pp;
	struct prof_frame out;
	(void)state;

	build(&im, &pp, -1);
	symbolize_one(&pp, &out);
	assert_int_equal(out.first_line, 0);
	assert_int_equal(out.line, 0);
}

/* A code object whose block pymalloc freed after the sample: its first
 * word (ob_refcnt) links the pool's free blocks, a pointer near the block,
 * or is 0 at the end of the list, while the rest still reads as the old
 * object. Its strs may hold other text by now: it is marked, not named. */
static void test_freed_block_is_marked(void **state)
{
	static const uint64_t heads[] = {BASE + CODE + 0x40, 0};
	(void)state;
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		struct image im;
		struct pyproc pp;
		struct prof_frame out;
		struct tp_frame f = {.code = BASE + CODE};
		build(&im, &pp, CO_FIRSTLINENO);
		put64(&im, CODE, heads[i]);
		struct symbolizer *sz = symbolizer_new(&pp);
		assert_non_null(sz);
		assert_int_equal(symbolizer_frame(sz, &f, &out), -ESTALE);
		assert_int_equal(out.kind, PROF_FRAME_MARKER);
		assert_string_equal(out.name, "[code object freed]");
		/* Alive again (another object at the address): read anew. */
		put64(&im, CODE, 1);
		f.ident = 1;
		assert_int_equal(symbolizer_frame(sz, &f, &out), -ESTALE);
		symbolizer_free(sz);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_firstlineno),
	    cmocka_unit_test(test_no_firstlineno),
	    cmocka_unit_test(test_freed_block_is_marked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
