/* cmd_dump.c - `taipan dump`: the Python stack of every thread of a process,
 * right now, read from user space without stopping it. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/cli.h"
#include "cmd/commands.h"
#include "util/log.h"
#include "target/procfs.h"
#include "target/pyproc.h"
#include "target/pythreads.h"
#include "target/pywalk.h"
#include "core/walkerr.h"
#include "profile/symbolize.h"
#include "util/strutil.h"
#include "util/clock.h"

void cmd_dump_usage(FILE *out)
{
	fprintf(out,
		"usage: taipan dump -p PID [--json]\n"
		"\n"
		"Prints the Python stack of every thread of process PID as it is right now,\n"
		"innermost frame first, like a traceback. The process keeps running: its\n"
		"memory is read with process_vm_readv, it is never stopped or written to.\n"
		"Each thread shows its OS thread id and its name: the Python one\n"
		"(threading.Thread(name=...), \"MainThread\"), else the OS one\n"
		"(/proc/PID/task/TID/comm).\n"
		"Stacks are read to %d frames; a deeper (or looping) one ends in a\n"
		"\"[truncated]\" line.\n"
		"\n"
		"options:\n"
		"  -p, --pid PID   the process to read (required)\n"
		"  -j, --json      print JSON: {pid, comm, python_version, threads: [{tid,\n"
		"                  name, os_name, thread_id, interpreter, error, frames:\n"
		"                  [{name, file, line, first_line}]}]}, frames innermost first\n"
		"  -v, --verbose   also say how the process was recognised, how threads were\n"
		"                  matched with OS threads, and how long the read took\n"
		"  -h, --help      this text\n"
		"\n"
		"exit status: 0 when the stacks were printed, 1 when the process could not\n"
		"be read (no such process, not Python, unsupported version), 2 for a usage\n"
		"error.\n"
		"\n"
		"examples:\n"
		"  taipan dump -p 4242\n"
		"  taipan dump -p 4242 --json | jq '.threads[] | {tid, top: .frames[0].name}'\n",
		TP_MAX_FRAMES);
}

struct dump_args {
	pid_t pid;
	bool json;
};

static int parse_args(int argc, char **argv, struct dump_args *a)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"json", no_argument, NULL, 'j'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	int c;
	optind = 1;
	while ((c = cli_getopt("dump", argc, argv, "p:jvh", longopts)) != -1) {
		switch (c) {
		case 'p':
			if (a->pid) {
				log_error("dump reads one process: give -p once");
				return -EINVAL;
			}
			if (cli_pid(optarg, &a->pid))
				return -EINVAL;
			break;
		case 'j':
			a->json = true;
			break;
		case 'v':
			log_set_level(LOG_VERBOSE);
			break;
		case 'h':
			cmd_dump_usage(stdout);
			exit(0);
		default:
			return -EINVAL;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s' (see 'taipan help dump')", argv[optind]);
		return -EINVAL;
	}
	if (!a->pid) {
		log_error("dump needs -p PID (see 'taipan help dump')");
		return -EINVAL;
	}
	return 0;
}

/* The Python names of the threads, read once. */
struct names {
	struct pythread_name *v;
	size_t n;
};

/* The OS name of thread tid, or "" when it is gone or unknown (tid 0). */
static void os_name(pid_t pid, pid_t tid, char *buf, size_t len)
{
	buf[0] = 0;
	if (tid)
		procfs_comm(pid, tid, buf, len);
}

/* A thread's name: its Python name, else its OS name; NULL with neither. */
static const char *thread_name(const struct names *nm, const struct pywalk_thread *t,
			       const char *os)
{
	const char *py = pythreads_find(nm->v, nm->n, t->thread_id);
	return py ? py : t->tid ? os : NULL;
}

/* What JSON says of a walk that stopped short: its key, or null. */
static json_t *walk_err_json(int err)
{
	return err ? json_string(walkerr_key((unsigned int)err)) : json_null();
}

/* Threads by OS tid, the main thread first; those without one last, in the
 * interpreter's order. */
static int by_tid(const void *x, const void *y)
{
	const struct pywalk_thread *a = *(const struct pywalk_thread *const *)x;
	const struct pywalk_thread *b = *(const struct pywalk_thread *const *)y;
	if (a->tid && b->tid)
		return a->tid < b->tid ? -1 : a->tid > b->tid;
	if (a->tid || b->tid)
		return a->tid ? -1 : 1;
	return a < b ? -1 : a > b;
}

