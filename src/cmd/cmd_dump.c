/* cmd_dump.c - `taipan dump`: the Python stack of every thread of a process,
 * right now, read from user space, with its native frames (each thread
 * stopped with ptrace only while its registers and stacks are read). */
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
#include "proc/procfs.h"
#include "cpython/pyproc.h"
#include "cpython/runtime.h"
#include "cpython/pythreads.h"
#include "cpython/pywalk.h"
#include "core/nwalk.h"
#include "core/session.h"
#include "core/walkerr.h"
#include "profile/merge.h"
#include "cpython/symbolize.h"
#include "util/strutil.h"
#include "util/clock.h"

void cmd_dump_usage(FILE *out)
{
	fprintf(out,
		"usage: taipan dump -p PID [--json] [--native MODE]\n"
		"\n"
		"Prints the Python stack of every thread of process PID as it is right now,\n"
		"innermost frame first, like a traceback, with its native (C) frames, each\n"
		"shown as \"name (module)\". Memory is read with process_vm_readv and never\n"
		"written to. Native frames need each thread's registers: each thread is\n"
		"paused with ptrace for the moment its registers and stacks are read, one\n"
		"thread at a time (as py-spy --native does); --native none never stops the\n"
		"process. A thread that cannot be paused (another tracer, Yama's ptrace_scope,\n"
		"or uninterruptible sleep for over 1 s: a vfork parent, a D-state system call)\n"
		"keeps its Python stack and a note says why.\n"
		"A thread that holds the GIL says so, and one that waits for it (in\n"
		"take_gil: seen with native frames only); 2.7, 3.6 and free-threaded builds\n"
		"have no GIL to read.\n"
		"Each thread shows its OS thread id and its name: the Python one\n"
		"(threading.Thread(name=...), \"MainThread\"), else the OS one\n"
		"(/proc/PID/task/TID/comm).\n"
		"Stacks are read to %d frames; a deeper (or looping) one ends in a\n"
		"\"[truncated]\" line.\n"
		"\n"
		"options:\n"
		"  -p, --pid PID   the process to read (required)\n"
		"  -j, --json      print JSON: {pid, comm, python_version, threads: [{tid,\n"
		"                  name, os_name, thread_id, interpreter, gil (\"held\",\n"
		"                  \"waiting\", \"released\" or null), error, native_error,\n"
		"                  frames: [{kind: \"python\", name, file, line, first_line} or\n"
		"                  {kind: \"native\", name, module, build_id} or {kind:\n"
		"                  \"marker\", name}]}]}, frames innermost first\n"
		"      --native MODE  native frames: filtered (the default) hides the\n"
		"                  interpreter's own call machinery between Python frames and\n"
		"                  the native frames above the first Python one; all keeps\n"
		"                  every frame; none: Python frames only, nothing stopped\n"
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
		"  taipan dump -p 4242 --native all\n"
		"  taipan dump -p 4242 --json | jq '.threads[] | {tid, top: .frames[0].name}'\n",
		TP_MAX_FRAMES);
}

struct dump_args {
	pid_t pid;
	bool json;
	int native; /* enum session_native */
};

static int parse_args(int argc, char **argv, struct dump_args *a)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},    {"json", no_argument, NULL, 'j'},
	    {"native", required_argument, NULL, 'N'}, {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},	      {0},
	};
	int c;
	a->native = SESSION_NATIVE_FILTERED;
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
		case 'N':
			if (cli_native(optarg, &a->native))
				return -EINVAL;
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

/* A thread's stack with its native frames, read while it was stopped. */
struct nthread {
	struct tp_sample *smp;	  /* NULL: the Python frames of the pywalk only */
	struct nwalk_sym *syms;	  /* of smp->ustack[] */
	struct merge_step *steps; /* root first */
	size_t nsteps;
	char note[320]; /* why it has no native frames; "" when it needs no note */
};

static void nthreads_free(struct nthread *nt, size_t n)
{
	for (size_t i = 0; nt && i < n; i++) {
		free(nt[i].smp);
		free(nt[i].syms);
		free(nt[i].steps);
	}
	free(nt);
}

/* Stops each thread in turn for its registers and stacks, then (every
 * thread running again) names the native frames and merges them. Returns 0
 * or -ENOMEM; a thread that cannot be read gets a note. The names live as
 * *nwp does (the caller frees it, also on failure). */
