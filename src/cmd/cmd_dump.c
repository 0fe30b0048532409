/* cmd_dump.c - `taipan dump`: the Python stack of every thread of a process,
 * right now, read from user space, with its native frames (each thread
 * stopped with ptrace only while its registers and stacks are read). */
#include <ctype.h>
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
#include "core/nwalk.h"
#include "core/runtime.h"
#include "core/session.h"
#include "cmd/dump.h"
#include "core/stacks.h"
#include "core/walkerr.h"
#include "util/strutil.h"
#include "util/clock.h"

void cmd_dump_usage(FILE *out)
{
	fprintf(out,
		"usage: taipan dump -p PID [--json] [--native MODE] [--locals | --tasks]\n"
		"\n"
		"Prints the Python or Ruby stack of every thread of process PID as it is\n"
		"right now, innermost frame first, like a traceback, with its native (C)\n"
		"frames, each shown as \"name (module)\". Memory is read with\n"
		"process_vm_readv and never written to. Native frames need each thread's\n"
		"registers: each thread is paused with ptrace for the moment its registers\n"
		"and stacks are read, one thread at a time (as py-spy --native does);\n"
		"--native none never stops the process. A thread that cannot be paused\n"
		"(another tracer, Yama's ptrace_scope, or uninterruptible sleep for over 1 s:\n"
		"a vfork parent, a D-state system call) keeps its interpreted stack and a\n"
		"note says why.\n"
		"A thread that holds the GIL (Ruby: the GVL) says so, and one that waits for\n"
		"it (Python: seen with native frames only, its C stack in the function that\n"
		"takes the GIL); 2.7, 3.6 and free-threaded builds have no GIL to read.\n"
		"Each thread shows its OS thread id and its name: the program's\n"
		"(threading.Thread(name=...), \"MainThread\"; Ruby's Thread#name), else the\n"
		"OS one (/proc/PID/task/TID/comm). A Ruby C function's frame (Kernel#sleep)\n"
		"is \"in NAME\", without a file.\n"
		"Stacks are read to %d frames; a deeper (or looping) one ends in a\n"
		"\"[truncated]\" line.\n"
		"\n"
		"options:\n"
		"  -p, --pid PID   the process to read (required)\n"
		"  -j, --json      print JSON: {pid, comm, runtime (\"python\", \"ruby\"),\n"
		"                  runtime_version (python_version too, for Python),\n"
		"                  thread_list_error, threads: [{tid, name, os_name,\n"
		"                  thread_id, interpreter (Ruby: ractor), gil (Ruby: gvl;\n"
		"                  \"held\", \"waiting\", \"released\" or null), error,\n"
		"                  native_error, frames: [{kind: the runtime, name, file,\n"
		"                  line, first_line} or {kind: \"native\", name, module,\n"
		"                  build_id} or {kind: \"marker\", name}]}]}, frames innermost\n"
		"                  first\n"
		"  -l, --locals    under each Python frame, its arguments and local\n"
		"                  variables (cells and free variables too): the value of an\n"
		"                  int, float, bool, None, str (80 characters) or bytes (48),\n"
		"                  the type and length of a list, tuple, dict or set, the\n"
		"                  type and address of anything else; read from memory\n"
		"                  (nothing in the process is called), after the stacks;\n"
		"                  JSON: each frame's locals: [{name, kind (\"local\",\n"
		"                  \"cell\", \"free\"), type, value, len, address}]\n"
		"  -t, --tasks     instead of the threads: every pending asyncio task\n"
		"                  (3.8-3.15) as a tree, like `python3.14 -m asyncio pstree`:\n"
		"                  each task with its coroutines' frames, under the innermost\n"
		"                  frame of each task that awaits it (3.14+: as asyncio\n"
		"                  records it; before: the task, gather or TaskGroup it\n"
		"                  waits on);\n"
		"                  nothing is stopped; a cycle of awaits is marked, and past\n"
		"                  65,536 tasks the list is cut and says so. JSON: {pid,\n"
		"                  comm, runtime, runtime_version, tasks_error, cycles,\n"
		"                  tasks: [{id, name, state, thread, running, stack_cut,\n"
		"                  stack: [\"qualname file:line\"], awaits, awaited_by}]}\n"
		"      --native MODE  native frames: filtered (the default) hides the\n"
		"                  interpreter's own call machinery between Python frames and\n"
		"                  the native frames above the first Python one; all keeps\n"
		"                  every frame; none: interpreted frames only, nothing\n"
		"                  stopped\n"
		"  -v, --verbose   also say how the process was recognised, how threads were\n"
		"                  matched with OS threads, and how long the read took\n"
		"  -h, --help      this text\n"
		"\n"
		"exit status: 0 when the stacks were printed, 1 when the process could not\n"
		"be read (no such process, not Python or Ruby, unsupported version), 2 for a\n"
		"usage error.\n"
		"\n"
		"examples:\n"
		"  taipan dump -p 4242\n"
		"  taipan dump -p 4242 --native all\n"
		"  taipan dump -p 4242 --locals\n"
		"  taipan dump -p 4242 --tasks\n"
		"  taipan dump -p 4242 --json | jq '.threads[] | {tid, top: .frames[0].name}'\n",
		TP_MAX_FRAMES);
}

