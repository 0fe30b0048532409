/* offcpu.c - time off the CPU (--mode wall, off-cpu): each thread's stack
 * as it leaves the CPU weighs the time until it runs again
 * (doc/design/off-cpu.md), threads asleep when the recording starts
 * weigh from the start, and asyncio tasks that wait weigh their await
 * stacks (--async). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "core/nwalk.h"
#include "core/session_int.h"
#include "util/clock.h"
#include "util/log.h"
#include "walk/taskstate.h"

/* Away thread a was seen on the CPU by a cpu-clock sample at a->ran_ns, and
 * its return never came (ring full): it came back within a sampling period
 * before that sample, which ends its time away. */
static void came_back_seen(struct session *s, struct away *a)
{
	uint64_t period = sample_period_ns(s);
	uint64_t in_ns = a->ran_ns > a->out_ns + period ? a->ran_ns - period : a->out_ns;
	s->st.offcpu_seen_back++;
	came_back(s, a->tid, a->out_ns, in_ns);
}

/* A cpu-clock sample of thread tid at time_ns: if it is away, it is back. */
void seen_running(struct session *s, uint32_t tid, uint64_t time_ns)
{
	struct away *a;
	HASH_FIND(hh, s->away, &tid, sizeof(tid), a);
	if (a && !a->ran_ns && time_ns > a->out_ns)
		a->ran_ns = time_ns;
}

/* Thread smp->tid left the CPU with the stack ids[0 .. n): the stack goes
 * into the profile with a count of 0, and gets its count and time when the
 * thread runs again (came_back). */
int went_away(struct session *s, const struct tp_sample *smp, const uint32_t *ids, uint32_t n,
	      const struct prof_labels *lb)
{
	struct away *a;
	HASH_FIND(hh, s->away, &smp->tid, sizeof(smp->tid), a);
	if (a && a->ran_ns) {
		/* Its return was lost (ring full), but a sample saw it run. */
		came_back_seen(s, a);
		a = NULL;
	}
	if (a) {
		/* Its return was lost (ring full): how long it was away is
		 * not known. */
		s->st.offcpu_unended++;
	}
	if (!a) {
		if (!(a = calloc(1, sizeof(*a))))
			return -ENOMEM;
		a->tid = smp->tid;
		HASH_ADD(hh, s->away, tid, sizeof(a->tid), a);
	}
	a->out_ns = a->from_ns = smp->time_ns;
	int ret = profile_add_at(s->prof, ids, n, lb, 0, 0, &a->index);
	if (ret) {
		HASH_DEL(s->away, a);
		free(a);
	}
	return ret;
}

/* Thread tid, away since out_ns, runs again at in_ns (or the recording
 * ended then): its stack weighs the time, unless the whole stretch is
 * shorter than --min-block. */
void came_back(struct session *s, uint32_t tid, uint64_t out_ns, uint64_t in_ns)
{
	struct away *a;
	HASH_FIND(hh, s->away, &tid, sizeof(tid), a);
	if (!a || a->out_ns != out_ns)
		return; /* its stack was lost (ring full), or that of a process forgotten */
	if (in_ns - out_ns < s->opts.min_block_ns) {
		s->st.offcpu_short++;
	} else {
		s->st.offcpu++;
		profile_bump_at(s->prof, a->index, 1, in_ns > a->from_ns ? in_ns - a->from_ns : 0,
				session_unix_ns(s, s->prof, a->from_ns));
	}
	HASH_DEL(s->away, a);
	free(a);
}

/* Time off the CPU that began before a process was recognised and ended
 * after (BPF adds it to the process's tp_unknown at the return): into the
 * profile at the end of a window and of the recording. */
static void collect_early(struct session *s)
{
	struct sproc *p, *tmp;
	if (s->opts.mode == PROF_MODE_CPU)
		return;
	HASH_ITER(hh, s->procs, p, tmp)
	if (p->state == SP_RUNTIME)
		account_early(s, p);
}

/* The recording ended at end_ns with threads still away: each weighs the
 * time until then. */
void end_away(struct session *s, uint64_t end_ns)
{
	struct away *a, *tmp;
	collect_early(s);
	HASH_ITER(hh, s->away, a, tmp)
	{
		if (a->ran_ns) {
			came_back_seen(s, a);
			continue;
		}
		s->st.offcpu_open++;
		came_back(s, a->tid, a->out_ns, end_ns > a->out_ns ? end_ns : a->out_ns);
	}
}

