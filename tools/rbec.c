/* rbec.c - taipan-rbec: where a Ruby library keeps each thread's execution
 * context (src/ruby/ectls.h), and, in a live process, the EC a thread has.
 *
 *   taipan-rbec FILE
 *       how ruby_current_ec is reached in FILE (a libruby, or a ruby
 *       executable linked statically): key=value lines
 *   taipan-rbec --pid PID FSBASE...
 *   taipan-rbec --frames --pid PID FSBASE...
 *       each such thread's frames, innermost first, one line each:
 *       FSBASE frame LABEL<tab>PATH<tab>LINE, or FSBASE cfunc (a C
 *       function's frame), with the layout of the library's Ruby version
 *       (src/ruby/gen/)
 *       for each thread pointer (fs base, as a debugger reads it), one line:
 *       FSBASE ec=0x... thread=0x... self=0x...: the thread's EC, its
 *       rb_thread_t and its Thread object, as rb_thread_current() reads them;
 *       FSBASE ec=0x0 for a thread that runs no Ruby (the VM's timer)
 *
 * The live form is for tests: the thread pointer of another process's
 * thread is not something it reads itself (taipan's BPF reads it).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc/elfsym.h"
#include "proc/memread.h"
#include "ruby/ectls.h"
#include "ruby/rbframes.h"
#include "ruby/rboffsets.h"
#include "ruby/rbproc.h"

static int reader(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return mem_read((pid_t)(intptr_t)ctx, addr, buf, len);
}

static void print_ectls(const struct rb_ectls *t)
{
	printf("model=%s\ngot=0x%" PRIx64 "\ndtpoff=%" PRIu64 "\ntls_size=%" PRIu64
	       "\nagreed=%u\nby_symbol=%d\nec_thread=%u\nthread_self=%u\n",
	       t->model == RB_TLS_LE ? "le" : "gd", t->got, t->dtpoff, t->tls_size, t->agreed,
	       t->by_symbol, t->ec_thread, t->thread_self);
}

/* Opens path into *ef (closed by the caller) and finds where it keeps
 * ruby_current_ec; says why not on stderr. */
static int analyse(const char *path, struct elf_file **ef, struct rb_ectls *t)
{
	char err[256];
	int ret = elf_file_open(path, ef);
	if (ret) {
		fprintf(stderr, "taipan-rbec: %s: %s\n", path, strerror(-ret));
		return 1;
	}
	if (rb_ectls_find(*ef, t, err, sizeof(err))) {
		fprintf(stderr, "taipan-rbec: %s: %s\n", path, err);
		return 1;
	}
	return 0;
}

static void print_frames(const struct rb_offsets *o, pid_t pid, const char *fs, uint64_t ec)
{
	struct rb_frame f[256];
	size_t n;
	void *ctx = (void *)(intptr_t)pid;
	int ret = rb_walk(o, reader, ctx, ec, f, 256, &n);
	if (ret) {
		printf("%s error=%s\n", fs, strerror(-ret));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		char label[256], path[1024];
		int line;
		if (!f[i].iseq) {
			printf("%s cfunc\n", fs);
			continue;
		}
		ret = rb_frame_name(o, reader, ctx, f[i].iseq, f[i].pc, label, sizeof(label), path,
				    sizeof(path), &line);
		if (ret)
			printf("%s frame-error=%s\n", fs, strerror(-ret));
		else
			printf("%s frame %s\t%s\t%d\n", fs, label, path, line);
	}
}

static int live(pid_t pid, char **fsbases, int n, bool frames)
{
	struct rbproc rp;
	char err[512];
	/* The process as taipan reads it: its library, layout and TLS. */
	if (rbproc_inspect(pid, &rp, err, sizeof(err))) {
		fprintf(stderr, "taipan-rbec: %s\n", err);
		return 1;
	}
	const struct rb_ectls t = rp.tls;
	const struct rb_offsets *o = rp.o;
	uint64_t bias = rp.bias;
	if (!t.ec_thread || !t.thread_self) {
		fprintf(stderr, "taipan-rbec: %s: rb_thread_current's loads not recognised\n",
			rp.lib);
		return 1;
	}
	int status = 0;
	for (int i = 0; i < n; i++) {
		uint64_t fs = strtoull(fsbases[i], NULL, 0), slot, ec = 0, th = 0, self = 0;
		int ret = rb_ectls_slot(&t, bias, fs, reader, (void *)(intptr_t)pid, &slot);
		if (!ret)
			ret = mem_read(pid, slot, &ec, 8);
		if (!ret && !ec) {
			printf("%s ec=0x0\n", fsbases[i]); /* no Ruby thread (the timer's) */
			continue;
		}
		if (!ret && frames) {
			print_frames(o, pid, fsbases[i], ec);
			continue;
		}
		if (!ret)
			ret = mem_read(pid, ec + t.ec_thread, &th, 8);
		if (!ret)
			ret = mem_read(pid, th + t.thread_self, &self, 8);
		if (ret) {
			printf("%s error=%s\n", fsbases[i], strerror(-ret));
			status = 1;
			continue;
		}
		printf("%s ec=0x%" PRIx64 " thread=0x%" PRIx64 " self=0x%" PRIx64 "\n", fsbases[i],
		       ec, th, self);
	}
	return status;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "--pid"))
		return live((pid_t)atoi(argv[2]), argv + 3, argc - 3, false);
	if (argc >= 5 && !strcmp(argv[1], "--frames") && !strcmp(argv[2], "--pid"))
		return live((pid_t)atoi(argv[3]), argv + 4, argc - 4, true);
	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr,
			"usage: taipan-rbec FILE\n       taipan-rbec --pid PID FSBASE...\n");
		return 2;
	}
	struct rb_ectls t;
	struct elf_file *ef = NULL;
	int status = analyse(argv[1], &ef, &t);
	elf_file_close(ef);
	if (!status)
		print_ectls(&t);
	return status;
}