static int read_native(const struct rt_proc *rp, bool filtered, struct pywalk_thread *const *th,
		       size_t n, struct nthread *nt, struct nwalk **nwp)
{
	const struct pyproc *pp = cpython_proc(rp);
	struct nwalk *nw = NULL;
	char err[256];
	int ret = nwalk_new(pp->pid, &cpython_runtime, rp, &nw);
	if (ret) {
		if (ret == -ENOMEM)
			return ret;
		for (size_t i = 0; i < n; i++)
			snprintf(nt[i].note, sizeof(nt[i].note),
				 "[no native frames: cannot read /proc/%d/maps: %s]", pp->pid,
				 strerror(-ret));
		return 0;
	}
	*nwp = nw;
	for (size_t i = 0; i < n; i++) {
		if (!th[i]->tid)
			continue; /* no OS thread to stop */
		nt[i].smp = malloc(sizeof(*nt[i].smp));
		if (!nt[i].smp)
			return -ENOMEM;
		ret = nwalk_thread(nw, th[i]->tid, th[i]->tstate, nt[i].smp, err, sizeof(err));
		if (ret == -ENOMEM)
			return ret;
		if (ret) {
			snprintf(nt[i].note, sizeof(nt[i].note), "[no native frames: %s]", err);
			free(nt[i].smp);
			nt[i].smp = NULL;
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct tp_sample *smp = nt[i].smp;
		if (!smp)
			continue;
		uint32_t nat = smp->nustack > TP_USTACK_MAX ? TP_USTACK_MAX : smp->nustack;
		uint8_t kind[TP_USTACK_MAX];
		int *gend = malloc(((size_t)smp->nframes + 1) * sizeof(*gend));
		nt[i].syms = calloc(nat ? nat : 1, sizeof(*nt[i].syms));
		nt[i].steps = malloc(MERGE_STEPS_MAX(nat, smp->nframes) * sizeof(*nt[i].steps));
		if (!gend || !nt[i].syms || !nt[i].steps) {
			free(gend);
			return -ENOMEM;
		}
		for (uint32_t k = 0; k < nat; k++) {
			nwalk_name(nw, smp->ustack[k], k == 0, &nt[i].syms[k]);
			kind[k] = nt[i].syms[k].kind;
		}
		struct merge_in in =
		    merge_in_sample(smp, kind, pp->tp.off.flags & TP_LF_INTERP_FRAME, filtered);
		nt[i].nsteps = merge_stack(&in, gend, nt[i].steps);
		free(gend);
	}
	struct nwalk_stats st;
	nwalk_get_stats(nw, &st);
	log_debug("native frames: %u threads stopped for %.2f ms in all (%.2f ms at most "
		  "each), %u did not stop in time; %u unwind tables built in %.1f ms",
		  st.threads, st.stopped_ns / 1e6, st.max_stop_ns / 1e6, st.stuck, st.tables,
		  st.build_ns / 1e6);
	return 0;
}

/* What thread t had of the GIL: "held", "waiting" (released, and in
 * take_gil: only seen with its native frames), "released", or NULL where
 * the build's GIL cannot be read (2.7, 3.6, free-threaded). Read while the
 * thread was stopped when its native frames were. */
static const char *gil_name(const struct pywalk_thread *t, const struct nthread *nt)
{
	int gil = nt && nt->smp ? nt->smp->gil : t->gil;
	if (gil == TP_GIL_HELD)
		return "held";
	if (gil != TP_GIL_RELEASED)
		return NULL;
	for (uint32_t k = 0; nt && nt->smp && nt->syms && k < nt->smp->nustack && k < TP_USTACK_MAX;
	     k++)
		if (!strcmp(nt->syms[k].name, "take_gil"))
			return "waiting";
	return "released";
}

static void print_py_frame(struct symbolizer *sz, const struct tp_frame *fr)
{
	struct prof_frame f;
	int err = symbolizer_frame(sz, fr, &f);
	if (err == SYMBOLIZER_SKIP)
		return;
	if (err) {
		if (err == -ESTALE)
			printf("  %s\n", f.name);
		else
			printf("  [code object 0x%llx unreadable]\n", (unsigned long long)fr->code);
		return;
	}
	printf("  File \"");
	put_esc(f.file);
	printf("\", line %d, in ", f.line);
	put_esc(f.name);
	putchar('\n');
}

/* The merged stack, innermost first. */
static void print_merged(struct symbolizer *sz, const struct nthread *nt)
{
	const struct tp_sample *smp = nt->smp;
	for (size_t i = nt->nsteps; i-- > 0;) {
		const struct merge_step *st = &nt->steps[i];
		switch (st->op) {
		case MERGE_PYTHON:
			print_py_frame(sz, &smp->frames[st->index]);
			break;
		case MERGE_NATIVE:
			printf("  ");
			put_esc(nt->syms[st->index].name);
			printf(" (");
			put_esc(nt->syms[st->index].module);
			printf(")\n");
			break;
		case MERGE_MARK_DISAGREE:
			printf("  [native and Python stacks disagree]\n");
			break;
		case MERGE_MARK_NATIVE_CUT:
			printf("  %s %s\n", walkerr_native_marker(smp->uerr),
			       walkerr_native_desc(smp->uerr));
			break;
		}
	}
}

static void print_text(const struct pyproc *pp, struct symbolizer *sz, const struct names *nm,
		       struct pywalk_thread *const *th, const struct nthread *nts, size_t n,
		       int list_err)
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
		const struct nthread *nt = nts ? &nts[i] : NULL;
		const char *gil = gil_name(t, nt);
		if (gil && strcmp(gil, "released"))
			printf(", %s the GIL", !strcmp(gil, "held") ? "holding" : "waiting for");
		printf(" (most recent call first):\n");
		int err = t->err;
		uint32_t nframes = t->nframes;
		if (nt && nt->note[0]) {
			printf("  ");
			put_esc(nt->note);
			putchar('\n');
		}
		if (nt && nt->smp) {
			print_merged(sz, nt);
			err = nt->smp->err;
			nframes = nt->smp->nframes;
		} else {
			for (uint32_t k = 0; k < t->nframes; k++)
				print_py_frame(sz, &t->frames[k]);
		}
		if (walkerr_is_cut((unsigned int)err))
			printf("  [truncated after %u frames]\n", nframes);
		else if (err)
			printf("  %s %s\n", walkerr_marker((unsigned int)err),
			       walkerr_desc((unsigned int)err));
		else if (!nframes)
			printf("  " SESSION_MARKER_NO_PYTHON "\n");
	}
}

