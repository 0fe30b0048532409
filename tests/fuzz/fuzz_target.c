/* fuzz_target.c - the fake target process of fuzz_target.h: layouts, the
 * memory image, and builders for seed inputs. */
#include "fuzz_target.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpython/debugoffsets.h"
#include "proc/elfsym.h"

#define PAGE 4096

int fuzz_layout(unsigned int major, unsigned int minor, const void *dobuf, size_t dolen,
		struct pyproc *pp)
{
	const struct py_layout_entry *row = py_layout_find(major, minor);
	char err[256];

	memset(pp, 0, sizeof(*pp));
	pp->pid = getpid();
	if (row) {
		pp->layout = row->layout;
		pp->hexversion = row->hexversion;
	} else {
		uint64_t hex = 0;

		if (!dobuf || py_debug_offsets_parse(dobuf, dolen, &pp->layout, &hex,
						     &pp->free_threaded, NULL, 0))
			return -1;
		/* The struct's own version decides, as in pyproc.c. */
		pp->hexversion = (uint32_t)hex;
		major = (unsigned int)(hex >> 24);
		minor = (unsigned int)(hex >> 16) & 0xff;
	}
	pp->major = major;
	pp->minor = minor;
	snprintf(pp->version, sizeof(pp->version), "%u.%u", major, minor);
	/* The same derivation as for a real process, from pyproc.c. */
	return pyproc_derive(pp, err, sizeof(err)) ? -1 : 0;
}

static uint8_t *image;
static size_t image_used; /* bytes of the mapping written by the last input */