struct asleep_pre {
	pid_t pid;
	struct tp_thread_snap *v; /* its threads before BPF watched */
	size_t n;
};

/* Why a thread that is not running is off the CPU, as on_switch names it
 * (walk/taskstate.h); -1: it is running, or about to. */
static int asleep_state(const struct tp_thread_snap *t)
{
	if (t->on_cpu || !tp_task_asleep(t->state))
		return -1;
	return tp_off_state(0, t->state);
}

static const struct tp_thread_snap *snap_find(const struct tp_thread_snap *v, size_t n,
					      uint32_t tid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].tid == tid)
			return &v[i];
	return NULL;
}

/* The Python processes known now and their threads, before BPF watches;
 * *out and *n, NULL when the sampler cannot tell (--mode cpu). */
void asleep_before(struct session *s, struct asleep_pre **out, size_t *n)
{
	struct sproc *p, *tmp;
	*out = NULL;
	*n = 0;
	if (s->opts.mode == PROF_MODE_CPU || !s->sm.ops->snap_threads || !s->sm.ops->set_away)
		return;
	size_t cap = HASH_COUNT(s->procs);
	struct asleep_pre *v = calloc(cap ? cap : 1, sizeof(*v));
	if (!v)
		return;
	HASH_ITER(hh, s->procs, p, tmp)
	{
		if (p->state != SP_RUNTIME || *n == cap)
			continue;
		if (s->sm.ops->snap_threads(s->sm.impl, (uint32_t)p->pid, &v[*n].v, &v[*n].n))
			continue;
		v[(*n)++].pid = p->pid;
	}
	*out = v;
}

/* The stack of thread t of p as BPF would take it leaving the CPU, into
 * smp. Returns 0 or -ENOMEM. */
static int asleep_stack(struct session *s, struct sproc *p, struct nwalk *nw,
			const struct tp_thread_snap *t, int state, struct tp_sample *smp)
{
	uint64_t id = (uint64_t)(uint32_t)p->pid << 32 | t->tid;
	struct tpw_anchors *anchors = nw ? nwalk_anchors(nw) : NULL;
	int ret = p->rt->walk_thread(p->rp, id, t->fsbase, smp, anchors);
	if (ret)
		return ret;
	if (nw)
		nwalk_regs(nw, t->ip, t->sp, t->bp, anchors, smp);
	smp->kind = TP_EV_SAMPLE;
	smp->flags |= TP_SF_OFFCPU;
	smp->state = (uint8_t)state;
	memcpy(smp->comm, t->comm, sizeof(smp->comm));
	if (s->opts.kernel_stacks) {
		smp->nkstack = t->nkstack < TP_KSTACK_MAX ? t->nkstack : TP_KSTACK_MAX;
		memcpy(smp->kstack, t->kstack, smp->nkstack * sizeof(smp->kstack[0]));
	}
	return 0;
}

/* Process pre->pid's threads that are asleep now: their stacks, each away
 * since the start if it has not run since pre was taken, else since now. */