struct dump_args {
	pid_t pid;
	bool json;
	int native; /* enum session_native */
	bool locals;
	bool tasks;
};

static int parse_args(int argc, char **argv, struct dump_args *a)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},    {"json", no_argument, NULL, 'j'},
	    {"native", required_argument, NULL, 'N'}, {"verbose", no_argument, NULL, 'v'},
	    {"locals", no_argument, NULL, 'l'},	      {"tasks", no_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},	      {0},
	};
	int c;
	a->native = SESSION_NATIVE_FILTERED;
	optind = 1;
	while ((c = cli_getopt("dump", argc, argv, "p:jltvh", longopts)) != -1) {
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
		case 'l':
			a->locals = true;
			break;
		case 't':
			a->tasks = true;
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

/* The OS name of thread tid, or "" when it is gone or unknown (tid 0). */
static void os_name(pid_t pid, pid_t tid, char *buf, size_t len)
{
	buf[0] = 0;
	if (tid)
		procfs_comm(pid, tid, buf, len);
}

/* What JSON says of a walk that stopped short: its key, or null. */
static json_t *walk_err_json(int err)
{
	return err ? json_string(walkerr_key((unsigned int)err)) : json_null();
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

/* A JSON string, or null when s is not valid UTF-8 (a file name can be). */
static json_t *jstr(const char *s)
{
	json_t *j = s ? json_string(s) : NULL;
	return j ? j : json_null();
}

void dump_put_esc(const char *s)
{
	put_esc(s);
}

json_t *dump_jstr(const char *s)
{
	return jstr(s);
}

/* A thread to print: the runtime's, its stack as a sample (with its native
 * frames when they were read, while it was stopped), and that stack named
 * and merged by the stacks every command shares. */
struct dthread {
	const struct rt_thread *t;
	struct tp_sample *smp; /* NULL when it could not be made */
	bool native;	       /* smp holds native frames */
	char note[320];	       /* why it has no native frames; "" when it needs no note */
	char os[TP_COMM_LEN + 1];
	const uint32_t *ids; /* its stack, root first, in the dump's profile */
	struct stacks_origin *from;
	uint32_t n;
	const char *name; /* its name: the program's, else its OS one; NULL with neither */
	char name_buf[64];
	int gil;	     /* enum prof_lock */
	struct dlocals *loc; /* --locals: by interpreted frame (smp's index), or NULL */
};

/* The variables of one interpreted frame (--locals). */
struct dlocals {
	struct rt_local *v;
	int n;	  /* how many in v, or a negative errno: none read */
	bool cut; /* some left out */
};

/* Threads by OS tid, the main thread first; those without one last, in the
 * runtime's order. */
static int by_tid(const void *x, const void *y)
{
	const struct rt_thread *a = ((const struct dthread *)x)->t;
	const struct rt_thread *b = ((const struct dthread *)y)->t;
	if (a->tid && b->tid)
		return a->tid < b->tid ? -1 : a->tid > b->tid;
	if (a->tid || b->tid)
		return a->tid ? -1 : 1;
	return a < b ? -1 : a > b;
}

static void dthreads_free(struct dthread *d, size_t n)
{
	for (size_t i = 0; d && i < n; i++) {
		for (uint32_t k = 0; d[i].loc && d[i].smp && k < d[i].smp->nframes; k++)
			free(d[i].loc[k].v);
		free(d[i].loc);
		free(d[i].smp);
		free(d[i].from);
		free((void *)d[i].ids);
	}
	free(d);
}

/* Stops each thread in turn for its registers and stacks (nwalk), its
 * interpreted frames read meanwhile by its runtime. Returns 0 or -ENOMEM;
 * a thread that cannot be read gets a note, and its frames as listed. */
static int read_native(pid_t pid, const struct runtime_ops *rt, const struct rt_proc *rp,
		       struct dthread *d, size_t n, struct nwalk **nwp)
{
	struct nwalk *nw = NULL;
	char err[256];
	int ret = nwalk_new(pid, rt, rp, &nw);
	if (ret) {
		if (ret == -ENOMEM)
			return ret;
		for (size_t i = 0; i < n; i++)
			snprintf(d[i].note, sizeof(d[i].note),
				 "[no native frames: cannot read /proc/%d/maps: %s]", pid,
				 strerror(-ret));
		return 0;
	}
	*nwp = nw;
	for (size_t i = 0; i < n; i++) {
		if (!d[i].t->tid)
			continue; /* no OS thread to stop */
		ret = nwalk_thread(nw, d[i].t->tid, d[i].t->tstate, d[i].smp, err, sizeof(err));
		if (ret == -ENOMEM)
			return ret;
		if (ret)
			snprintf(d[i].note, sizeof(d[i].note), "[no native frames: %s]", err);
		else
			d[i].native = true;
	}
	struct nwalk_stats st;
	nwalk_get_stats(nw, &st);
	log_debug("native frames: %u threads stopped for %.2f ms in all (%.2f ms at most "
		  "each), %u did not stop in time; %u unwind tables built in %.1f ms",
		  st.threads, st.stopped_ns / 1e6, st.max_stop_ns / 1e6, st.stuck, st.tables,
		  st.build_ns / 1e6);
	return 0;
}

/* Locals read of a frame at most. */
#define LOCALS_MAX 256

/* The variables of each interpreted frame of thread d (d->loc), read where
 * its frames were listed: when its stack was read again with its native
 * frames and is no longer the one listed, none (-ESTALE). 0 or -ENOMEM. */
static int read_locals(const struct runtime_ops *rt, const struct rt_proc *rp, struct dthread *d)
{
	const struct rt_thread *t = d->t;
	uint32_t n = d->smp->nframes;
	if (!n)
		return 0;
	if (!(d->loc = calloc(n, sizeof(*d->loc))))
		return -ENOMEM;
	bool same = t->frame_addrs && n == t->nframes;
	for (uint32_t k = 0; same && k < n; k++)
		same = d->smp->frames[k].code == t->frames[k].code;
	for (uint32_t k = 0; k < n; k++) {
		struct dlocals *l = &d->loc[k];
		if (!same) {
			l->n = -ESTALE;
			continue;
		}
		if (!(l->v = calloc(LOCALS_MAX, sizeof(*l->v))))
			return -ENOMEM;
		l->n = rt->locals(rp, &t->frames[k], t->frame_addrs[k], l->v, LOCALS_MAX, &l->cut);
	}
	return 0;
}

/* Thread d as a sample of its frames as listed (no native frames). */
static void sample_of(pid_t pid, struct dthread *d)
{
	const struct rt_thread *t = d->t;
	struct tp_sample *smp = d->smp;
	uint32_t n = t->nframes < TP_MAX_FRAMES ? t->nframes : TP_MAX_FRAMES;
	memset(smp, 0, offsetof(struct tp_sample, frames));
	smp->pid = (uint32_t)pid;
	smp->tid = (uint32_t)t->tid;
	smp->tstate = t->tstate;
	smp->err = (uint16_t)t->err;
	smp->gil = (uint8_t)t->lock;
	smp->nframes = n;
	memcpy(smp->frames, t->frames, n * sizeof(*smp->frames));
}

/* Names and merges thread d's stack through the stacks (the same as
 * record's): its frame ids, their origins, its name and its lock label. */
static int name_stack(struct stacks *st, const struct stacks_proc *sp, struct dthread *d)
{
	const uint32_t *ids;
	struct prof_labels lb;
	memcpy(d->smp->comm, d->os, TP_COMM_LEN);
	int ret = stacks_build(st, sp, d->smp, d->native, &ids, &d->n, &lb);
	if (ret)
		return ret;
	uint32_t *own = malloc((d->n ? d->n : 1) * sizeof(*own));
	d->from = malloc((d->n ? d->n : 1) * sizeof(*d->from));
	if (!own || !d->from) {
		free(own);
		return -ENOMEM;
	}
	memcpy(own, ids, d->n * sizeof(*own));
	memcpy(d->from, stacks_origins(st), d->n * sizeof(*d->from));
	d->ids = own;
	/* Its own copy: the stacks' name is the next thread's after the next
	 * build. */
	snprintf(d->name_buf, sizeof(d->name_buf), "%s", lb.thread_name ? lb.thread_name : "");
	d->name = d->name_buf[0] ? d->name_buf : NULL;
	d->gil = lb.lock;
	return 0;
}

static const char *gil_name(int gil)
{
	switch (gil) {
	case PROF_LOCK_HELD:
		return "held";
	case PROF_LOCK_WAITING:
		return "waiting";
	case PROF_LOCK_RELEASED:
		return "released";
	default:
		return NULL;
	}
}

static const char *const local_kinds[] = {"local", "cell", "free"};

/* A frame's variables (--locals), under its line. */
static void print_locals(const struct dlocals *l)
{
	if (l->n == -ESTALE) {
		printf("      [locals not read: the stack changed while its native frames were "
		       "read]\n");
		return;
	}
	if (l->n < 0) {
		printf("      [locals unreadable: %s]\n", strerror(-l->n));
		return;
	}
	for (int i = 0; i < l->n; i++) {
		const struct rt_local *v = &l->v[i];
		printf("      ");
		put_esc(v->name);
		printf(" = ");
		if (v->value[0]) {
			fputs(v->value, stdout); /* escaped as it was made (pylocals) */
		} else if (v->len >= 0) {
			printf("<");
			put_esc(v->type);
			printf(", len %lld>", (long long)v->len);
		} else {
			printf("<");
			put_esc(v->type);
			printf(" at 0x%llx>", (unsigned long long)v->addr);
		}
		if (v->kind != RT_LOCAL)
			printf("  (%s)", local_kinds[v->kind % 3]);
		putchar('\n');
	}
	if (l->cut)
		printf("      [some locals not shown: too many, or unreadable]\n");
}

static void print_frame(const struct profile *prof, const struct dthread *d, uint32_t k)
{
	const struct prof_frame *f = profile_frame(prof, d->ids[k]);
	const struct stacks_origin *o = &d->from[k];
	switch (o->from) {
	case STACKS_FROM_INTERP:
		if (f->kind != PROF_FRAME_INTERP) {
			if (strcmp(f->name, "[unknown]"))
				printf("  %s\n", f->name);
			else
				printf("  [code object 0x%llx unreadable]\n",
				       (unsigned long long)d->smp->frames[o->index].code);
			return;
		}
		if (f->file) {
			printf("  File \"");
			put_esc(f->file);
			printf("\", line %d, in ", f->line);
		} else {
			printf("  in "); /* a frame of C code (Ruby's C functions) */
		}
		put_esc(f->name);
		putchar('\n');
		if (d->loc)
			print_locals(&d->loc[o->index]);
		return;
	case STACKS_FROM_NATIVE:
		printf("  ");
		put_esc(f->name);
		printf(" (");
		put_esc(f->module);
		printf(")\n");
		return;
	case STACKS_FROM_NATIVE_CUT:
		/* The marker as the stacks said it (the module of code without
		 * CFI, where an unknown address lies), then what it means. */
		printf("  ");
		put_esc(f->name);
		printf(" %s\n", walkerr_native_desc(d->smp->uerr));
		return;
	case STACKS_FROM_JIT:
		printf("  %s the JIT's code, which has no unwind table: the native frames past it "
		       "are left out\n",
		       f->name);
		return;
	case STACKS_FROM_WALK_ERR:
		if (walkerr_is_cut(d->smp->err))
			printf("  [truncated after %u frames]\n", d->smp->nframes);
		else
			printf("  %s %s\n", walkerr_marker(d->smp->err), walkerr_desc(d->smp->err));
		return;
	default:
		printf("  %s\n", f->name);
		return;
	}
}

static void print_text(const struct rt_facts *rf, const struct runtime_ops *rt, pid_t pid,
		       const struct profile *prof, const struct dthread *d, size_t n, int list_err)
{
	const char *title = rt->title;
	char lock[16] = "";
	for (size_t i = 0; rt->lock_label && rt->lock_label[i] && i + 1 < sizeof(lock); i++)
		lock[i] = (char)toupper((unsigned char)rt->lock_label[i]);
	printf("Process %d (", pid);
	put_esc(rf->comm);
	printf("): %s %s, %zu thread%s\n", title, rf->version, n, n == 1 ? "" : "s");
	if (list_err)
		printf("[thread list cut short: %s; threads may be missing]\n",
		       walkerr_desc((unsigned int)list_err));
	for (size_t i = 0; i < n; i++) {
		const struct rt_thread *t = d[i].t;
		printf("\n");
		if (t->tid)
			printf("Thread %d", t->tid);
		else
			printf("Thread 0x%llx", (unsigned long long)t->thread_id);
		if (d[i].name) {
			printf(" \"");
			put_esc(d[i].name);
			putchar('"');
		}
		if (!t->tid)
			printf(" (no OS thread found)");
		if (t->interp)
			printf(" in %s %u", rt->interp_noun, t->interp);
		const char *gil = gil_name(d[i].gil);
		if (gil && strcmp(gil, "released"))
			printf(", %s the %s", !strcmp(gil, "held") ? "holding" : "waiting for",
			       lock);
		printf(" (most recent call first):\n");
		if (d[i].note[0]) {
			printf("  ");
			put_esc(d[i].note);
			putchar('\n');
		}
		for (uint32_t k = d[i].n; k-- > 0;)
			print_frame(prof, &d[i], k);
	}
}

/* A frame's variables as JSON (--locals), into frame jf: "locals", and
 * "locals_error" when they could not be read. 0 or -ENOMEM. */
static int locals_json(const struct dlocals *l, json_t *jf)
{
	json_t *a = json_array();
	if (!a)
		return -ENOMEM;
	for (int i = 0; i < l->n; i++) {
		const struct rt_local *v = &l->v[i];
		char addr[24];
		snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)v->addr);
		json_t *jv =
		    json_pack("{s:o, s:s, s:o, s:o, s:o, s:s}", "name", jstr(v->name), "kind",
			      local_kinds[v->kind % 3], "type", jstr(v->type), "value",
			      v->value[0] ? jstr(v->value) : json_null(), "len",
			      v->len >= 0 ? json_integer(v->len) : json_null(), "address", addr);
		if (!jv || json_array_append_new(a, jv)) {
			json_decref(a);
			return -ENOMEM;
		}
	}
	const char *err = l->n == -ESTALE ? "stack changed" : l->n < 0 ? strerror(-l->n) : NULL;
	if (json_object_set_new(jf, "locals", l->n < 0 ? (json_decref(a), json_null()) : a) ||
	    json_object_set_new(jf, "locals_cut", json_boolean(l->cut)) ||
	    json_object_set_new(jf, "locals_error", err ? json_string(err) : json_null()))
		return -ENOMEM;
	return 0;
}