void fuzz_target_init(void)
{
	void *p = mmap((void *)(uintptr_t)FUZZ_IMAGE_BASE, FUZZ_IMAGE_MAX, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p != (void *)(uintptr_t)FUZZ_IMAGE_BASE) {
		fprintf(stderr, "fuzz_target: cannot map the image at %#llx: %s\n", FUZZ_IMAGE_BASE,
			p == MAP_FAILED ? strerror(errno) : "placed elsewhere");
		exit(1);
	}
	image = p;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

int fuzz_target_load(const uint8_t *data, size_t size, struct fuzz_target *t)
{
	static struct tp_frame frames[FUZZ_MAX_FRAMES];
	const uint8_t *p = data, *end = data + size;
	const uint8_t *dobuf = NULL;
	size_t n, mapped;

	if (size < 2)
		return -1;
	p += 2;
	if (!py_layout_find(data[0], data[1])) {
		if (end - p < FUZZ_DO_LEN)
			return -1;
		dobuf = p;
		p += FUZZ_DO_LEN;
	}
	if (fuzz_layout(data[0], data[1], dobuf, FUZZ_DO_LEN, &t->pp))
		return -1;
	if (end - p < 17)
		return -1;
	t->root = get64(p);
	t->pp.tp.interp_head_addr = t->root;
	t->pp.code_type_addr = get64(p + 8);
	n = p[16];
	p += 17;
	if (n > FUZZ_MAX_FRAMES || (size_t)(end - p) < n * sizeof(struct tp_frame))
		return -1;
	memcpy(frames, p, n * sizeof(struct tp_frame));
	t->frames = frames;
	t->nframes = n;
	p += n * sizeof(struct tp_frame);

	/* The image: exactly the pages it needs are readable, the rest of the
	 * area is not, so a read that runs off its end fails as it would past
	 * the end of a mapping in a real process. */
	n = (size_t)(end - p);
	if (n > FUZZ_IMAGE_MAX)
		n = FUZZ_IMAGE_MAX;
	mapped = (n + PAGE - 1) / PAGE * PAGE;
	if (mprotect(image, FUZZ_IMAGE_MAX, PROT_READ | PROT_WRITE))
		abort();
	memset(image, 0, image_used);
	memcpy(image, p, n);
	image_used = n;
	if (mapped < FUZZ_IMAGE_MAX && mprotect(image + mapped, FUZZ_IMAGE_MAX - mapped, PROT_NONE))
		abort();
	return 0;
}

/* --- seeds ------------------------------------------------------------------ */

static void grow(struct fuzz_seed *s, size_t len)
{
	if (s->len + len <= s->cap)
		return;
	size_t ncap = s->cap ? s->cap : 4096;
	while (ncap < s->len + len)
		ncap *= 2;
	uint8_t *nb = realloc(s->buf, ncap);
	if (!nb)
		abort();
	memset(nb + s->cap, 0, ncap - s->cap);
	s->buf = nb;
	s->cap = ncap;
}

static void append(struct fuzz_seed *s, const void *p, size_t len)
{
	grow(s, len);
	memcpy(s->buf + s->len, p, len);
	s->len += len;
}

void fuzz_seed_begin(struct fuzz_seed *s, unsigned int major, unsigned int minor, const void *dobuf,
		     size_t dolen, size_t nframes)
{
	uint8_t v[2] = {(uint8_t)major, (uint8_t)minor}, n = (uint8_t)nframes;
	struct tp_frame f = {0};
	uint64_t zero = 0;

	memset(s, 0, sizeof(*s));
	append(s, v, 2);
	if (!py_layout_find(major, minor)) {
		uint8_t pad[FUZZ_DO_LEN] = {0};

		memcpy(pad, dobuf, dolen < FUZZ_DO_LEN ? dolen : FUZZ_DO_LEN);
		append(s, pad, sizeof(pad));
	}
	append(s, &zero, 8);
	append(s, &zero, 8);
	append(s, &n, 1);
	for (size_t i = 0; i < nframes; i++)
		append(s, &f, sizeof(f));
	s->image = s->len;
}

uint64_t fuzz_seed_alloc(struct fuzz_seed *s, size_t len)
{
	size_t off = (s->len - s->image + 15) & ~(size_t)15;

	grow(s, s->image + off + len - s->len);
	memset(s->buf + s->len, 0, s->image + off + len - s->len);
	s->len = s->image + off + len;
	return FUZZ_IMAGE_BASE + off;
}

void fuzz_seed_put(struct fuzz_seed *s, uint64_t addr, const void *p, size_t len)
{
	size_t off = (size_t)(addr - FUZZ_IMAGE_BASE);

	if (addr < FUZZ_IMAGE_BASE || s->image + off + len > s->len)
		abort();
	memcpy(s->buf + s->image + off, p, len);
}

void fuzz_seed_put64(struct fuzz_seed *s, uint64_t addr, uint64_t v)
{
	fuzz_seed_put(s, addr, &v, 8);
}

void fuzz_seed_set_header(struct fuzz_seed *s, uint64_t root, uint64_t code_type,
			  const struct tp_frame *frames, size_t nframes)
{
	/* Right after the version and the _Py_DebugOffsets. */
	size_t at = 2 + (py_layout_find(s->buf[0], s->buf[1]) ? 0 : FUZZ_DO_LEN);

	if (s->buf[at + 16] != nframes)
		abort();
	memcpy(s->buf + at, &root, 8);
	memcpy(s->buf + at + 8, &code_type, 8);
	if (nframes)
		memcpy(s->buf + at + 17, frames, nframes * sizeof(*frames));
}

void fuzz_seed_write(struct fuzz_seed *s, const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "we");
	if (!f || fwrite(s->buf, 1, s->len, f) != s->len || fclose(f)) {
		fprintf(stderr, "fuzz seeds: cannot write %s\n", path);
		exit(1);
	}
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

uint64_t fuzz_seed_str(struct fuzz_seed *s, const struct py_layout *l, const char *text)
{
	size_t n = strlen(text);
	uint64_t o;

	if (l->unicode_state < 0) { /* 2.7: PyStringObject */
		o = fuzz_seed_alloc(s, (size_t)l->bytes_sval + n + 1);
		fuzz_seed_put64(s, o, 1);
		fuzz_seed_put64(s, o + (uint64_t)l->var_size, n);
		fuzz_seed_put(s, o + (uint64_t)l->bytes_sval, text, n);
		return o;
	}
	/* A compact ASCII str: kind 1 (bits 2-4), compact (bit 5), ascii (bit 6). */
	uint32_t state = 1u << 2 | 1u << 5 | 1u << 6;
	o = fuzz_seed_alloc(s, (size_t)l->unicode_ascii_size + n + 1);
	fuzz_seed_put64(s, o, 1);
	fuzz_seed_put64(s, o + (uint64_t)l->unicode_length, n);
	fuzz_seed_put(s, o + (uint64_t)l->unicode_state, &state, 4);
	fuzz_seed_put(s, o + (uint64_t)l->unicode_ascii_size, text, n);
	return o;
}

uint64_t fuzz_seed_bytes(struct fuzz_seed *s, const struct py_layout *l, const void *p, size_t n)
{
	uint64_t o = fuzz_seed_alloc(s, (size_t)l->bytes_sval + n + 1);

	fuzz_seed_put64(s, o, 1);
	fuzz_seed_put64(s, o + (uint64_t)l->var_size, n);
	fuzz_seed_put(s, o + (uint64_t)l->bytes_sval, p, n);
	return o;
}

size_t fuzz_read_runtime(const char *path, void *buf, size_t len)
{
	struct elf_file *ef;
	uint64_t v, sz;
	size_t got = 0;

	if (elf_file_open(path, &ef))
		return 0;
	if (!elf_file_symbol(ef, "_PyRuntime", &v, &sz)) {
		if (sz && sz < len)
			len = (size_t)sz;
		if (!elf_file_read(ef, v, buf, len))
			got = len;
	}
	elf_file_close(ef);
	return got;
}

/* A type object named name (tp_name is a C string), with tp_flags flags. */
uint64_t fuzz_seed_type(struct fuzz_seed *s, const struct py_layout *l, const char *name,
			uint64_t flags)
{
	size_t n = strlen(name) + 1;
	uint64_t str = fuzz_seed_alloc(s, n), t = fuzz_seed_alloc(s, 512);

	fuzz_seed_put(s, str, name, n);
	fuzz_seed_put64(s, t, 1);
	fuzz_seed_put64(s, t + (uint64_t)l->type_name, str);
	if (l->type_flags >= 0)
		fuzz_seed_put64(s, t + (uint64_t)l->type_flags, flags);
	return t;
}

/* A line table of the layout's kind: two lines from firstlineno on. */
static size_t seed_linetable(const struct pyproc *pp, uint8_t *lt)
{
	/* Copied from the fixtures of real interpreters (build/fixtures). */
	static const uint8_t lnotab[] = {0x00, 0x01, 0x06, 0x01, 0x0a, 0x01};
	static const uint8_t l310[] = {0x06, 0x01, 0x08, 0x01, 0x04, 0x80};
	static const uint8_t loc[] = {0x80, 0x00, 0xd8, 0x0b, 0x0c, 0x80, 0x48};
	const uint8_t *p = pp->linetable == PY_LT_LOCATIONS   ? loc
			   : pp->linetable == PY_LT_LINETABLE ? l310
							      : lnotab;
	size_t n = pp->linetable == PY_LT_LOCATIONS   ? sizeof(loc)
		   : pp->linetable == PY_LT_LINETABLE ? sizeof(l310)
						      : sizeof(lnotab);

	memcpy(lt, p, n);
	return n;
}

uint64_t fuzz_seed_code(struct fuzz_seed *s, const struct pyproc *pp, uint64_t code_type,
			const char *name, const char *qualname, const char *file, int firstlineno,
			const char *arg0)
{
	const struct py_layout *l = &pp->layout;
	uint8_t lt[16];
	size_t ltlen = seed_linetable(pp, lt);
	uint64_t c = fuzz_seed_alloc(s, 512);
	int32_t argc = arg0 ? 1 : 0;

	fuzz_seed_put64(s, c, 1);
	fuzz_seed_put64(s, c + (uint64_t)l->obj_type, code_type);
	fuzz_seed_put64(s, c + (uint64_t)l->code_name, fuzz_seed_str(s, l, name));
	if (l->code_qualname >= 0)
		fuzz_seed_put64(s, c + (uint64_t)l->code_qualname, fuzz_seed_str(s, l, qualname));
	fuzz_seed_put64(s, c + (uint64_t)l->code_filename, fuzz_seed_str(s, l, file));
	fuzz_seed_put(s, c + (uint64_t)l->code_firstlineno, &firstlineno, 4);
	fuzz_seed_put64(s, c + (uint64_t)l->code_linetable, fuzz_seed_bytes(s, l, lt, ltlen));
	if (l->code_argcount >= 0)
		fuzz_seed_put(s, c + (uint64_t)l->code_argcount, &argc, 4);
	if (arg0 && l->code_varnames >= 0) {
		uint64_t tup = fuzz_seed_alloc(s, (size_t)l->tuple_item + 8);

		fuzz_seed_put64(s, tup + (uint64_t)l->var_size, 1);
		fuzz_seed_put64(s, tup + (uint64_t)l->tuple_item, fuzz_seed_str(s, l, arg0));
		fuzz_seed_put64(s, c + (uint64_t)l->code_varnames, tup);
	}
	return c;
}

uint32_t fuzz_seed_pos(const struct pyproc *pp, unsigned int unit)
{
	if (pp->tp.off.flags & TP_LF_LASTI_PTR)
		return (uint32_t)pp->layout.code_adaptive + 2 * unit;
	return pp->lasti_in_units ? unit : 2 * unit;
}

/* Reads the _Py_DebugOffsets of each ELF file in paths (3.13+) and calls fn
 * with its version and bytes. */
bool fuzz_init_seeding(int argc, char **argv,
		       void (*seed)(const char *dir, unsigned int major, unsigned int minor,
				    const void *dobuf, const char *tag))
{
	const char *dir = getenv("TAIPAN_FUZZ_SEEDS");

	fuzz_target_init();
	if (!dir)
		return getenv("TAIPAN_FUZZ_VERBOSE") != NULL;
	for (unsigned int i = 0; i < py_layout_table_len; i++) {
		uint32_t h = py_layout_table[i].hexversion;
		seed(dir, h >> 24, (h >> 16) & 0xff, NULL, "row-");
	}
	for (int i = 1; i < argc; i++) {
		uint8_t buf[FUZZ_DO_LEN] = {0};
		struct py_layout l;
		uint64_t hex;
		char tag[64];
		const char *base = strrchr(argv[i], '/');

		if (argv[i][0] == '-' || !fuzz_read_runtime(argv[i], buf, sizeof(buf)))
			continue;
		if (py_debug_offsets_parse(buf, sizeof(buf), &l, &hex, NULL, NULL, 0))
			continue;
		snprintf(tag, sizeof(tag), "%s-", base ? base + 1 : argv[i]);
		seed(dir, (unsigned int)(hex >> 24), (unsigned int)(hex >> 16) & 0xff, buf, tag);
	}
	exit(0);
}
