/* capture.c - recording, saving and replaying the memory a walk reads (see
 * capture.h for the file format). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpython/capture.h"
#include "proc/memread.h"

#define CAPTURE_MAGIC "taipan-capture 1"
/* Bounds on what a capture file may hold: a walk of a few threads reads a
 * few hundred KiB; a file claiming more is not one of ours. */
#define MAX_REGION ((size_t)1 << 24)
#define MAX_IMAGE ((size_t)1 << 28)

/* The index of the first region that ends at or after addr. */
static size_t first_reaching(const struct capture *c, uint64_t addr)
{
	size_t lo = 0, hi = c->nregions;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->regions[mid].addr + c->regions[mid].len < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Keeps len bytes at addr, merged with every region they overlap or touch
 * (the bytes given win: they are the newer read). */
static int add_region(struct capture *c, uint64_t addr, const void *buf, size_t len)
{
	size_t i = first_reaching(c, addr), j = i;
	uint64_t lo = addr, hi = addr + len;
	while (j < c->nregions && c->regions[j].addr <= addr + len) {
		if (c->regions[j].addr < lo)
			lo = c->regions[j].addr;
		if (c->regions[j].addr + c->regions[j].len > hi)
			hi = c->regions[j].addr + c->regions[j].len;
		j++;
	}
	uint8_t *data = malloc(hi - lo);
	if (!data)
		return -ENOMEM;
	for (size_t k = i; k < j; k++) {
		memcpy(data + (c->regions[k].addr - lo), c->regions[k].data, c->regions[k].len);
		free(c->regions[k].data);
	}
	memcpy(data + (addr - lo), buf, len);
	if (i == j) { /* a new region at i */
		struct capture_region *r =
		    realloc(c->regions, (c->nregions + 1) * sizeof(*c->regions));
		if (!r) {
			free(data);
			return -ENOMEM;
		}
		c->regions = r;
		memmove(&r[i + 1], &r[i], (c->nregions - i) * sizeof(*r));
		c->nregions++;
		j = i + 1;
	}
	c->regions[i] = (struct capture_region){.addr = lo, .len = hi - lo, .data = data};
	memmove(&c->regions[i + 1], &c->regions[j], (c->nregions - j) * sizeof(*c->regions));
	c->nregions -= j - i - 1;
	return 0;
}

/* The reader of a capture: the live process (recording) or the image. */
static int capture_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct capture *c = ctx;
	if (!len)
		return 0;
	if (!addr || addr + len < addr)
		return -EFAULT;
	if (c->live) {
		int ret = mem_read(c->live, addr, buf, len);
		if (!ret && add_region(c, addr, buf, len))
			return -ENOMEM;
		return ret;
	}
	size_t i = first_reaching(c, addr);
	if (i == c->nregions || c->regions[i].addr > addr ||
	    addr + len > c->regions[i].addr + c->regions[i].len)
		return -EFAULT;
	memcpy(buf, c->regions[i].data + (addr - c->regions[i].addr), len);
	return 0;
}

int capture_record(struct capture *c, const struct pyproc *pp)
{
	memset(c, 0, sizeof(*c));
	c->pp = *pp;
	c->live = pp->pid;
	c->pp.read = capture_read;
	c->pp.read_ctx = c;
	return 0;
}

int capture_add_thread(struct capture *c, uint64_t thread_id)
{
	struct capture_thread *t = realloc(c->threads, (c->nthreads + 1) * sizeof(*t));
	if (!t)
		return -ENOMEM;
	c->threads = t;
	t[c->nthreads++] = (struct capture_thread){.thread_id = thread_id};
	return 0;
}

int capture_add_frame(struct capture *c, int line, const char *file, const char *name)
{
	if (!c->nthreads)
		return -EINVAL;
	struct capture_thread *t = &c->threads[c->nthreads - 1];
	struct capture_frame *f = realloc(t->frames, (t->nframes + 1) * sizeof(*f));
	if (!f)
		return -ENOMEM;
	t->frames = f;
	f = &f[t->nframes];
	f->line = line;
	f->file = strdup(file);
	f->name = strdup(name);
	if (!f->file || !f->name) {
		free(f->file);
		free(f->name);
		return -ENOMEM;
	}
	t->nframes++;
	return 0;
}

