/* runtime.c - CPython as a runtime of the session (core/runtime.h): the
 * operations, each done by the module of the wing that owns it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/runtime.h"
#include "core/stacks.h"
#include "cpython/pylocals.h"
#include "cpython/pyproc.h"
#include "cpython/pytasks.h"
#include "cpython/pythreads.h"
#include "cpython/pywalk.h"
#include "cpython/rules.h"
#include "cpython/runtime.h"
#include "cpython/symbolize.h"
#include "proc/procfs.h"
#include "util/clock.h"
#include "util/log.h"

_Static_assert(RT_FRAME_SKIP == SYMBOLIZER_SKIP, "frame naming's skip");

/* --async: how many coroutines that are no task's are remembered. */
#define TASKS_NOT_MAX 64

struct rt_proc {
	struct pyproc pp;
	struct tp_proc bpf;	   /* its procs entry: pp.tp, tagged */
	struct symbolizer *sz;	   /* its code objects */
	struct pythreads *threads; /* its threads' Python names, made at the first */
	char how[160];
	/* --async: its asyncio tasks as last read, when, the next time they
	 * may be read, and by coroutine and by address (sorted keys, each with
	 * its task's index) */
	struct rt_tasks tasks;
	uint64_t tasks_at_ns, tasks_next_ns;
	struct task_key *by_coro, *by_addr;
	/* The coroutines that the last read found to be no task's (a plain
	 * generator's frame is outermost too): they read nothing more until
	 * the next read. A ring of TASKS_NOT_MAX. */
	uint64_t not_tasks[TASKS_NOT_MAX];
	unsigned int nnot, not_next;
};

struct task_key {
	uint64_t key;
	uint32_t i;
};

static void *cache_new(void)
{
	return pyproc_cache_new();
}

static void cache_free(void *cache)
{
	pyproc_cache_free(cache);
}

/* A process's data around pp, its symbolizer made. NULL when out of memory. */
static struct rt_proc *proc_new(const struct pyproc *pp)
{
	struct rt_proc *rp = calloc(1, sizeof(*rp));
	if (!rp)
		return NULL;
	rp->pp = *pp;
	tp_py_proc_set(&rp->bpf, &pp->tp);
	rp->sz = symbolizer_new(&rp->pp);
	if (!rp->sz) {
		free(rp);
		return NULL;
	}
	snprintf(rp->how, sizeof(rp->how), "version from %s, offsets from %s",
		 pp->version_source ? pp->version_source : "its parent",
		 pp->layout_source ? pp->layout_source : "its parent");
	return rp;
}

static int detect(void *cache, pid_t pid, struct rt_proc **out, char *msg, size_t msglen)
{
	struct pyproc pp;
	int ret = pyproc_inspect_cached(cache, pid, &pp, msg, msglen);
	if (ret)
		return ret;
	*out = proc_new(&pp);
	return *out ? 0 : -ENOMEM;
}

static int fork_proc(const struct rt_proc *parent, pid_t child, struct rt_proc **out)
{
	struct pyproc pp = parent->pp;
	pp.pid = child;
	if (parent->pp.ns_pid) {
		pid_t ns;
		pp.ns_pid = procfs_ns_pid(child, 0, &ns) ? 0 : (uint32_t)ns;
	}
	*out = proc_new(&pp);
	return *out ? 0 : -ENOMEM;
}

static void proc_free(struct rt_proc *rp)
{
	if (!rp)
		return;
	pytasks_free(&rp->tasks);
	free(rp->by_coro);
	free(rp->by_addr);
	symbolizer_free(rp->sz);
	pythreads_free(rp->threads);
	free(rp);
}

static const struct tp_proc *bpf_proc(const struct rt_proc *rp)
{
	return &rp->bpf;
}

static void facts(const struct rt_proc *rp, struct rt_facts *out)
{
	*out = (struct rt_facts){
	    .version = rp->pp.version,
	    .comm = rp->pp.comm,
	    .ns_pid = rp->pp.ns_pid,
	    .binary = rp->pp.binary,
	    .how = rp->how,
	};
}

static void set_budget(struct rt_proc *rp, struct budget *b)
{
	symbolizer_set_budget(rp->sz, b);
}

static int describe(struct rt_proc *rp, const void *ev, size_t size)
{
	if (size < sizeof(struct tp_code_ev))
		return -EINVAL;
	return symbolizer_describe(rp->sz, ev);
}

static int frame(struct rt_proc *rp, const struct tp_frame *f, struct prof_frame *out)
{
	return symbolizer_frame(rp->sz, f, out);
}

static const char *thread_name(struct rt_proc *rp, uint32_t tid, uint64_t tstate, uint64_t now_ns)
{
	if (!rp->threads)
		rp->threads = pythreads_new(); /* none: OS names */
	return pythreads_name(rp->threads, &rp->pp, tid, tstate, now_ns);
}

static int native_kind(const struct rt_proc *rp, const char *name, const char *module,
		       uint64_t vaddr)
{
	(void)vaddr;
	return cpython_native_kind(name, module, rp->pp.binary, rp->pp.version);
}

