/* pywalk.c - walking a process's thread states and frames from user space
 * with the walker the BPF programs run (src/cpython/walk.h).
 *
 * Memory is read through the struct pyproc: process_vm_readv while the
 * target runs, or a captured image. Lists are bounded (PYWALK_MAX_* and the
 * walker's own TP_MAX_FRAMES and TP_WALK_STEPS), so a loop in a list that is
 * being changed, or a corrupt one, ends the walk with an error instead of
 * hanging it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proc/procfs.h"
#include "cpython/pywalk.h"

/* What the shared walker asks of its includer: memory through the pyproc,
 * counters in the state, and no thread-state cache beyond its own. */
struct tpw_host {
	const struct pyproc *pp;
	uint64_t stats[TP_STAT__COUNT];
	uint64_t *addrs; /* each frame's address, by its slot; NULL: not wanted */
};
#define tpw_read(st, dst, len, addr) pyproc_read((st)->host.pp, (addr), (dst), (len))
#define tpw_count(st, stat) ((st)->host.stats[(stat)]++)
#define tpw_tstate_lookup(st, tid) ((void)(st), (void)(tid), 0ULL)
#define tpw_tstate_store(st, tid, ts) ((void)(st), (void)(tid), (void)(ts))
#define tpw_code_first(st, code, ident) ((void)(st), (void)(code), (void)(ident))
#define tpw_frame_addr(st, n, f)                                                                   \
	((st)->host.addrs ? (void)((st)->host.addrs[tpw_frame_idx(n)] = (f)) : (void)0)
#include "cpython/walk.h"
#include "util/clock.h"

/* glibc's struct pthread on x86-64 starts with tcbhead_t (704 bytes) and a
 * list_t (16 bytes); tid follows, at 0x2d0, in every glibc since 2.x that
 * Debian ships. It is checked against /proc/PID/task before it is used. */
#define GLIBC_X86_64_PTHREAD_TID 0x2d0
/* Bytes of each struct pthread read when looking for tid. */
#define PTHREAD_SCAN 1024

/* An OS thread of the target: its tid in our pid namespace, and in its own. */
struct task_ids {
	pid_t host, ns;
};

static int rd64(const struct pyproc *pp, uint64_t addr, uint64_t *v)
{
	*v = 0;
	return pyproc_read(pp, addr, v, sizeof(*v));
}

/* The target's threads from /proc/PID/task. Returns how many, or a negative
 * errno; *out is malloc'd. */