/* Frame k of d as JSON; NULL: out of memory, or *skip set for a marker
 * that JSON says elsewhere (the walk's error, the thread's "error"). */
static json_t *json_frame(const struct runtime_ops *rt, const struct profile *prof,
			  const struct dthread *d, uint32_t k, bool *skip)
{
	const struct prof_frame *f = profile_frame(prof, d->ids[k]);
	const struct stacks_origin *o = &d->from[k];
	*skip = false;
	switch (o->from) {
	case STACKS_FROM_INTERP:
		if (f->kind != PROF_FRAME_INTERP)
			return json_pack("{s:s, s:n, s:n, s:n, s:n, s:I}", "kind", rt->name, "name",
					 "file", "line", "first_line", "code",
					 (json_int_t)d->smp->frames[o->index].code);
		if (!f->file) /* a frame of C code (Ruby's C functions) */
			return json_pack("{s:s, s:o, s:n, s:n, s:n}", "kind", rt->name, "name",
					 jstr(f->name), "file", "line", "first_line");
		json_t *jf =
		    json_pack("{s:s, s:o, s:o, s:i, s:i}", "kind", rt->name, "name", jstr(f->name),
			      "file", jstr(f->file), "line", f->line, "first_line", f->first_line);
		if (jf && d->loc && locals_json(&d->loc[o->index], jf)) {
			json_decref(jf);
			return NULL;
		}
		return jf;
	case STACKS_FROM_NATIVE:
		return json_pack("{s:s, s:o, s:o, s:o}", "kind", "native", "name", jstr(f->name),
				 "module", jstr(f->module), "build_id",
				 f->build_id ? jstr(f->build_id) : json_null());
	case STACKS_FROM_WALK_ERR:
	case STACKS_FROM_NO_FRAME:
		*skip = true;
		return NULL;
	default:
		return json_pack("{s:s, s:s}", "kind", "marker", "name", f->name);
	}
}