/* s on stdout as text (str_escape): the names in a dump are the target's to
 * choose, and one must not retitle, clear or write to the terminal of the
 * user reading it. */
static void put_esc(const char *s)
{
	char buf[512];
	if (str_escape(buf, sizeof(buf), s, NULL) < sizeof(buf)) {
		fputs(buf, stdout);
		return;
	}
	char *all = str_escape_dup(s, NULL);
	fputs(all ? all : buf, stdout); /* out of memory: the start of it */
	free(all);
}

static void print_text(const struct pyproc *pp, struct symbolizer *sz, const struct names *nm,
		       struct pywalk_thread *const *th, size_t n, int list_err)
{
	printf("Process %d (", pp->pid);
	put_esc(pp->comm);
	printf("): Python %s, %zu thread%s\n", pp->version, n, n == 1 ? "" : "s");
	if (list_err)
		printf("[thread list cut short: %s; threads may be missing]\n",
		       walkerr_desc((unsigned int)list_err));
	for (size_t i = 0; i < n; i++) {
		const struct pywalk_thread *t = th[i];
		char os[TP_COMM_LEN + 1];
		os_name(pp->pid, t->tid, os, sizeof(os));
		const char *name = thread_name(nm, t, os);
		printf("\n");
		if (t->tid)
			printf("Thread %d", t->tid);
		else
			printf("Thread 0x%llx", (unsigned long long)t->thread_id);
		if (name) {
			printf(" \"");
			put_esc(name);
			putchar('"');
		}
		if (!t->tid)
			printf(" (no OS thread found)");
		if (t->interp)
			printf(" in interpreter %u", t->interp);
		printf(" (most recent call first):\n");
		for (uint32_t k = 0; k < t->nframes; k++) {
			struct prof_frame f;
			if (symbolizer_frame(sz, &t->frames[k], &f)) {
				printf("  [code object 0x%llx unreadable]\n",
				       (unsigned long long)t->frames[k].code);
				continue;
			}
			printf("  File \"");
			put_esc(f.file);
			printf("\", line %d, in ", f.line);
			put_esc(f.name);
			putchar('\n');
		}
		if (walkerr_is_cut((unsigned int)t->err))
			printf("  [truncated after %u frames]\n", t->nframes);
		else if (t->err)
			printf("  %s %s\n", walkerr_marker((unsigned int)t->err),
			       walkerr_desc((unsigned int)t->err));
		else if (!t->nframes)
			printf("  (no Python frames)\n");
	}
}

/* A JSON string, or null when s is not valid UTF-8 (a file name can be). */
static json_t *jstr(const char *s)
{
	json_t *j = s ? json_string(s) : NULL;
	return j ? j : json_null();
}

static int print_json(const struct pyproc *pp, struct symbolizer *sz, const struct names *nm,
		      struct pywalk_thread *const *th, size_t n, int list_err)
{
	json_t *root = NULL, *threads = NULL;
	int ret = -ENOMEM;

	threads = json_array();
	if (!threads)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct pywalk_thread *t = th[i];
		char os[TP_COMM_LEN + 1], tid_hex[32];
		json_t *frames = json_array(), *jt;
		if (!frames)
			goto out;
		for (uint32_t k = 0; k < t->nframes; k++) {
			struct prof_frame f;
			json_t *jf;
			if (symbolizer_frame(sz, &t->frames[k], &f))
				jf = json_pack("{s:n, s:n, s:n, s:n, s:I}", "name", "file", "line",
					       "first_line", "code", (json_int_t)t->frames[k].code);
			else
				jf = json_pack("{s:o, s:o, s:i, s:i}", "name", jstr(f.name), "file",
					       jstr(f.file), "line", f.line, "first_line",
					       f.first_line);
			if (!jf || json_array_append_new(frames, jf)) {
				json_decref(frames);
				goto out;
			}
		}
		os_name(pp->pid, t->tid, os, sizeof(os));
		const char *name = thread_name(nm, t, os);
		snprintf(tid_hex, sizeof(tid_hex), "0x%llx", (unsigned long long)t->thread_id);
		jt = json_pack("{s:o, s:o, s:o, s:s, s:i, s:o, s:o}", "tid",
			       t->tid ? json_integer(t->tid) : json_null(), "name",
			       name ? jstr(name) : json_null(), "os_name",
			       t->tid ? jstr(os) : json_null(), "thread_id", tid_hex, "interpreter",
			       (int)t->interp, "error", walk_err_json(t->err), "frames", frames);
		if (!jt || json_array_append_new(threads, jt))
			goto out;
	}
	root = json_pack("{s:i, s:o, s:s, s:o, s:o}", "pid", (int)pp->pid, "comm", jstr(pp->comm),
			 "python_version", pp->version, "thread_list_error",
			 walk_err_json(list_err), "threads", threads);
	threads = NULL; /* root owns it now, or json_pack freed it */
	if (!root)
		goto out;
	if (json_dumpf(root, stdout, JSON_INDENT(2)) || fputc('\n', stdout) == EOF) {
		ret = -EIO;
		goto out;
	}
	ret = 0;