static int read_tasks(const struct pyproc *pp, struct task_ids **out)
{
	pid_t *tids;
	size_t n;
	int ret = procfs_tasks(pp->pid, &tids, &n);
	if (ret)
		return ret;
	struct task_ids *t = calloc(n ? n : 1, sizeof(*t));
	if (!t) {
		free(tids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		t[i].host = t[i].ns = tids[i];
		/* Inside a pid namespace, Python and the C library hold the
		 * namespace's tids; /proc here shows ours. A thread that is
		 * gone keeps ours: it matches nothing either way. */
		if (pp->ns_pid)
			procfs_ns_pid(pp->pid, tids[i], &t[i].ns);
	}
	free(tids);
	*out = t;
	return (int)n;
}

static pid_t host_tid(const struct task_ids *t, size_t n, uint64_t ns)
{
	for (size_t i = 0; i < n; i++)
		if ((uint64_t)t[i].ns == ns)
			return t[i].host;
	return 0;
}

static bool in_tids(const pid_t *tids, size_t n, pid_t v)
{
	for (size_t i = 0; i < n; i++)
		if (tids[i] == v)
			return true;
	return false;
}

/* How many of the structs hold a distinct known tid at off. */
static size_t tid_score(const uint8_t *const *pthreads, size_t n, size_t off, const pid_t *tids,
			size_t ntids)
{
	size_t score = 0;
	for (size_t i = 0; i < n; i++) {
		pid_t v;
		memcpy(&v, pthreads[i] + off, sizeof(v));
		if (v <= 0 || !in_tids(tids, ntids, v))
			continue;
		bool dup = false;
		for (size_t j = 0; j < i && !dup; j++) {
			pid_t w;
			memcpy(&w, pthreads[j] + off, sizeof(w));
			dup = w == v;
		}
		if (!dup)
			score++;
	}
	return score;
}

int pywalk_pthread_tid_offset(const uint8_t *const *pthreads, size_t n, size_t scan_len,
			      const pid_t *tids, size_t ntids)
{
	if (!n || scan_len < sizeof(pid_t))
		return -ENOENT;
	size_t best = 0, best_off = 0;
	if (GLIBC_X86_64_PTHREAD_TID + sizeof(pid_t) <= scan_len) {
		best = tid_score(pthreads, n, GLIBC_X86_64_PTHREAD_TID, tids, ntids);
		if (best == n)
			return GLIBC_X86_64_PTHREAD_TID;
		best_off = GLIBC_X86_64_PTHREAD_TID;
	}
	/* Another C library, or another glibc layout: the offset at which
	 * the most threads hold their own tid. */
	for (size_t off = 0; off + sizeof(pid_t) <= scan_len; off += sizeof(pid_t)) {
		size_t s = tid_score(pthreads, n, off, tids, ntids);
		if (s > best) {
			best = s;
			best_off = off;
		}
	}
	return best ? (int)best_off : -ENOENT;
}

/* Fills the tid of every thread: native_thread_id where Python has it, else
 * through the C library's struct pthread, which thread_id points to. */
static int match_tids(const struct pyproc *pp, struct pywalk *w)
{
	struct task_ids *tasks = NULL;
	uint8_t *buf = NULL;
	const uint8_t **ptrs = NULL;
	pid_t *ns = NULL;
	size_t *which = NULL, nread = 0;
	int ntasks, err = 0;

	w->pthread_tid_off = -1;
	ntasks = read_tasks(pp, &tasks);
	if (ntasks < 0)
		return ntasks;
	if (pp->layout.ts_native_thread_id >= 0) {
		for (size_t i = 0; i < w->nthreads; i++) {
			uint64_t v;
			struct pywalk_thread *t = &w->threads[i];
			if (!rd64(pp, t->tstate + (uint64_t)pp->layout.ts_native_thread_id, &v))
				t->tid = host_tid(tasks, (size_t)ntasks, v);
			if (t->tid)
				w->tid_source = PYWALK_TID_NATIVE;
		}
		goto out;
	}
	if (!w->nthreads || !ntasks)
		goto out;
	buf = malloc(w->nthreads * PTHREAD_SCAN);
	ptrs = calloc(w->nthreads, sizeof(*ptrs));
	which = calloc(w->nthreads, sizeof(*which));
	ns = calloc((size_t)ntasks, sizeof(*ns));
	if (!buf || !ptrs || !which || !ns) {
		err = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < ntasks; i++)
		ns[i] = tasks[i].ns;
	for (size_t i = 0; i < w->nthreads; i++) {
		uint8_t *b = buf + nread * PTHREAD_SCAN;
		if (pyproc_read(pp, w->threads[i].thread_id, b, PTHREAD_SCAN))
			continue;
		ptrs[nread] = b;
		which[nread++] = i;
	}
	int off = pywalk_pthread_tid_offset(ptrs, nread, PTHREAD_SCAN, ns, (size_t)ntasks);
	if (off < 0)
		goto out;
	w->pthread_tid_off = off;
	for (size_t k = 0; k < nread; k++) {
		pid_t v;
		memcpy(&v, ptrs[k] + off, sizeof(v));
		struct pywalk_thread *t = &w->threads[which[k]];
		t->tid = v > 0 ? host_tid(tasks, (size_t)ntasks, (uint64_t)v) : 0;
		if (t->tid)
			w->tid_source = PYWALK_TID_PTHREAD;
	}
out:
	free(tasks);
	free(buf);
	free(ptrs);
	free(which);
	free(ns);
	return err;
}

/* Walks the frames from st->frame to the end of the stack as the BPF
 * programs do: one walker step per program run, at most TP_MAX_TAIL_CALLS
 * runs, and the same cut. */
static void walk_rest(struct tpw_state *st)
{
	__u32 walker = tpw_walker(st);
	for (unsigned int runs = 1; tpw_py(st)->frame; runs++) {
		if (!tpw_step(st, walker))
			break;
		st->s.walk_calls++;
		if (runs == TP_MAX_TAIL_CALLS)
			break;
	}
	tpw_cut(st);
}

static struct tpw_state *state_new(const struct pyproc *pp)
{
	struct tpw_state *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->host.pp = pp;
	tp_py_proc_set(&st->proc, &pp->tp);
	return st;
}

/* The frames of thread state ts into st->s, as the BPF programs walk them
 * once they have found it. */
static void walk_tstate(struct tpw_state *st, uint64_t ts)
{
	st->s.tstate = ts;
	if (!tpw_top_frame(st, ts))
		walk_rest(st);
}

/* The frames of thread t, innermost first. Returns 0 or -ENOMEM; read
 * failures end the walk and are recorded in t->err. */
static int walk_frames(struct tpw_state *st, struct pywalk_thread *t)
{
	uint64_t *addrs = malloc(TP_MAX_FRAMES * sizeof(*addrs));
	if (!addrs)
		return -ENOMEM;
	st->host.addrs = addrs;
	st->s.time_ns = clock_ns(CLOCK_MONOTONIC);
	tpw_begin(st);
	tpw_py_begin(st);
	t->gil = tpw_gil_state(st, t->tstate);
	walk_tstate(st, t->tstate);
	st->host.addrs = NULL;
	t->err = st->s.err;
	t->nframes = st->s.nframes;
	if (t->nframes) {
		t->frames = malloc(t->nframes * sizeof(*t->frames));
		t->frame_addrs = malloc(t->nframes * sizeof(*t->frame_addrs));
	}
	if (t->nframes && (!t->frames || !t->frame_addrs)) {
		free(addrs);
		return -ENOMEM;
	}
	if (t->nframes) {
		memcpy(t->frames, st->s.frames, t->nframes * sizeof(*t->frames));
		memcpy(t->frame_addrs, addrs, t->nframes * sizeof(*t->frame_addrs));
	}
	free(addrs);
	return 0;
}

int pywalk_sample(const struct pyproc *pp, uint64_t id, uint64_t fsbase, struct tp_sample *out,
		  struct tpw_anchors *anchors)
{
	struct tpw_state *st = state_new(pp);
	if (!st)
		return -ENOMEM;
	st->s.pid = (uint32_t)(id >> 32);
	st->s.tid = (uint32_t)id;
	st->s.time_ns = clock_ns(CLOCK_MONOTONIC);
	tpw_begin(st);
	tpw_py_begin(st);
	uint64_t ts = 0;
	if (!fsbase)
		st->s.err = TP_ERR_FSBASE;
	else
		ts = tpw_find_tstate(st, id, fsbase);
	if (ts) {
		st->s.gil = tpw_gil_state(st, ts);
		walk_tstate(st, ts);
	}
	*out = st->s;
	if (anchors)
		*anchors = st->a;
	free(st);
	return 0;
}

int pywalk_tstate(const struct pyproc *pp, uint64_t tstate, struct tp_sample *out,
		  struct tpw_anchors *anchors)
{
	struct tpw_state *st = state_new(pp);
	if (!st)
		return -ENOMEM;
	st->s.time_ns = clock_ns(CLOCK_MONOTONIC);
	tpw_begin(st);
	tpw_py_begin(st);
	st->s.gil = tpw_gil_state(st, tstate);
	walk_tstate(st, tstate);
	*out = st->s;
	if (anchors)
		*anchors = st->a;
	free(st);
	return 0;
}

static int push_thread(struct pywalk *w, size_t *cap, const struct pywalk_thread *t)
{
	if (w->nthreads == *cap) {
		size_t ncap = *cap ? 2 * *cap : 16;
		struct pywalk_thread *nt = realloc(w->threads, ncap * sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		w->threads = nt;
		*cap = ncap;
	}
	w->threads[w->nthreads++] = *t;
	return 0;
}

int pywalk_read(const struct pyproc *pp, struct pywalk *w)
{
	const struct tp_py_offsets *o = &pp->tp.off;
	uint64_t interp = 0, ts = 0;
	unsigned int budget = PYWALK_MAX_TOTAL_STEPS;
	size_t cap = 0;
	int ret;

	memset(w, 0, sizeof(*w));
	w->pthread_tid_off = -1;
	ret = rd64(pp, pp->tp.interp_head_addr, &interp);
	if (ret)
		return ret == -ESRCH ? -ESRCH : -EFAULT;
	for (unsigned int i = 0; interp; i++) {
		if (i == PYWALK_MAX_INTERPS) {
			w->err = TP_ERR_INTERP_LIMIT;
			break;
		}
		if (rd64(pp, interp + o->interp_tstate_head, &ts)) {
			w->err = TP_ERR_INTERP_THREADS;
			break;
		}
		while (ts) {
			struct pywalk_thread t = {.tstate = ts, .interp = i};
			if (w->nthreads == PYWALK_MAX_THREADS) {
				w->err = TP_ERR_THREAD_LIMIT;
				break;
			}
			if (rd64(pp, ts + o->ts_thread_id, &t.thread_id)) {
				w->err = TP_ERR_TSTATE_ID;
				break;
			}
			ret = push_thread(w, &cap, &t);
			if (ret)
				return ret;
			if (rd64(pp, ts + o->ts_next, &ts)) {
				w->err = TP_ERR_TSTATE_NEXT;
				break;
			}
		}
		if (rd64(pp, interp + o->interp_next, &interp))
			break;
	}
	struct tpw_state *st = w->nthreads ? state_new(pp) : NULL;
	if (w->nthreads && !st)
		return -ENOMEM;
	for (size_t i = 0; i < w->nthreads; i++) {
		/* Every thread can share one looping frame list: a budget for
		 * all of them keeps 4096 of those from taking 4096 walks. */
		if (!budget) {
			w->threads[i].err = TP_ERR_STEPS;
			continue;
		}
		ret = walk_frames(st, &w->threads[i]);
		if (ret) {
			free(st);
			return ret;
		}
		/* Each walker run visits at most TP_FRAMES_PER_PROG frames. */
		unsigned int used = (st->s.walk_calls + 1) * TP_FRAMES_PER_PROG;
		budget = used < budget ? budget - used : 0;
	}
	free(st);
	ret = match_tids(pp, w);
	return ret == -ENOMEM ? ret : 0;
}

void pywalk_free(struct pywalk *w)
{
	for (size_t i = 0; i < w->nthreads; i++) {
		free(w->threads[i].frames);
		free(w->threads[i].frame_addrs);
	}
	free(w->threads);
	memset(w, 0, sizeof(*w));
}