/* A JSON string, or null when s is not valid UTF-8 (a file name can be). */
static json_t *jstr(const char *s)
{
	json_t *j = s ? json_string(s) : NULL;
	return j ? j : json_null();
}

/* Python frame fr as JSON, or NULL: out of memory, or *skip set for a frame
 * that stacks leave out (SYMBOLIZER_SKIP). */
static json_t *json_py_frame(struct symbolizer *sz, const struct tp_frame *fr, bool *skip)
{
	struct prof_frame f;
	int err = symbolizer_frame(sz, fr, &f);
	*skip = err == SYMBOLIZER_SKIP;
	if (*skip)
		return NULL;
	if (err)
		return json_pack("{s:s, s:n, s:n, s:n, s:n, s:I}", "kind", "python", "name", "file",
				 "line", "first_line", "code", (json_int_t)fr->code);
	return json_pack("{s:s, s:o, s:o, s:i, s:i}", "kind", "python", "name", jstr(f.name),
			 "file", jstr(f.file), "line", f.line, "first_line", f.first_line);
}

/* The merged stack, innermost first, appended to frames. */
static int json_merged(struct symbolizer *sz, const struct nthread *nt, json_t *frames)
{
	const struct tp_sample *smp = nt->smp;
	for (size_t i = nt->nsteps; i-- > 0;) {
		const struct merge_step *st = &nt->steps[i];
		const struct nwalk_sym *sym = &nt->syms[st->index];
		json_t *jf = NULL;
		bool skip = false;
		switch (st->op) {
		case MERGE_PYTHON:
			jf = json_py_frame(sz, &smp->frames[st->index], &skip);
			if (skip)
				continue;
			break;
		case MERGE_NATIVE:
			jf = json_pack("{s:s, s:o, s:o, s:o}", "kind", "native", "name",
				       jstr(sym->name), "module", jstr(sym->module), "build_id",
				       sym->build_id[0] ? jstr(sym->build_id) : json_null());
			break;
		case MERGE_MARK_DISAGREE:
			jf = json_pack("{s:s, s:s}", "kind", "marker", "name",
				       "[native and Python stacks disagree]");
			break;
		case MERGE_MARK_NATIVE_CUT:
			jf = json_pack("{s:s, s:s}", "kind", "marker", "name",
				       walkerr_native_marker(smp->uerr));
			break;
		}
		if (!jf || json_array_append_new(frames, jf))
			return -ENOMEM;
	}
	return 0;
}