int capture_add_stack_line(struct capture *c, char *line)
{
	unsigned long long id;
	if (sscanf(line, "thread %llx", &id) == 1)
		return capture_add_thread(c, id);
	char *file = strchr(line, '\t'), *name = file ? strchr(file + 1, '\t') : NULL;
	if (strncmp(line, "frame ", 6) || !name)
		return -EINVAL;
	*file++ = 0;
	*name++ = 0;
	return capture_add_frame(c, atoi(line + 6), file, name);
}

static int write_all(const struct capture *c, FILE *f)
{
	const struct pyproc *pp = &c->pp;
	fprintf(f, "%s\nversion %s\nmajor %u\nminor %u\nhexversion 0x%" PRIx32 "\n", CAPTURE_MAGIC,
		pp->version, pp->major, pp->minor, pp->hexversion);
	if (pp->free_threaded)
		fputs("free_threaded 1\n", f);
	fprintf(f, "interp_head 0x%" PRIx64 "\nruntime 0x%" PRIx64 "\ncode_type 0x%" PRIx64 "\n",
		(uint64_t)pp->tp.interp_head_addr, pp->runtime_addr, pp->code_type_addr);
#define PUT_FIELD(name, how, member) fprintf(f, "layout " #name " %" PRId32 "\n", pp->layout.name);
	PY_LAYOUT_FIELDS(PUT_FIELD)
#undef PUT_FIELD
	for (size_t i = 0; i < c->nthreads; i++) {
		const struct capture_thread *t = &c->threads[i];
		fprintf(f, "thread 0x%" PRIx64 "\n", t->thread_id);
		for (size_t k = 0; k < t->nframes; k++)
			fprintf(f, "frame %d\t%s\t%s\n", t->frames[k].line, t->frames[k].file,
				t->frames[k].name);
	}
	for (size_t i = 0; i < c->nregions; i++) {
		const struct capture_region *r = &c->regions[i];
		fprintf(f, "region 0x%" PRIx64 " %zu\n", r->addr, r->len);
		if (fwrite(r->data, 1, r->len, f) != r->len)
			return -EIO;
		fputc('\n', f);
	}
	fputs("end\n", f);
	return ferror(f) ? -EIO : 0;
}

