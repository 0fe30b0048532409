/* session.c - events from the ring buffer become stacks in the profile.
 *
 * Samples are symbolized as they arrive, not at the end, so that processes
 * that exit during the recording keep their names (doc/design/naming.md,
 * decision 6).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

#include "core/bpfrun.h"
#include "core/native.h"
#include "core/runtime.h"
#include "core/session.h"
#include "core/session_int.h"
#include "core/stacks.h"
#include "core/wire.h"
#include "proc/procfs.h"
#include "profile/debuginfod.h"
#include "profile/nativesym.h"
#include "util/budget.h"
#include "util/clock.h"
#include "util/hashfree.h"
#include "util/log.h"

/* How long an unclassified young process is re-examined: its loader may not
 * have mapped libpython yet when it is first seen. */
#define YOUNG_MS 3000
/* The waits between housekeeping's looks at a young process that is not
 * Python yet. */
#define LOOK_FIRST_MS 10
#define LOOK_MAX_MS 320

struct sproc *sproc_get(struct session *s, pid_t pid)
{
	struct sproc *p;
	HASH_FIND_INT(s->procs, &pid, p);
	return p;
}

static void sproc_drop(struct session *s, struct sproc *p)
{
	HASH_DEL(s->procs, p);
	if (s->native)
		native_drop(s->native, p->pid, &p->np);
	if (p->rt)
		p->rt->free(p->rp);
	stacks_fcache_free(p->fcache);
	free(p->exe);
	free(p);
}

/* Reads p's executable mappings (again) for native unwinding. One call
 * does a bounded amount of work; what is left waits for the next turn of
 * the loop (p->rescan stays set), so that samples are read in between. */
static void native_rescan(struct session *s, struct sproc *p)
{
	if (!s->native)
		return;
	p->rescan = false;
	int ret = native_scan(s->native, p->pid, &p->np);
	if (ret == -EAGAIN) {
		p->rescan = s->rescans = true;
		return;
	}
	if (ret && ret != -ESRCH)
		log_debug("pid %d: cannot read its mappings for native unwinding: %s", p->pid,
			  strerror(-ret));
	else if (!ret && p->np.scan_built)
		log_debug("pid %d: native: all its code read, %u unwind tables built, in %.0f ms",
			  p->pid, p->np.scan_built,
			  (clock_ns(CLOCK_MONOTONIC) - p->np.scan_since) / 1e6);
	p->np.scan_since = 0;
}

/* Whether a process of a runtime passes the system-wide filters. */
static bool wanted(const struct session *s, const struct sproc *p)
{
	if (!s->opts.system_wide)
		return true;
	if (s->opts.comms) {
		bool hit = false;
		for (const char *const *c = s->opts.comms; *c && !hit; c++)
			hit = !strcmp(*c, p->f.comm);
		if (!hit)
			return false;
	}
	if (s->opts.cgroup && !procfs_cgroup_within(p->cg.path, s->opts.cgroup))
		return false;
	return true;
}

/* Samples of a process taken before it was recognised are in the profile
 * as one marker frame, labelled like the process: lost, but not hidden; so
 * is its threads' time off the CPU then (--mode wall, off-cpu), under the
 * marker and the leaf of each reason. */
void account_early(struct session *s, struct sproc *p)
{
	struct tp_unknown u;
	int id, leaf;
	if (s->sm.ops->take_unknown(s->sm.impl, (uint32_t)p->pid, &u) ||
	    (id = stacks_marker(s->stacks, "[before taipan recognised the process]")) < 0)
		return;
	uint32_t frames[2] = {(uint32_t)id};
	struct prof_labels lb = {
	    .pid = (uint32_t)p->pid,
	    .tid = (uint32_t)p->pid,
	    .ns_pid = p->f.ns_pid,
	    .thread_name = p->f.comm,
	    .comm = p->f.comm,
	    .runtime = p->rt->name,
	    .runtime_version = p->f.version,
	    .version_alias = p->rt->version_label,
	    .lock_name = p->rt->lock_label,
	    .cgroup = p->cg.path,
	    .container_id = p->cg.container,
	    .exe = p->exe,
	    .state = s->opts.mode == PROF_MODE_CPU ? PROF_STATE_NONE : PROF_STATE_RUNNING,
	};
	/* Off-CPU profiles hold no time on the CPU, early or not. */
	if (u.samples && s->opts.mode != PROF_MODE_OFFCPU) {
		if (!profile_add(s->prof, frames, 1, &lb, u.samples))
			s->st.lost_early += u.samples;
		else
			s->early_dropped += u.samples;
	}
	for (int st = TP_TS_RUNNABLE; st < TP_TS__COUNT && s->opts.mode != PROF_MODE_CPU; st++) {
		if (!u.stretches[st] ||
		    (leaf = stacks_marker(s->stacks, stacks_state_leaf(st))) < 0)
			continue;
		frames[1] = (uint32_t)leaf;
		lb.state = (uint8_t)(PROF_STATE_RUNNING + st);
		if (!profile_add_off(s->prof, frames, 2, &lb, u.stretches[st], u.off_ns[st]))
			s->st.offcpu_early += u.stretches[st];
	}
}

