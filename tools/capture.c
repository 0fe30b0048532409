/* capture.c - taipan-capture: records what taipan's walkers read of a
 * Python process, with the stacks the process reports itself, into a
 * capture file (src/cpython/capture.h) for tests/unit/test_captures.c.
 *
 *   taipan-capture OUT -- PYTHON [ARGS...]
 *
 * Starts the command with pipes on its stdin and stdout. The command (see
 * tests/fixtures/capture_workload.py) stands still in known stacks, prints
 * them ("thread", "frame" lines, then "end") and blocks until its stdin is
 * closed. Meanwhile this tool walks it as `taipan dump` does and as the BPF
 * program does for each reported thread, symbolizes every frame, keeps
 * every byte those walks read, and writes them with the reported stacks.
 * The command is taipan-capture's child, so reading it needs no privileges
 * beyond those of its owner.
 *
 * Exit status: 0 when the capture was written, 1 on any failure (said on
 * stderr), 2 for a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpython/capture.h"
#include "proc/procfs.h"
#include "cpython/pywalk.h"
#include "cpython/symbolize.h"

/* How long the command may take to report: a cold interpreter start on a
 * loaded machine is seconds, not minutes. */
#define REPORT_TIMEOUT_MS 120000

static pid_t spawn(char **argv, int *to_child, int *from_child)
{
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execvp(argv[0], argv);
		fprintf(stderr, "taipan-capture: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	*to_child = in[1];
	*from_child = out[0];
	return pid;
}

/* The next line the command writes on fd, without its newline, in buf
 * (which holds what was read past it between calls). Returns 0, or a
 * negative errno at the end of the output or after REPORT_TIMEOUT_MS. */
static int next_line(int fd, char *buf, size_t size, size_t *have, char *line)
{
	for (;;) {
		char *nl = memchr(buf, '\n', *have);
		if (nl) {
			size_t n = (size_t)(nl - buf);
			memcpy(line, buf, n);
			line[n] = 0;
			*have -= n + 1;
			memmove(buf, nl + 1, *have);
			return 0;
		}
		if (*have == size)
			return -E2BIG;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, REPORT_TIMEOUT_MS) <= 0)
			return -ETIMEDOUT;
		ssize_t got = read(fd, buf + *have, size - *have);
		if (got <= 0)
			return -EPIPE;
		*have += (size_t)got;
	}
}

/* Reads the command's report into c; returns 0 at its "end" line. */
static int read_report(int fd, struct capture *c)
{
	static char buf[1 << 16], line[sizeof(buf)];
	size_t have = 0;
	for (;;) {
		int ret = next_line(fd, buf, sizeof(buf), &have, line);
		if (ret) {
			fprintf(stderr, "taipan-capture: no complete report from the command: %s\n",
				ret == -ETIMEDOUT ? "timed out" : strerror(-ret));
			return ret;
		}
		if (!strcmp(line, "end"))
			return 0;
		ret = capture_add_stack_line(c, line);
		if (ret == -EINVAL)
			fprintf(stderr, "taipan-capture: unexpected line from the command: %s\n",
				line);
		if (ret)
			return ret;
	}
}

/* Waits until the command's main thread is blocked reading its stdin (its
 * /proc/PID/syscall starts "0 0x0": read, fd 0): it reports its stacks
 * just before that read, and a walk made in between would see it a line
 * early. Returns 0, or -ETIMEDOUT. */
static int wait_blocked(pid_t pid)
{
	struct timespec start, now, nap = {.tv_nsec = 1000000};
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		char *text = NULL;
		size_t len = 0;
		bool blocked = !procfs_read(pid, 0, "syscall", 256, &text, &len) &&
			       !strncmp(text, "0 0x0 ", 6);
		free(text);
		if (blocked)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >
		    REPORT_TIMEOUT_MS) {
			fprintf(stderr, "taipan-capture: the command never blocked on its stdin\n");
			return -ETIMEDOUT;
		}
		nanosleep(&nap, NULL);
	}
}

static void symbolize_all(struct symbolizer *sz, const struct tp_frame *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct prof_frame pf;
		symbolizer_frame(sz, &f[i], &pf);
	}
}

/* Walks the process both ways, symbolizing every frame: what is read is
 * what the capture keeps. */
static int walk(struct capture *c)
{
	struct pywalk w;
	struct symbolizer *sz = symbolizer_new(&c->pp);
	struct tp_sample *s = malloc(sizeof(*s));
	int ret = -ENOMEM;
	if (!sz || !s)
		goto out;
	ret = pywalk_read(&c->pp, &w);
	if (ret) {
		fprintf(stderr, "taipan-capture: cannot walk pid %d: %s\n", c->pp.pid,
			strerror(-ret));
		goto out;
	}
	for (size_t i = 0; i < w.nthreads; i++)
		symbolize_all(sz, w.threads[i].frames, w.threads[i].nframes);
	pywalk_free(&w);
	for (size_t i = 0; i < c->nthreads; i++) {
		uint64_t id = ((uint64_t)c->pp.pid << 32) | (uint32_t)c->pp.pid;
		ret = pywalk_sample(&c->pp, id, c->threads[i].thread_id, s, NULL);
		if (ret)
			goto out;
		symbolize_all(sz, s->frames, s->nframes);
		if (s->err || s->nframes != c->threads[i].nframes)
			fprintf(stderr,
				"taipan-capture: note: thread 0x%" PRIx64
				": walked %u frames (error %u), Python reported %zu\n",
				c->threads[i].thread_id, s->nframes, s->err, c->threads[i].nframes);
	}
	ret = 0;
out:
	symbolizer_free(sz);
	free(s);
	return ret;
}

int main(int argc, char **argv)
{
	struct capture c;
	struct pyproc pp;
	int from = -1, to = -1, status = 0, ret;
	char err[512];

	if (argc < 4 || strcmp(argv[2], "--")) {
		fprintf(stderr, "usage: taipan-capture OUT -- PYTHON [ARGS...]\n");
		return 2;
	}
	memset(&c, 0, sizeof(c));
	pid_t pid = spawn(argv + 3, &to, &from);
	if (pid < 0) {
		fprintf(stderr, "taipan-capture: cannot start %s: %s\n", argv[3], strerror(-pid));
		return 1;
	}
	struct capture report = {0};
	ret = read_report(from, &report);
	if (!ret)
		ret = wait_blocked(pid);
	if (!ret) {
		ret = pyproc_inspect(pid, &pp, err, sizeof(err));
		if (ret)
			fprintf(stderr, "taipan-capture: %s\n", err);
	}
	if (!ret) {
		capture_record(&c, &pp);
		c.threads = report.threads; /* the capture owns them now */
		c.nthreads = report.nthreads;
		report.threads = NULL;
		report.nthreads = 0;
		ret = walk(&c);
	}
	if (!ret) {
		ret = capture_write(&c, argv[1]);
		if (ret)
			fprintf(stderr, "taipan-capture: cannot write %s: %s\n", argv[1],
				strerror(-ret));
	}
	close(to); /* releases the command */
	close(from);
	if (ret)
		kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	size_t bytes = 0;
	for (size_t i = 0; i < c.nregions; i++)
		bytes += c.regions[i].len;
	if (!ret)
		fprintf(stderr,
			"taipan-capture: %s: Python %s, %zu threads, %zu bytes in %zu regions\n",
			argv[1], c.pp.version, c.nthreads, bytes, c.nregions);
	capture_free(&c);
	capture_free(&report);
	return ret ? 1 : 0;
}