/* What JSON says of a thread's native frames: null when all is well. */
static json_t *native_err_json(const struct nthread *nt)
{
	if (!nt)
		return json_null();
	if (nt->note[0])
		return jstr(nt->note);
	if (nt->smp && nt->smp->uerr != TP_UERR_NONE)
		return json_string(walkerr_native_key(nt->smp->uerr));
	return json_null();
}

static int print_json(const struct pyproc *pp, struct symbolizer *sz, const struct names *nm,
		      struct pywalk_thread *const *th, const struct nthread *nts, size_t n,
		      int list_err)
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
		const struct nthread *nt = nts ? &nts[i] : NULL;
		int err = t->err;
		if (nt && nt->smp) {
			err = nt->smp->err;
			if (json_merged(sz, nt, frames)) {
				json_decref(frames);
				goto out;
			}
		}
		for (uint32_t k = 0; !(nt && nt->smp) && k < t->nframes; k++) {
			bool skip;
			json_t *jf = json_py_frame(sz, &t->frames[k], &skip);
			if (skip)
				continue;
			if (!jf || json_array_append_new(frames, jf)) {
				json_decref(frames);
				goto out;
			}
		}
		os_name(pp->pid, t->tid, os, sizeof(os));
		const char *name = thread_name(nm, t, os);
		snprintf(tid_hex, sizeof(tid_hex), "0x%llx", (unsigned long long)t->thread_id);
		const char *gil = gil_name(t, nt);
		jt = json_pack("{s:o, s:o, s:o, s:s, s:i, s:o, s:o, s:o, s:o}", "tid",
			       t->tid ? json_integer(t->tid) : json_null(), "name",
			       name ? jstr(name) : json_null(), "os_name",
			       t->tid ? jstr(os) : json_null(), "thread_id", tid_hex, "interpreter",
			       (int)t->interp, "gil", gil ? json_string(gil) : json_null(), "error",
			       walk_err_json(err), "native_error", native_err_json(nt), "frames",
			       frames);
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
	struct rt_proc *rp = NULL;
	struct pywalk w = {0};
	struct symbolizer *sz = NULL;
	struct pywalk_thread **th = NULL;
	struct names nm = {0};
	struct nthread *nt = NULL;
	struct nwalk *nw = NULL;
	char err[512];
	int ret, status = 1;

	if (parse_args(argc, argv, &a))
		return 2;
	cli_raise_fd_limit();
	double t0 = (mono_seconds() * 1e3);
	ret = cpython_runtime.detect(NULL, a.pid, &rp, err, sizeof(err));
	if (ret) {
		log_error("%s", ret == -ENOMEM ? "out of memory" : err);
		return 1;
	}
	const struct pyproc pp = *cpython_proc(rp);
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
	if (a.native != SESSION_NATIVE_NONE && w.nthreads) {
		nt = calloc(w.nthreads, sizeof(*nt));
		if (!nt ||
		    read_native(rp, a.native == SESSION_NATIVE_FILTERED, th, w.nthreads, nt, &nw)) {
			log_error("out of memory");
			goto out;
		}
	}
	if (a.json) {
		ret = print_json(&pp, sz, &nm, th, nt, w.nthreads, w.err);
		if (ret) {
			log_error("cannot write JSON: %s", strerror(-ret));
			goto out;
		}
	} else {
		print_text(&pp, sz, &nm, th, nt, w.nthreads, w.err);
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
	nthreads_free(nt, w.nthreads);
	nwalk_free(nw);
	free(th);
	free(nm.v);
	pywalk_free(&w);
	symbolizer_free(sz);
	cpython_runtime.free(rp);
	return status;
}