/* Tells BPF that pid is not to be walked. On failure BPF keeps announcing
 * the pid (at most once per TP_ANNOUNCE_NS) and counting its samples as
 * unknown, which costs a little and loses nothing: said in verbose mode. */
static void mark_not_ours(struct session *s, pid_t pid)
{
	struct tp_proc marker = {.runtime = TP_RT_NONE};
	int ret = s->sm.ops->set_proc(s->sm.impl, (uint32_t)pid, &marker);
	if (ret)
		log_debug("pid %d: cannot mark it as not profiled in BPF: %s; BPF keeps "
			  "announcing it",
			  pid, strerror(-ret));
}

/* Asks each runtime in turn whether p's process is one of its own: 0 with
 * p->rt, p->rp and p->f set; else the first answer that is not -ENOEXEC
 * (not that runtime's), or -ENOEXEC with the first runtime's message. */
static int detect(struct session *s, struct sproc *p, char *msg, size_t msglen)
{
	if (p->rt) { /* an earlier look's */
		p->rt->free(p->rp);
		p->rt = NULL;
		p->rp = NULL;
	}
	int ret = runtime_detect(s->caches, p->pid, &p->rt, &p->rp, msg, msglen);
	if (!ret)
		p->rt->facts(p->rp, &p->f);
	return ret;
}

/* p->exe: the path /proc/PID/exe names (the link is read, not followed),
 * for OTLP's process.executable.path; NULL when it cannot be read. */
static void read_exe(struct sproc *p)
{
	char link[64], path[PATH_MAX];
	free(p->exe);
	p->exe = NULL;
	snprintf(link, sizeof(link), "/proc/%d/exe", p->pid);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n <= 0)
		return;
	path[n] = '\0';
	p->exe = strdup(path); /* NULL when out of memory: no path */
}

/* Classifies pid and tells BPF. Returns 0 when it is now known (Python or
 * not), -EAGAIN when it should be looked at again soon. */
static int classify(struct session *s, struct sproc *p, bool require_python, char *err,
		    size_t errlen)
{
	char msg[512];
	int ret;
	for (int look = 0;; look++) {
		p->classified_ns = clock_ns(CLOCK_MONOTONIC);
		ret = detect(s, p, msg, sizeof(msg));
		/* An exec while we looked (exec_ns later than the look's start):
		 * what we read may be of either program. Look again, so that
		 * the exec's event, read later, finds a classification that
		 * comes after it and keeps it. */
		uint64_t exec = 0;
		if (look < 2 && s->sm.ops->last_exec &&
		    !s->sm.ops->last_exec(s->sm.impl, (uint32_t)p->pid, &exec) &&
		    exec >= p->classified_ns) {
			log_debug("pid %d: exec'd while being classified: looking again", p->pid);
			continue;
		}
		break;
	}
	if (!ret) {
		procfs_cgroup(p->pid, &p->cg); /* none when it fails: "" */
		read_exe(p);
	}
	if (!ret && !wanted(s, p)) {
		p->state = SP_OTHER;
		mark_not_ours(s, p->pid);
		return 0;
	}
	if (!ret) {
		p->rt->set_budget(p->rp, &s->budget);
		ret = s->sm.ops->set_proc(s->sm.impl, (uint32_t)p->pid, p->rt->bpf_proc(p->rp));
		if (ret) {
			snprintf(err, errlen, "pid %d: cannot register with BPF: %s", p->pid,
				 strerror(-ret));
			return ret;
		}
		p->state = SP_RUNTIME;
		s->st.processes++;
		/* After its Python walks start: a file's first table can take
		 * a while to build (a large static interpreter), and a short
		 * process must not lose its Python frames meanwhile. Samples
		 * before it end their native part with [native: unknown code]. */
		native_rescan(s, p);
		account_early(s, p);
		log_debug("pid %d (%s): %s %s (%s), %s", p->pid, p->f.comm, p->rt->title,
			  p->f.version, p->f.how, p->f.binary);
		return 0;
	}
	if (ret == -ESRCH) {
		snprintf(err, errlen, "%s", msg);
		p->state = SP_EXITED;
		return ret;
	}
	if (ret == -ENOEXEC && !require_python) {
		uint64_t age;
		if (!procfs_age_ms(p->pid, &age) && age < YOUNG_MS)
			return -EAGAIN;
	}
	snprintf(err, errlen, "%s", msg);
	if (ret == -ENOTSUP) {
		if (!s->st.unsupported++)
			snprintf(s->st.refused, sizeof(s->st.refused), "%s", msg);
		if (!require_python)
			log_warn("%s", msg);
	}
	p->state = SP_OTHER;
	mark_not_ours(s, p->pid);
	return ret;
}