static bool interp_frames(const struct rt_proc *rp)
{
	return rp->pp.tp.off.flags & TP_LF_INTERP_FRAME;
}

static int walk_thread(const struct rt_proc *rp, uint64_t id, uint64_t fsbase,
		       struct tp_sample *out, struct tpw_anchors *anchors)
{
	return pywalk_sample(&rp->pp, id, fsbase, out, anchors);
}

static int walk_tstate(const struct rt_proc *rp, uint64_t tstate, struct tp_sample *out,
		       struct tpw_anchors *anchors)
{
	return pywalk_tstate(&rp->pp, tstate, out, anchors);
}

static int threads(const struct rt_proc *rp, struct rt_threads *out, char *msg, size_t msglen)
{
	struct pywalk *w = calloc(1, sizeof(*w));
	memset(out, 0, sizeof(*out));
	if (!w)
		return -ENOMEM;
	out->priv = w;
	int ret = pywalk_read(&rp->pp, w);
	if (ret) {
		snprintf(msg, msglen,
			 "pid %d: cannot read the interpreter list at 0x%llx: %s (is the process "
			 "starting or exiting?)",
			 rp->pp.pid, (unsigned long long)rp->pp.tp.interp_head_addr,
			 strerror(-ret));
		return ret;
	}
	static const char *const tid_sources[] = {"none found", "PyThreadState.native_thread_id",
						  "the tid in struct pthread"};
	if (w->tid_source == PYWALK_TID_PTHREAD)
		log_debug("threads matched with OS threads through %s at offset %d",
			  tid_sources[w->tid_source], w->pthread_tid_off);
	else
		log_debug("threads matched with OS threads through %s", tid_sources[w->tid_source]);
	out->err = w->err;
	if (!w->nthreads)
		return 0;
	if (!(out->v = calloc(w->nthreads, sizeof(*out->v))))
		return -ENOMEM;
	for (size_t i = 0; i < w->nthreads; i++) {
		const struct pywalk_thread *t = &w->threads[i];
		out->v[i] = (struct rt_thread){
		    .tstate = t->tstate,
		    .thread_id = t->thread_id,
		    .tid = t->tid,
		    .interp = t->interp,
		    .err = t->err,
		    .lock = t->gil,
		    .nframes = t->nframes,
		    .frames = t->frames,
		    .frame_addrs = t->frame_addrs,
		};
	}
	out->n = w->nthreads;
	return 0;
}

static void threads_free(struct rt_threads *t)
{
	if (t->priv)
		pywalk_free(t->priv);
	free(t->priv);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

/* --async: a process's tasks are read again, on a coroutine they do not
 * know, at most this often, and at most TASKS_COST_SHARE times as often as
 * a read takes: a read of 100,000 tasks takes seconds, on the thread that
 * names the samples, which must keep at least 9 tenths of its time. */
#define TASKS_REFRESH_NS 250000000ULL
#define TASKS_COST_SHARE 10

static int key_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct task_key *)a)->key, y = ((const struct task_key *)b)->key;
	return x < y ? -1 : x > y;
}

/* The index of the task whose key is key in keys (sorted), or -1. */
static int task_find(const struct task_key *keys, size_t n, uint64_t key)
{
	if (!keys)
		return -1;
	struct task_key k = {.key = key};
	const struct task_key *hit = bsearch(&k, keys, n, sizeof(k), key_cmp);
	return hit ? (int)hit->i : -1;
}

/* Reads rp's tasks again, and sorts them by coroutine and by address: the
 * time it took. */
static uint64_t tasks_refresh(struct rt_proc *rp, uint64_t now_ns)
{
	char msg[256];
	pytasks_free(&rp->tasks);
	free(rp->by_coro);
	free(rp->by_addr);
	rp->by_coro = rp->by_addr = NULL;
	rp->nnot = rp->not_next = 0;
	rp->tasks_at_ns = now_ns ? now_ns : 1;
	int err = pytasks_read(&rp->pp, &rp->tasks, msg, sizeof(msg));
	uint64_t took = clock_ns(CLOCK_MONOTONIC) - now_ns, wait = TASKS_REFRESH_NS;
	if (took < UINT64_MAX / TASKS_COST_SHARE && took * TASKS_COST_SHARE > wait)
		wait = took * TASKS_COST_SHARE;
	rp->tasks_next_ns = rp->tasks_at_ns + wait;
	if (err) {
		log_debug("%s", msg);
		return took ? took : 1;
	}
	size_t n = rp->tasks.n;
	rp->by_coro = malloc((n ? n : 1) * sizeof(*rp->by_coro));
	rp->by_addr = malloc((n ? n : 1) * sizeof(*rp->by_addr));
	if (!rp->by_coro || !rp->by_addr) {
		free(rp->by_coro);
		free(rp->by_addr);
		rp->by_coro = rp->by_addr = NULL;
		return took ? took : 1;
	}
	for (size_t i = 0; i < n; i++) {
		rp->by_coro[i] = (struct task_key){rp->tasks.v[i].coro, (uint32_t)i};
		rp->by_addr[i] = (struct task_key){rp->tasks.v[i].addr, (uint32_t)i};
	}
	qsort(rp->by_coro, n, sizeof(*rp->by_coro), key_cmp);
	qsort(rp->by_addr, n, sizeof(*rp->by_addr), key_cmp);
	return took ? took : 1;
}