/* What JSON says of a thread's native frames: null when all is well. */
static json_t *native_err_json(const struct dthread *d, bool native_wanted)
{
	if (!native_wanted)
		return json_null();
	if (d->note[0])
		return jstr(d->note);
	if (d->native && d->smp->uerr != TP_UERR_NONE)
		return json_string(walkerr_native_key(d->smp->uerr));
	return json_null();
}

static int print_json(const struct rt_facts *rf, const struct runtime_ops *rt, pid_t pid,
		      const struct profile *prof, const struct dthread *d, size_t n, int list_err,
		      bool native_wanted)
{
	json_t *root = NULL, *threads = NULL;
	int ret = -ENOMEM;

	threads = json_array();
	if (!threads)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct rt_thread *t = d[i].t;
		char tid_hex[32];
		json_t *frames = json_array(), *jt;
		if (!frames)
			goto out;
		for (uint32_t k = d[i].n; k-- > 0;) {
			bool skip;
			json_t *jf = json_frame(rt, prof, &d[i], k, &skip);
			if (skip)
				continue;
			if (!jf || json_array_append_new(frames, jf)) {
				json_decref(frames);
				goto out;
			}
		}
		snprintf(tid_hex, sizeof(tid_hex), "0x%llx", (unsigned long long)t->thread_id);
		const char *gil = gil_name(d[i].gil);
		jt = json_pack(
		    "{s:o, s:o, s:o, s:s, s:i, s:o, s:o, s:o, s:o}", "tid",
		    t->tid ? json_integer(t->tid) : json_null(), "name",
		    d[i].name ? jstr(d[i].name) : json_null(), "os_name",
		    t->tid ? jstr(d[i].os) : json_null(), "thread_id", tid_hex, rt->interp_noun,
		    (int)t->interp, rt->lock_label ? rt->lock_label : "lock",
		    gil ? json_string(gil) : json_null(), "error", walk_err_json(d[i].smp->err),
		    "native_error", native_err_json(&d[i], native_wanted), "frames", frames);
		if (!jt || json_array_append_new(threads, jt))
			goto out;
	}
	root = json_pack("{s:i, s:o, s:s, s:s, s:o, s:o}", "pid", (int)pid, "comm", jstr(rf->comm),
			 "runtime", rt->name, "runtime_version", rf->version, "thread_list_error",
			 walk_err_json(list_err), "threads", threads);
	threads = NULL; /* root owns it now, or json_pack freed it */
	/* Python's version also where the first dumps wrote it. */
	if (root && rt->version_label &&
	    json_object_set_new(root, rt->version_label, json_string(rf->version)))
		goto out;
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
	const struct runtime_ops *rt = NULL;
	struct rt_proc *rp = NULL;
	struct rt_threads ts = {0};
	struct dthread *d = NULL;
	struct nwalk *nw = NULL;
	struct profile *prof = NULL;
	struct stacks *st = NULL;
	struct stacks_fcache *fcache = NULL;
	char err[512];
	int ret, status = 1;

	if (parse_args(argc, argv, &a))
		return 2;
	cli_raise_fd_limit();
	double t0 = (mono_seconds() * 1e3);
	ret = runtime_detect(NULL, a.pid, &rt, &rp, err, sizeof(err));
	if (ret) {
		log_error("%s", ret == -ENOMEM ? "out of memory" : err);
		return 1;
	}
	struct rt_facts rf;
	rt->facts(rp, &rf);
	log_debug("pid %d (%s): %s %s (%s), %s", a.pid, rf.comm, rt->title, rf.version, rf.how,
		  rf.binary);
	if (a.tasks && a.locals) {
		log_error("--tasks and --locals are two different dumps: give one");
		goto out;
	}
	if (a.tasks) {
		status = dump_tasks(rt, rp, &rf, a.pid, a.json);
		goto out;
	}
	ret = rt->threads(rp, &ts, err, sizeof(err));
	if (ret == -ESRCH) {
		log_error("pid %d: no such process (it exited)", a.pid);
		goto out;
	} else if (ret == -ENOMEM) {
		log_error("out of memory");
		goto out;
	} else if (ret) {
		log_error("%s", err);
		goto out;
	}
	double t_walk = (mono_seconds() * 1e3);
	prof = profile_new();
	struct stacks_opts so = {.filtered = a.native == SESSION_NATIVE_FILTERED};
	st = prof ? stacks_new(&so, prof, NULL) : NULL;
	d = calloc(ts.n ? ts.n : 1, sizeof(*d));
	if (!st || !d) {
		log_error("out of memory");
		goto out;
	}
	for (size_t i = 0; i < ts.n; i++) {
		d[i].t = &ts.v[i];
		if (!(d[i].smp = malloc(sizeof(*d[i].smp)))) {
			log_error("out of memory");
			goto out;
		}
		os_name(a.pid, ts.v[i].tid, d[i].os, sizeof(d[i].os));
	}
	qsort(d, ts.n, sizeof(*d), by_tid);
	if (a.native != SESSION_NATIVE_NONE && ts.n &&
	    read_native(a.pid, rt, rp, d, ts.n, &nw) == -ENOMEM) {
		log_error("out of memory");
		goto out;
	}
	struct stacks_proc sp = {
	    .pid = a.pid,
	    .rt = rt,
	    .rp = rp,
	    .f = &rf,
	    .cgroup = "",
	    .container = "",
	    .fcache = &fcache,
	    .nw = nw,
	};
	if (a.locals && !rt->locals)
		log_warn("pid %d: %s: --locals reads no %s frames yet: frames only", a.pid, rf.comm,
			 rt->title);
	for (size_t i = 0; i < ts.n; i++) {
		if (!d[i].native)
			sample_of(a.pid, &d[i]);
		if (name_stack(st, &sp, &d[i]) ||
		    (a.locals && rt->locals && read_locals(rt, rp, &d[i]))) {
			log_error("out of memory");
			goto out;
		}
	}
	if (a.json) {
		ret = print_json(&rf, rt, a.pid, prof, d, ts.n, ts.err,
				 a.native != SESSION_NATIVE_NONE);
		if (ret) {
			log_error("cannot write JSON: %s", strerror(-ret));
			goto out;
		}
	} else {
		print_text(&rf, rt, a.pid, prof, d, ts.n, ts.err);
	}
	if (fflush(stdout) == EOF) {
		log_error("cannot write the output: %s", strerror(errno));
		goto out;
	}
	log_debug("%zu threads read in %.1f ms, printed in %.1f ms", ts.n, t_walk - t0,
		  (mono_seconds() * 1e3) - t_walk);
	status = 0;
out:
	dthreads_free(d, ts.n);
	stacks_free(st);
	stacks_fcache_free(fcache);
	profile_free(prof);
	nwalk_free(nw);
	if (rt) {
		if (rt->threads_free)
			rt->threads_free(&ts);
		rt->free(rp);
	}
	return status;
}