int capture_write(const struct capture *c, const char *path)
{
	char tmp[4096];
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= sizeof(tmp))
		return -ENAMETOOLONG;
	FILE *f = fopen(tmp, "wbx");
	if (!f)
		return -errno;
	int ret = write_all(c, f);
	if (fclose(f) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

/* Sets the layout field called name; -ENOENT when there is none. */
static int set_layout(struct py_layout *l, const char *name, int32_t v)
{
#define SET_FIELD(field, how, member)                                                              \
	if (!strcmp(name, #field)) {                                                               \
		l->field = v;                                                                      \
		return 0;                                                                          \
	}
	PY_LAYOUT_FIELDS(SET_FIELD)
#undef SET_FIELD
	return -ENOENT;
}

/* One line of the header; returns 1 at "end", 0 to go on, or -EINVAL.
 * *dbg is set by a "debug_offsets 1" line. */
static int load_line(struct capture *c, FILE *f, char *line, size_t *image, bool *dbg)
{
	struct pyproc *pp = &c->pp;
	char name[64];
	unsigned long long a;
	long long v;
	size_t len;

	line[strcspn(line, "\n")] = 0;
	if (!strcmp(line, "end"))
		return 1;
	if (sscanf(line, "version %23s", pp->version) == 1)
		return 0;
	if (sscanf(line, "major %u", &pp->major) == 1 || sscanf(line, "minor %u", &pp->minor) == 1)
		return 0;
	if (sscanf(line, "hexversion %llx", &a) == 1) {
		pp->hexversion = (uint32_t)a;
		return 0;
	}
	if (sscanf(line, "debug_offsets %llu", &a) == 1) {
		*dbg = a != 0;
		return 0;
	}
	if (sscanf(line, "free_threaded %llu", &a) == 1) {
		pp->free_threaded = a != 0;
		return 0;
	}
	if (sscanf(line, "interp_head %llx", &a) == 1) {
		pp->tp.interp_head_addr = a;
		return 0;
	}
	if (sscanf(line, "runtime %llx", &a) == 1) {
		pp->runtime_addr = a;
		return 0;
	}
	if (sscanf(line, "code_type %llx", &a) == 1) {
		pp->code_type_addr = a;
		return 0;
	}
	if (sscanf(line, "layout %63s %lld", name, &v) == 2)
		return v >= INT32_MIN && v <= INT32_MAX ? set_layout(&pp->layout, name, (int32_t)v)
							: -EINVAL;
	if (!strncmp(line, "thread ", 7) || !strncmp(line, "frame ", 6))
		return capture_add_stack_line(c, line);
	if (sscanf(line, "region %llx %zu", &a, &len) == 2) {
		if (!len || len > MAX_REGION || *image + len > MAX_IMAGE)
			return -EINVAL;
		uint8_t *buf = malloc(len);
		if (!buf)
			return -ENOMEM;
		int ret = fread(buf, 1, len, f) == len && fgetc(f) == '\n' ? 0 : -EINVAL;
		if (!ret)
			ret = add_region(c, a, buf, len);
		free(buf);
		*image += len;
		return ret;
	}
	return -EINVAL;
}

int capture_load(struct capture *c, const char *path, char *err, size_t errlen)
{
	char *line = NULL;
	size_t cap = 0, image = 0, lineno = 1;
	bool dbg = false;
	int ret = 0;

	memset(c, 0, sizeof(*c));
	FILE *f = fopen(path, "rbe");
	if (!f) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	memset(&c->pp.layout, 0xff, sizeof(c->pp.layout)); /* every field -1 until set */
	if (getline(&line, &cap, f) < 0 ||
	    strncmp(line, CAPTURE_MAGIC "\n", sizeof(CAPTURE_MAGIC))) {
		snprintf(err, errlen, "%s: not a taipan capture (version 1)", path);
		ret = -EINVAL;
		goto out;
	}
	for (;;) {
		lineno++;
		if (getline(&line, &cap, f) < 0) {
			snprintf(err, errlen, "%s: ends before its \"end\" line", path);
			ret = -EINVAL;
			goto out;
		}
		ret = load_line(c, f, line, &image, &dbg);
		if (ret == 1)
			break;
		if (ret) {
			snprintf(err, errlen, "%s:%zu: cannot read this line: %.60s", path, lineno,
				 line);
			goto out;
		}
	}
	c->pp.read = capture_read;
	c->pp.read_ctx = c;
	char derr[256];
	/* A synthetic image: its layout is the _Py_DebugOffsets in it, read as
	 * from a live process, and so is where the interpreter list starts. */
	if (dbg && (ret = pyproc_read_debug_offsets(&c->pp, derr, sizeof(derr)))) {
		snprintf(err, errlen, "%s: %s", path, derr);
		goto out;
	}
	if (dbg && !c->pp.tp.interp_head_addr && c->pp.layout.rt_interp_head >= 0)
		c->pp.tp.interp_head_addr =
		    c->pp.runtime_addr + (uint64_t)c->pp.layout.rt_interp_head;
	uint64_t head = c->pp.tp.interp_head_addr;
	ret = pyproc_derive(&c->pp, derr, sizeof(derr));
	if (ret)
		snprintf(err, errlen, "%s: %s", path, derr);
	c->pp.tp.interp_head_addr = head;
out:
	free(line);
	fclose(f);
	if (ret)
		capture_free(c);
	return ret;
}

void capture_free(struct capture *c)
{
	for (size_t i = 0; i < c->nthreads; i++) {
		for (size_t k = 0; k < c->threads[i].nframes; k++) {
			free(c->threads[i].frames[k].name);
			free(c->threads[i].frames[k].file);
		}
		free(c->threads[i].frames);
	}
	free(c->threads);
	for (size_t i = 0; i < c->nregions; i++)
		free(c->regions[i].data);
	free(c->regions);
	memset(c, 0, sizeof(*c));
}