out:
	json_decref(threads);
	json_decref(root);
	return ret;
}

int cmd_dump(int argc, char **argv)
{
	struct dump_args a = {0};
	struct pyproc pp;
	struct pywalk w = {0};
	struct symbolizer *sz = NULL;
	struct pywalk_thread **th = NULL;
	struct names nm = {0};
	char err[512];
	int ret, status = 1;

	if (parse_args(argc, argv, &a))
		return 2;
	double t0 = (mono_seconds() * 1e3);
	ret = pyproc_inspect(a.pid, &pp, err, sizeof(err));
	if (ret) {
		log_error("%s", err);
		return 1;
	}
	log_debug("pid %d (%s): Python %s (version from %s, offsets from %s), %s", pp.pid, pp.comm,
		  pp.version, pp.version_source, pp.layout_source, pp.binary);
	sz = symbolizer_new(&pp);
	if (!sz) {
		log_error("out of memory");
		goto out;
	}
	ret = pywalk_read(&pp, &w);
	if (ret == -ESRCH) {
		log_error("pid %d: no such process (it exited)", a.pid);
		goto out;
	} else if (ret == -ENOMEM) {
		log_error("out of memory");
		goto out;
	} else if (ret) {
		log_error("pid %d: cannot read the interpreter list at 0x%llx: %s (is the process "
			  "starting or exiting?)",
			  a.pid, (unsigned long long)pp.tp.interp_head_addr, strerror(-ret));
		goto out;
	}
	/* Names are a nicety: without them threads keep their OS names. */
	if ((nm.v = calloc(PYTHREADS_MAX, sizeof(*nm.v)))) {
		int n = pythreads_read(&pp, nm.v, PYTHREADS_MAX);
		if (n < 0)
			log_debug("pid %d: no Python thread names: %s", pp.pid,
				  n == -ENOENT ? "the threading module is not imported"
					       : strerror(-n));
		nm.n = n > 0 ? (size_t)n : 0;
	}
	double t_walk = (mono_seconds() * 1e3);
	if (w.nthreads) {
		th = calloc(w.nthreads, sizeof(*th));
		if (!th) {
			log_error("out of memory");
			goto out;
		}
	}
	for (size_t i = 0; i < w.nthreads; i++)
		th[i] = &w.threads[i];
	if (w.nthreads)
		qsort(th, w.nthreads, sizeof(*th), by_tid);
	if (a.json) {
		ret = print_json(&pp, sz, &nm, th, w.nthreads, w.err);
		if (ret) {
			log_error("cannot write JSON: %s", strerror(-ret));
			goto out;
		}
	} else {
		print_text(&pp, sz, &nm, th, w.nthreads, w.err);
	}
	if (fflush(stdout) == EOF) {
		log_error("cannot write the output: %s", strerror(errno));
		goto out;
	}
	static const char *const tid_sources[] = {"none found", "PyThreadState.native_thread_id",
						  "the tid in struct pthread"};
	if (w.tid_source == PYWALK_TID_PTHREAD)
		log_debug("threads matched with OS threads through %s at offset %d",
			  tid_sources[w.tid_source], w.pthread_tid_off);
	else
		log_debug("threads matched with OS threads through %s", tid_sources[w.tid_source]);
	log_debug("%zu threads read in %.1f ms, printed in %.1f ms", w.nthreads, t_walk - t0,
		  (mono_seconds() * 1e3) - t_walk);
	status = 0;
out:
	free(th);
	free(nm.v);
	pywalk_free(&w);
	symbolizer_free(sz);
	return status;
}