static int asleep_proc(struct session *s, const struct asleep_pre *pre)
{
	struct sproc *p = sproc_get(s, pre->pid);
	struct tp_thread_snap *a = NULL, *b = NULL;
	struct tp_sample *smp = NULL;
	struct nwalk *nw = NULL;
	size_t na = 0, nb = 0, k = 0;
	int ret = 0;
	if (!p || p->state != SP_RUNTIME)
		return 0;
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	if (s->sm.ops->snap_threads(s->sm.impl, (uint32_t)p->pid, &a, &na))
		return 0;
	int *state = calloc(na ? na : 1, sizeof(*state));
	if (!state) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < na; i++)
		if ((state[i] = asleep_state(&a[i])) >= 0)
			k++;
	if (!k)
		goto out;
	if (!(smp = calloc(k, sizeof(*smp)))) {
		ret = -ENOMEM;
		goto out;
	}
	if (s->native && nwalk_new(p->pid, p->rt, p->rp, &nw) == -ENOMEM) {
		ret = -ENOMEM;
		goto out;
	}
	k = 0;
	for (size_t i = 0; i < na && !ret; i++)
		if (state[i] >= 0)
			ret = asleep_stack(s, p, nw, &a[i], state[i], &smp[k++]);
	if (ret || s->sm.ops->snap_threads(s->sm.impl, (uint32_t)p->pid, &b, &nb))
		goto out;
	size_t nasleep = k, before = s->st.offcpu_asleep;
	k = 0;
	for (size_t i = 0; i < na && !ret; i++) {
		if (state[i] < 0)
			continue;
		struct tp_sample *sm = &smp[k++];
		const struct tp_thread_snap *then = snap_find(b, nb, a[i].tid);
		if (!then || then->ran_ns != a[i].ran_ns || asleep_state(then) < 0) {
			s->st.offcpu_asleep_ran++;
			continue;
		}
		const struct tp_thread_snap *first = snap_find(pre->v, pre->n, a[i].tid);
		uint64_t out_ns = first && first->ran_ns == a[i].ran_ns ? s->start_ns : now;
		int r = s->sm.ops->set_away(s->sm.impl, a[i].tid, out_ns, a[i].ran_ns);
		if (r) {
			if (r != -EEXIST)
				log_debug("pid %d, thread %u: asleep at the start, but BPF cannot "
					  "be told: %s; it is seen from its first wake-up",
					  p->pid, a[i].tid, strerror(-r));
			continue;
		}
		sm->time_ns = out_ns;
		ret = on_sample(s, sm, sizeof(*sm));
		if (!ret)
			s->st.offcpu_asleep++;
	}
	log_debug("pid %d: %zu of %zu threads asleep at the start, %llu of them read in %.1f ms",
		  p->pid, nasleep, na, (unsigned long long)(s->st.offcpu_asleep - before),
		  (double)(clock_ns(CLOCK_MONOTONIC) - now) / 1e6);
out:
	nwalk_free(nw);
	free(smp);
	free(state);
	free(a);
	free(b);
	return ret == -ENOMEM ? ret : 0;
}

int asleep_after(struct session *s, struct asleep_pre *pre, size_t n, bool started)
{
	int ret = 0;
	for (size_t i = 0; i < n; i++) {
		if (started && !ret)
			ret = asleep_proc(s, &pre[i]);
		free(pre[i].v);
	}
	free(pre);
	return ret;
}

void away_cut(struct session *s, struct profile *old, struct profile *fresh, uint64_t now)
{
	collect_early(s);
	/* A thread away across the boundary weighs in both windows: here
	 * until now, in the next from now. */
	struct away *a, *tmp;
	HASH_ITER(hh, s->away, a, tmp)
	{
		size_t idx;
		if (a->ran_ns) {
			came_back_seen(s, a); /* into old, s->prof still */
			continue;
		}
		if (profile_copy_stack(fresh, old, a->index, &idx)) {
			s->st.offcpu_unended++;
			HASH_DEL(s->away, a);
			free(a);
			continue;
		}
		if (now - a->out_ns >= s->opts.min_block_ns)
			profile_bump_at(old, a->index, 1, now > a->from_ns ? now - a->from_ns : 0,
					session_unix_ns(s, old, a->from_ns));
		a->index = idx;
		a->from_ns = now;
	}
}

/* --async: the looks at a process's tasks are at least a sampling period
 * apart, and TASKS_LOOK_SHARE times what the last one took (a look reads
 * every task: seconds for 100,000), so that they take at most a tenth of
 * the time of the thread that reads samples; after a look that failed
 * (asyncio not imported yet, or never: with -a, most processes),
 * TASKS_LOOK_RETRY_NS, doubled at each failure up to 8 times that. */
#define TASKS_LOOK_SHARE 10
#define TASKS_LOOK_RETRY_NS 250000000ULL
#define TASKS_LOOK_BACKOFF 3

/* Task t of p, waiting since since: its await stack, its chain of tasks
 * above it, weighs now - since. */