static struct sproc *sproc_new(struct session *s, pid_t pid)
{
	struct sproc *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->state = SP_PENDING;
	HASH_ADD_INT(s->procs, pid, p);
	return p;
}

static void discover(struct session *s, pid_t pid)
{
	char err[512];
	struct sproc *p = sproc_get(s, pid);
	if (p && p->exited_ns)
		return; /* a discover event read after the exit: nothing to put back */
	if (p && p->state == SP_RUNTIME) {
		/* BPF forgot it (evicted, or an exec we have not read yet): tell
		 * it again, and account for what it sampled meanwhile. */
		int ret = s->sm.ops->set_proc(s->sm.impl, (uint32_t)pid, p->rt->bpf_proc(p->rp));
		if (ret)
			log_debug("pid %d: cannot register with BPF again: %s; BPF counts its "
				  "samples as unknown until it announces it again",
				  pid, strerror(-ret));
		account_early(s, p);
		return;
	}
	if (p && p->state != SP_PENDING)
		return;
	if (!p && !(p = sproc_new(s, pid)))
		return;
	classify(s, p, false, err, sizeof(err));
}

struct stacks_proc sproc_stacks(struct sproc *p)
{
	return (struct stacks_proc){
	    .pid = p->pid,
	    .rt = p->rt,
	    .rp = p->rp,
	    .f = &p->f,
	    .cgroup = p->cg.path,
	    .container = p->cg.container,
	    .exe = p->exe,
	    .fcache = &p->fcache,
	    .np = &p->np,
	};
}