static size_t chain_from(struct rt_proc *rp, int i, const char **names, size_t max);

static size_t task_chain(struct rt_proc *rp, uint64_t frame, uint64_t now_ns, const char **names,
			 size_t max, uint64_t *read_ns, bool *read_failed)
{
	const struct py_layout *l = &rp->pp.layout;
	/* 3.11+: the frame is inside its coroutine; before, BPF gave the
	 * coroutine itself (f_gen). */
	bool inside = rp->pp.tp.off.flags & TP_LF_INTERP_FRAME;
	if (!frame || (inside && l->gen_iframe < 0) || !max)
		return 0;
	uint64_t coro = inside ? frame - (uint64_t)l->gen_iframe : frame;
	int i = task_find(rp->by_coro, rp->tasks.n, coro);
	if (i < 0) {
		for (unsigned int k = 0; k < rp->nnot; k++)
			if (rp->not_tasks[k] == coro)
				return 0;
		if (rp->tasks_at_ns && now_ns < rp->tasks_next_ns)
			return 0;
		*read_ns = tasks_refresh(rp, now_ns);
		*read_failed = !rp->by_coro;
		if ((i = task_find(rp->by_coro, rp->tasks.n, coro)) < 0) {
			rp->not_tasks[rp->not_next] = coro;
			rp->not_next = (rp->not_next + 1) % TASKS_NOT_MAX;
			if (rp->nnot < TASKS_NOT_MAX)
				rp->nnot++;
			return 0;
		}
	}
	return chain_from(rp, i, names, max);
}

/* The chain of task i (an index in rp->tasks, or -1: none), root first. */
static size_t chain_from(struct rt_proc *rp, int i, const char **names, size_t max)
{
	/* The running task, then each first awaiter, innermost first. */
	int chain[STACKS_TASKS_MAX];
	size_t n = 0;
	while (i >= 0 && n < max && n < STACKS_TASKS_MAX) {
		bool seen = false;
		for (size_t k = 0; k < n; k++)
			seen |= chain[k] == i;
		if (seen)
			break; /* a cycle of awaits */
		chain[n++] = i;
		const struct rt_task *t = &rp->tasks.v[i];
		i = t->nawaiters ? task_find(rp->by_addr, rp->tasks.n, t->awaiters[0]) : -1;
	}
	for (size_t k = 0; k < n; k++)
		names[k] = rp->tasks.v[chain[n - 1 - k]].name;
	return n;
}

static int tasks_now(struct rt_proc *rp, uint64_t now_ns, const struct rt_tasks **out,
		     uint64_t *read_ns)
{
	*read_ns = tasks_refresh(rp, now_ns);
	*out = &rp->tasks;
	return rp->by_coro ? 0 : rp->tasks.err ? rp->tasks.err : -EIO;
}

static size_t task_chain_of(struct rt_proc *rp, size_t i, const char **names, size_t max)
{
	return i < rp->tasks.n && rp->by_addr ? chain_from(rp, (int)i, names, max) : 0;
}

static int tasks(const struct rt_proc *rp, struct rt_tasks *out, char *msg, size_t msglen)
{
	return pytasks_read(&rp->pp, out, msg, msglen);
}

static int locals(const struct rt_proc *rp, const struct tp_frame *f, uint64_t frame,
		  struct rt_local *out, size_t max, bool *cut)
{
	return pylocals_read(&rp->pp, f->code, frame, out, max, cut);
}

static void counts(const struct rt_proc *rp, uint64_t *snapshots_used, size_t *bytes,
		   uint64_t *lines_shared)
{
	*snapshots_used = symbolizer_snapshots_used(rp->sz);
	*bytes = symbolizer_bytes(rp->sz);
	*lines_shared = symbolizer_lines_shared(rp->sz);
}

const struct runtime_ops cpython_runtime = {
    .name = "python",
    .title = "Python",
    .version_label = "python_version",
    .lock_label = "gil",
    .interp_noun = "interpreter",
    .no_frame_marker = STACKS_MARKER_NO_FRAME,
    .disagree_marker = STACKS_MARKER_DISAGREE,
    .cache_new = cache_new,
    .cache_free = cache_free,
    .detect = detect,
    .fork = fork_proc,
    .free = proc_free,
    .bpf_proc = bpf_proc,
    .facts = facts,
    .set_budget = set_budget,
    .describe = describe,
    .frame = frame,
    .thread_name = thread_name,
    .native_kind = native_kind,
    .interp_frames = interp_frames,
    .walk_thread = walk_thread,
    .walk_tstate = walk_tstate,
    .threads = threads,
    .threads_free = threads_free,
    .locals = locals,
    .tasks = tasks,
    .task_chain = task_chain,
    .tasks_now = tasks_now,
    .task_chain_of = task_chain_of,
    .tasks_free = pytasks_free,
    .lock_wait_function = "take_gil",
    .counts = counts,
};