static int task_waits(struct session *s, struct sproc *p, size_t i, const struct rt_task *t,
		      uint64_t since, uint64_t now)
{
	struct tp_sample *smp = s->task_smp;
	const char *chain[STACKS_TASKS_MAX];
	size_t nchain = p->rt->task_chain_of(p->rp, i, chain, STACKS_TASKS_MAX);
	uint32_t nf = t->nframes < TP_MAX_FRAMES ? t->nframes : TP_MAX_FRAMES;
	/* The header only: the frames past nf are not read. */
	memset(smp, 0, offsetof(struct tp_sample, kstack));
	smp->kind = TP_EV_SAMPLE;
	smp->pid = (uint32_t)p->pid;
	smp->tid = t->tid ? t->tid : (uint32_t)p->pid;
	smp->time_ns = now;
	smp->nframes = (uint16_t)nf;
	smp->err = t->stack_cut || nf < t->nframes ? TP_ERR_DEPTH : TP_ERR_NONE;
	smp->gil = TP_GIL_UNKNOWN;
	snprintf(smp->comm, sizeof(smp->comm), "%s", p->f.comm ? p->f.comm : "");
	memcpy(smp->frames, t->frames, nf * sizeof(smp->frames[0]));
	struct stacks_proc sp = sproc_stacks(p);
	const uint32_t *ids;
	uint32_t n;
	struct prof_labels lb;
	stacks_preset_tasks(s->stacks, chain, nchain, nf ? nf - 1 : 0);
	int ret = stacks_build(s->stacks, &sp, smp, false, &ids, &n, &lb);
	if (ret || (ret = stacks_push_marker(s->stacks, &n, STACKS_MARKER_AWAITING)) < 0)
		return ret;
	lb.state = PROF_STATE_AWAITING;
	size_t idx;
	if (!(ret = profile_add_at(s->prof, ids, n, &lb, 0, 0, &idx))) {
		profile_bump_at(s->prof, idx, 1, now - since, session_unix_ns(s, s->prof, since));
		s->st.task_awaits++;
	}
	return ret;
}

/* Looks at p's tasks now: each that waits weighs the time since the last
 * look. The first weighs from the start of the recording (or of the
 * process's, if later), as a thread asleep then does; after one that
 * failed (asyncio not imported yet), the next weighs nothing. */
static int tasks_look(struct session *s, struct sproc *p, uint64_t now)
{
	const struct rt_tasks *ts;
	uint64_t took = 0, wait = sample_period_ns(s);
	int ret = p->rt->tasks_now(p->rp, now, &ts, &took);
	s->st.task_reads++;
	s->st.task_read_failures += ret != 0;
	s->task_look_ns += took;
	if (took < UINT64_MAX / TASKS_LOOK_SHARE && took * TASKS_LOOK_SHARE > wait)
		wait = took * TASKS_LOOK_SHARE;
	if (ret && wait < TASKS_LOOK_RETRY_NS << p->tasks_fails)
		wait = TASKS_LOOK_RETRY_NS << p->tasks_fails;
	p->tasks_fails =
	    ret ? (p->tasks_fails < TASKS_LOOK_BACKOFF ? p->tasks_fails + 1 : TASKS_LOOK_BACKOFF)
		: 0;
	uint64_t since = p->tasks_at_ns;
	if (!p->tasks_looked)
		since = p->classified_ns > s->start_ns ? p->classified_ns : s->start_ns;
	p->tasks_looked = true;
	p->tasks_at_ns = ret ? 0 : now;
	p->tasks_next_ns = now + wait;
	if (ret || !since || now <= since)
		return 0;
	for (size_t i = 0; i < ts->n; i++) {
		const struct rt_task *t = &ts->v[i];
		/* The running task is the thread's samples'. */
		if (t->running || !t->nframes || (t->state && strcmp(t->state, "pending")))
			continue;
		if ((ret = task_waits(s, p, i, t, since, now)) == -ENOMEM)
			return ret;
	}
	return 0;
}

int tasks_waiting(struct session *s, uint64_t now)
{
	struct sproc *p, *tmp;
	/* Once stopped, one last look weighs the time up to the stop. */
	bool last = s->stop_ns && !s->tasks_last;
	if (!s->opts.async || s->opts.mode != PROF_MODE_WALL || (s->stop_ns && !last))
		return 0;
	if (last) {
		s->tasks_last = true;
		now = s->stop_ns;
	}
	if (!s->task_smp && !(s->task_smp = malloc(sizeof(*s->task_smp))))
		return -ENOMEM;
	HASH_ITER(hh, s->procs, p, tmp)
	{
		if (p->state != SP_RUNTIME || p->exited_ns || !p->rt->tasks_now ||
		    (last ? !p->tasks_at_ns : now < p->tasks_next_ns))
			continue;
		int ret = tasks_look(s, p, now);
		if (ret)
			return ret;
	}
	return 0;
}