int on_sample(struct session *s, const struct tp_sample *smp, size_t size)
{
	size_t need = __builtin_offsetof(struct tp_sample, frames) +
		      (size_t)smp->nframes * sizeof(struct tp_frame);
	if (size < need || smp->nframes > TP_MAX_FRAMES || smp->nkstack > TP_KSTACK_MAX ||
	    smp->nustack > TP_USTACK_MAX)
		return 0; /* malformed: cannot happen unless the ABI drifted */
	bool offcpu = smp->flags & TP_SF_OFFCPU;
	if (!offcpu && s->opts.mode == PROF_MODE_OFFCPU)
		return 0; /* the cpu-clock samples find the processes, and go */
	struct sproc *p = sproc_get(s, (pid_t)smp->pid);
	if (!p || p->state != SP_RUNTIME) {
		/* Exited and dropped, or re-exec'd: counted, never guessed. */
		s->dropped++;
		/* A layout that BPF has and we do not (a fork event lost with
		 * the ring full): forgotten, so that BPF announces the
		 * process and we classify it. */
		if (!p)
			s->sm.ops->del_proc(s->sm.impl, smp->pid);
		return 0;
	}
	if (s->opts.gil_only && smp->gil != TP_GIL_HELD) {
		s->st.gil_other++;
		s->st.gil_unknown += smp->gil == TP_GIL_UNKNOWN;
		return 0;
	}
	struct stacks_proc sp = sproc_stacks(p);
	const uint32_t *ids;
	uint32_t n;
	struct prof_labels lb;
	int ret = stacks_build(s->stacks, &sp, smp, s->native != NULL, &ids, &n, &lb);
	if (ret)
		return ret;
	lb.state = s->opts.mode == PROF_MODE_CPU ? PROF_STATE_NONE : PROF_STATE_RUNNING;
	if (offcpu) {
		uint8_t st = smp->state < TP_TS__COUNT ? smp->state : TP_TS_SLEEPING;
		lb.state = (uint8_t)(PROF_STATE_RUNNING + st);
		if ((ret = stacks_push_marker(s->stacks, &n, stacks_state_leaf(st))) < 0)
			return ret;
		ret = went_away(s, smp, ids, n, &lb);
	} else {
		size_t idx;
		if (!(ret = profile_add_at(s->prof, ids, n, &lb, 0, 0, &idx)))
			profile_bump_at(s->prof, idx, 1, 0,
					session_unix_ns(s, s->prof, smp->time_ns));
		if (s->away)
			seen_running(s, smp->tid, smp->time_ns);
	}
	if (!ret)
		s->st.samples++;
	if (!s->first_sample_seen) {
		/* For bench/startup.py: what starting cost, threads included. */
		struct rusage ru;
		s->first_sample_seen = true;
		if (!getrusage(RUSAGE_SELF, &ru))
			log_debug("first sample: %.1f ms of CPU since taipan started",
				  (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
				      (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3);
	}
	return ret;
}

/* BPF gave child the layout of its parent, a known Python process: a fork
 * shares it. The child is known as its parent was, without a look at /proc,
 * which a short child may have left before this event is read. */
static void forked(struct session *s, pid_t child, pid_t parent, uint64_t time_ns)
{
	struct sproc *pp = sproc_get(s, parent), *c = sproc_get(s, child);
	if (!pp || pp->state != SP_RUNTIME) {
		/* Not ours to vouch for (the parent exec'd meanwhile, say):
		 * BPF forgets the copy and announces the child. */
		if (!c)
			s->sm.ops->del_proc(s->sm.impl, (uint32_t)child);
		return;
	}
	if (c)
		sproc_drop(s, c); /* an exited process whose pid came round again */
	if (!(c = sproc_new(s, child)))
		return;
	c->cg = pp->cg;
	if (!pp->rt->fork(pp->rp, child, &c->rp)) {
		c->rt = pp->rt;
		c->rt->facts(c->rp, &c->f);
		c->rt->set_budget(c->rp, &s->budget);
	}
	if (!c->rt) {
		sproc_drop(s, c);
		s->sm.ops->del_proc(s->sm.impl, (uint32_t)child);
		return;
	}
	c->state = SP_RUNTIME;
	if (s->native && native_fork(s->native, child, &pp->np, &c->np))
		native_rescan(s, c);
	/* As of the fork: an exec after it, read later, still forgets it. */
	c->classified_ns = time_ns;
	s->st.processes++;
	log_debug("pid %d (%s): forked by %d, %s %s like its parent", child, c->f.comm, parent,
		  c->rt->title, c->f.version);
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;
	const struct tp_event *ev = data;
	if (size < sizeof(*ev))
		return 0;
	switch (ev->kind) {
	case TP_EV_SAMPLE:
		if (wire_unpack(data, size, s->unpacked))
			return 0; /* malformed: cannot happen unless the ABI drifted */
		return on_sample(s, s->unpacked, sizeof(*s->unpacked)) == -ENOMEM ? -ENOMEM : 0;
	case TP_EV_SWITCH_IN: {
		const struct tp_switch_ev *sw = data;
		if (size >= sizeof(*sw) && sw->in_ns >= sw->out_ns)
			came_back(s, sw->tid, sw->out_ns, sw->in_ns);
		break;
	}
	case TP_EV_CODE: {
		struct sproc *p = sproc_get(s, (pid_t)ev->pid);
		s->st.codes_described++;
		if (p && p->state == SP_RUNTIME && p->rt->describe(p->rp, data, size) == -ENOMEM)
			return -ENOMEM;
		break;
	}
	case TP_EV_DISCOVER:
		discover(s, (pid_t)ev->pid);
		break;
	case TP_EV_FORK:
		forked(s, (pid_t)ev->pid, (pid_t)ev->ppid, ev->time_ns);
		break;
	case TP_EV_UNMAPPED: {
		/* Code mapped since its maps were read (a library loader maps
		 * several pieces in a row): read them again once the events
		 * waiting now are handled, once however many came. */
		struct sproc *p = sproc_get(s, (pid_t)ev->pid);
		if (p && p->state == SP_RUNTIME && !p->exited_ns)
			p->rescan = s->rescans = true;
		break;
	}
	case TP_EV_EXEC: {
		/* What we knew describes the old program, unless we looked at
		 * the process after the exec (a young process is re-examined on
		 * a timer, and may have been classified before this event was
		 * read). Forget it, in BPF too, so the next sample asks again. */
		struct sproc *p = sproc_get(s, (pid_t)ev->pid);
		if (p && p->classified_ns < ev->time_ns) {
			log_debug(
			    "pid %d: exec %.3f ms after it was classified (state %d): forgotten",
			    p->pid, (ev->time_ns - p->classified_ns) / 1e6, p->state);
			s->sm.ops->del_proc(s->sm.impl, ev->pid);
			sproc_drop(s, p);
		}
		break;
	}
	case TP_EV_EXIT: {
		struct sproc *p = sproc_get(s, (pid_t)ev->pid);
		if (p && !p->exited_ns) {
			/* Samples taken just before the exit may still be in the
			 * ring behind this event: keep the symbols a little. */
			p->exited_ns = clock_ns(CLOCK_MONOTONIC);
		}
		if (p && p->state == SP_RUNTIME)
			account_early(s, p);
		else
			s->sm.ops->take_unknown(s->sm.impl, ev->pid, NULL);
		break;
	}
	}
	return 0;
}

int session_new(const struct session_opts *o, struct session **out, char *err, size_t errlen)
{
	struct session *s = calloc(1, sizeof(*s));
	int ret;
	if (!s || !(s->unpacked = malloc(sizeof(*s->unpacked))) || !(s->prof = profile_new())) {
		if (s)
			free(s->unpacked);
		free(s);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->opts = *o;
	if (o->events)
		profile_keep_events(s->prof, PROFILE_EVENTS_MAX);
	s->budget.limit = o->max_memory ? o->max_memory : BUDGET_DEFAULT;
	bool caches = true;
	for (size_t i = 0; runtimes[i]; i++)
		caches &= (s->caches[i] = runtimes[i]->cache_new()) != NULL;
	if (!caches) {
		for (size_t i = 0; runtimes[i]; i++)
			runtimes[i]->cache_free(s->caches[i]);
		profile_free(s->prof);
		free(s->unpacked);
		free(s);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	struct sampler_opts bo = {
	    .system_wide = o->system_wide,
	    .kernel_stacks = o->kernel_stacks,
	    .follow_children = o->follow_children,
	    .native = o->native != SESSION_NATIVE_NONE,
	    .offcpu = o->mode != PROF_MODE_CPU,
	    .rate_hz = o->rate_hz,
	};
	profile_set_mode(s->prof, o->mode);
	ret = (o->open_sampler ? o->open_sampler : bpfrun_sampler_open)(&bo, on_event, s, &s->sm,
									err, errlen);
	if (ret) {
		session_free(s);
		return ret;
	}
	if (o->native != SESSION_NATIVE_NONE && s->sm.ops->put_table) {
		s->native = native_new(&s->sm, &s->budget);
		s->nsyms = nativesym_new();
		if (s->nsyms)
			nativesym_set_budget(s->nsyms, &s->budget);
		if (!s->native || !s->nsyms) {
			session_free(s);
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		char why[128];
		if (!o->no_debuginfod && !(s->dinfod = dinfod_new(why, sizeof(why))))
			log_debug("no debug files from debuginfod: %s", why);
		nativesym_set_debuginfod(s->nsyms, s->dinfod);
	}
	struct stacks_opts so = {
	    .filtered = o->native == SESSION_NATIVE_FILTERED,
	    .sm = o->kernel_stacks ? &s->sm : NULL,
	    .tasks = o->async,
	};
	if (!(s->stacks = stacks_new(&so, s->prof, s->nsyms))) {
		session_free(s);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void session_free(struct session *s)
{
	if (!s)
		return;
	struct sproc *p, *tmp;
	HASH_ITER(hh, s->procs, p, tmp)
	sproc_drop(s, p);
	native_free(s->native);
	stacks_free(s->stacks);
	nativesym_free(s->nsyms);
	dinfod_free(s->dinfod);
	if (s->sm.ops)
		s->sm.ops->free(s->sm.impl);
	for (size_t i = 0; runtimes[i]; i++)
		runtimes[i]->cache_free(s->caches[i]);
	profile_free(s->prof);
	HASH_FREE_ALL(s->away, a, (void)0);
	free(s->unpacked);
	free(s->task_smp);
	free(s);
}

int session_add_pid(struct session *s, pid_t pid, bool require_python, char *err, size_t errlen)
{
	struct sproc *p = sproc_get(s, pid);
	int ret = s->sm.ops->add_target(s->sm.impl, (uint32_t)pid);
	if (ret) {
		snprintf(err, errlen, "pid %d: cannot add it to the BPF targets: %s", pid,
			 strerror(-ret));
		return ret;
	}
	if (!require_python)
		return 0;
	if (!p && !(p = sproc_new(s, pid)))
		return -ENOMEM;
	ret = classify(s, p, true, err, errlen);
	return ret == -EAGAIN ? 0 : ret;
}

/* System-wide: every process that exists now is classified before the
 * first sample; later ones announce themselves. */
static void scan_proc(struct session *s)
{
	char msg[512];
	pid_t *pids;
	size_t n;
	if (procfs_pids(&pids, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		if (pids[i] == getpid() || sproc_get(s, pids[i]))
			continue;
		struct sproc *p = sproc_new(s, pids[i]);
		if (p)
			classify(s, p, false, msg, sizeof(msg));
	}
	free(pids);
}

/* Threads asleep when a wall recording starts (doc/design/off-cpu.md,
 * "Threads asleep at the start"). BPF takes a thread's stack as it leaves the
 * CPU, so one asleep since before the start would be seen only once it woke:
 * a server's idle workers, perhaps never. Each such thread of a process known
 * at the start gets the stack BPF would have taken: its Python frames read
 * from its memory, its native ones unwound from the registers it entered the
 * kernel with, its kernel ones as the kernel keeps them (snap_threads); and
 * BPF learns when it left (set_away), so that its return comes as any
 * other's. Nothing is stopped: a thread whose CPU time moved while it was
 * read is left out, and BPF sees it leave the CPU again. */
int session_start(struct session *s, char *err, size_t errlen)
{
	/* Now rather than at the first kernel frame, which would stop the
	 * ring's reader while it fills; in a thread, so that sampling starts
	 * without waiting for it. */
	if (s->opts.kernel_stacks)
		stacks_start_ksyms(s->stacks);
	if (s->opts.system_wide)
		scan_proc(s);
	/* Here, after `record -- CMD` forked CMD, which keeps its priority;
	 * this thread only (a Linux nice value is per thread), and threads it
	 * starts later. Without CAP_SYS_NICE the priority stays as it was. */
	errno = 0;
	int cur = getpriority(PRIO_PROCESS, 0);
	if (!errno && s->opts.nice < cur) {
		if (setpriority(PRIO_PROCESS, 0, s->opts.nice))
			log_debug("cannot take nice %d (%s): reading samples at nice %d",
				  s->opts.nice, strerror(errno), cur);
		else
			log_debug("reading samples at nice %d", s->opts.nice);
	}
	struct asleep_pre *pre;
	size_t npre;
	asleep_before(s, &pre, &npre);
	s->start_ns = clock_ns(CLOCK_MONOTONIC);
	profile_set_timing(s->prof, sample_period_ns(s), clock_ns(CLOCK_REALTIME), 0);
	int ret = s->sm.ops->start(s->sm.impl, err, errlen);
	if (asleep_after(s, pre, npre, !ret) == -ENOMEM && !ret) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
	}
	return ret;
}

int session_add_descendants(struct session *s, pid_t pid)
{
	char msg[512];
	int found = 0;
	/* Twice: a process forked by one that the first pass had not made a
	 * target yet is seen by the second; later forks, by BPF. */
	for (int pass = 0; pass < 2; pass++) {
		pid_t *pids;
		size_t n;
		int ret = procfs_pids(&pids, &n);
		if (ret)
			return ret;
		struct procfs_status *st = calloc(n ? n : 1, sizeof(*st));
		if (!st) {
			free(pids);
			return -ENOMEM;
		}
		for (size_t i = 0; i < n; i++)
			procfs_status(pids[i], &st[i]); /* gone: zeroed, no parent */
		/* Until no process is added: a child may be listed before its parent. */
		for (bool more = true; more;) {
			more = false;
			for (size_t i = 0; i < n; i++) {
				struct sproc *pp = sproc_get(s, st[i].ppid);
				if (!st[i].ppid || pids[i] == getpid() || sproc_get(s, pids[i]) ||
				    (st[i].ppid != pid && !pp))
					continue;
				if (s->sm.ops->add_target(s->sm.impl, (uint32_t)pids[i]))
					continue;
				struct sproc *p = sproc_new(s, pids[i]);
				if (!p)
					continue;
				classify(s, p, false, msg, sizeof(msg));
				found++;
				more = true;
			}
		}
		free(st);
		free(pids);
	}
	return found;
}

void session_stop(struct session *s)
{
	if (s->stop_ns)
		return;
	if (s->sm.ops->stop)
		s->sm.ops->stop(s->sm.impl);
	s->stop_ns = clock_ns(CLOCK_MONOTONIC);
}

/* Re-examines young processes that were not Python yet, and forgets
 * exited ones once their last samples had time to arrive. */
static void housekeeping(struct session *s)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	struct sproc *p, *tmp;
	char err[512];
	HASH_ITER(hh, s->procs, p, tmp)
	{
		/* Exited: its last samples had two seconds to arrive. */
		if (p->exited_ns && now - p->exited_ns > 2000000000ULL) {
			/* BPF removed it at the exit; this removes what a late
			 * event may have put back. */
			s->sm.ops->del_proc(s->sm.impl, (uint32_t)p->pid);
			s->sm.ops->take_unknown(s->sm.impl, (uint32_t)p->pid, NULL);
			sproc_drop(s, p);
		} else if (p->state == SP_PENDING && !p->exited_ns && now >= p->next_look_ns) {
			classify(s, p, false, err, sizeof(err));
			/* Not Python yet: looked at again 10 ms on, then 20, 40,
			 * up to 320 ms, not at every poll (up to a hundred a
			 * second at 10 kHz): each look reads four files of
			 * /proc, and a busy host starts hundreds of processes a
			 * second. A Python one's loader maps libpython within
			 * milliseconds of its exec. */
			p->look_ms = p->look_ms
					 ? (p->look_ms < LOOK_MAX_MS ? p->look_ms * 2 : p->look_ms)
					 : LOOK_FIRST_MS;
			p->next_look_ns = now + (uint64_t)p->look_ms * 1000000;
		}
	}
}

int session_poll(struct session *s, int timeout_ms)
{
	/* Mappings left for this turn are read once the ring is: no wait. */
	int n = s->sm.ops->poll(s->sm.impl, s->rescans ? 0 : timeout_ms);
	if (n < 0 && n != -EINTR)
		return n;
	if (s->rescans) {
		struct sproc *p, *tmp;
		bool again = false;
		s->rescans = false;
		HASH_ITER(hh, s->procs, p, tmp)
		{
			if (p->rescan && p->state == SP_RUNTIME && !p->exited_ns)
				native_rescan(s, p);
			again |= p->rescan && p->state == SP_RUNTIME && !p->exited_ns;
		}
		s->rescans = again;
	}
	housekeeping(s);
	if (tasks_waiting(s, clock_ns(CLOCK_MONOTONIC)) == -ENOMEM)
		return -ENOMEM;
	/* Stopped, and the ring read: whoever is still away stays away. */
	if (s->stop_ns && n >= 0)
		end_away(s, s->stop_ns);
	profile_set_timing(s->prof, profile_period_ns(s->prof), profile_start_ns(s->prof),
			   (s->stop_ns ? s->stop_ns : clock_ns(CLOCK_MONOTONIC)) - s->start_ns);
	return 0;
}

struct profile *session_profile(struct session *s)
{
	return s->prof;
}

struct profile *session_take_profile(struct session *s)
{
	struct profile *fresh = profile_new();
	if (!fresh)
		return NULL;
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	struct profile *old = s->prof;
	profile_set_timing(old, profile_period_ns(old), profile_start_ns(old), now - s->start_ns);
	/* The next window starts now, in wall-clock time as pprof wants. */
	profile_set_timing(fresh, profile_period_ns(old),
			   profile_start_ns(old) + (now - s->start_ns), 0);
	profile_set_mode(fresh, profile_mode(old));
	if (s->opts.events)
		profile_keep_events(fresh, PROFILE_EVENTS_MAX);
	away_cut(s, old, fresh, now);
	s->start_ns = now;
	s->prof = fresh;
	stacks_set_profile(s->stacks, fresh);
	return old;
}

void session_stats(struct session *s, struct session_stats *st)
{
	uint64_t c[TP_STAT__COUNT];
	struct stacks_counts sc;
	/* What the session counts as it goes, then what its parts say now. */
	*st = s->st;
	stacks_get_counts(s->stacks, &sc);
	st->bad_frames = sc.bad_frames;
	st->freed_frames = sc.freed_frames;
	st->snapped_codes = sc.snapped_codes;
	st->no_python = sc.no_frame;
	st->merge_failures = sc.merge_failures;
	st->native_new_code = sc.native_new_code;
	st->native_jit = sc.native_jit;
	st->native_nowhere = sc.native_nowhere;
	st->truncated = sc.truncated;
	st->task_reads += sc.task_reads;
	st->task_read_failures += sc.task_read_failures;
	st->task_read_ms = (sc.task_read_ns + s->task_look_ns) / 1000000;
	memcpy(st->walk_errors, sc.walk_errors, sizeof(st->walk_errors));
	memcpy(st->native_errors, sc.native_errors, sizeof(st->native_errors));
	if (!s->sm.ops->stats(s->sm.impl, c)) {
		st->lost_ring = c[TP_STAT_RING_FULL];
		st->bpf_samples = c[TP_STAT_SAMPLES];
		st->codes_undescribed = c[TP_STAT_CODES_UNDESCRIBED];
		st->offcpu_missed = c[TP_STAT_SWITCH_IN_MISSED];
		st->lost_unknown = c[TP_STAT_UNKNOWN_PROC] + s->dropped;
		uint64_t early = st->lost_early + s->early_dropped;
		/* The early counts come from the same samples, read later. */
		st->unrecognised =
		    c[TP_STAT_UNKNOWN_PROC] > early ? c[TP_STAT_UNKNOWN_PROC] - early : 0;
	}
	st->lost_gone = s->dropped + s->early_dropped;
	st->lost = st->lost_ring + st->lost_gone;
	if (s->native) {
		struct native_stats ns;
		native_get_stats(s->native, &ns);
		st->native_files = ns.files;
		st->native_files_failed = ns.files_failed;
		st->native_table_bytes = ns.table_bytes;
		st->native_rules = ns.rules;
		st->native_build_ms = ns.build_ns / 1000000;
		st->native_fds = ns.fds;
		st->native_maps_capped = ns.maps_capped;
		st->native_builds_capped = ns.builds_capped;
		st->native_over_budget = ns.files_over_budget;
		st->native_scans_partial = ns.scans_partial;
	}
	if (s->dinfod) {
		struct dinfod_stats ds;
		dinfod_get_stats(s->dinfod, &ds);
		st->debuginfod_asked = ds.asked;
		st->debuginfod_found = ds.found;
		st->debuginfod_missing = ds.missing;
	}
	if (s->nsyms) {
		size_t files;
		nativesym_counts(s->nsyms, &files, &st->symbol_bytes);
		nativesym_limited(s->nsyms, &st->symbols_cut, &st->symbols_over_budget);
	}
	st->code_bytes = 0;
	st->lines_shared = 0;
	struct sproc *p, *tmp;
	HASH_ITER(hh, s->procs, p, tmp)
	{
		uint64_t snapped, shared;
		size_t bytes;
		if (!p->rt)
			continue;
		p->rt->counts(p->rp, &snapped, &bytes, &shared);
		st->code_bytes += bytes;
		st->lines_shared += shared;
	}
	st->memory_limit = s->budget.limit;
	st->memory_used = __atomic_load_n(&s->budget.used, __ATOMIC_RELAXED);
	st->memory_peak = __atomic_load_n(&s->budget.peak, __ATOMIC_RELAXED);
	st->memory_refused = __atomic_load_n(&s->budget.refused, __ATOMIC_RELAXED);
}

unsigned int session_live_targets(struct session *s)
{
	unsigned int n = 0;
	struct sproc *p, *tmp;
	HASH_ITER(hh, s->procs, p, tmp)
	{
		/* EPERM: alive, but another user's (a non-root taipan with
		 * CAP_SYS_PTRACE may profile it). */
		struct procfs_status ps;
		if (p->state != SP_RUNTIME || p->exited_ns || (kill(p->pid, 0) && errno != EPERM))
			continue;
		/* A zombie has exited: its exit may predate the tracepoints. */
		if (!procfs_status(p->pid, &ps) && (ps.state == 'Z' || ps.state == 'X'))
			continue;
		n++;
	}
	return n;
}
