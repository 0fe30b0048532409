/* session.c - events from the ring buffer become stacks in the profile.
 *
 * Samples are symbolized as they arrive, not at the end, so that processes
 * that exit during the recording keep their names (doc/DESIGN.md decision 6).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
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
#include "core/nwalk.h"
#include "profile/merge.h"
#include "profile/nativesym.h"
#include "profile/ksyms.h"
#include "util/log.h"
#include "proc/procfs.h"
#include "cpython/pyproc.h"
#include "cpython/pythreads.h"
#include "cpython/pywalk.h"
#include "core/session.h"
#include "cpython/symbolize.h"
#include "core/walkerr.h"
#include "util/budget.h"
#include "util/clock.h"

/* How long an unclassified young process is re-examined: its loader may not
 * have mapped libpython yet when it is first seen. */
#define YOUNG_MS 3000

enum sproc_state { SP_PENDING, SP_PYTHON, SP_OTHER, SP_EXITED };

/* A BPF frame already turned into a profile frame id: a stack's frames are
 * mostly the ones of the stacks before it, and naming one costs a line-table
 * decode and three string lookups. */
struct fcache_ent {
	uint64_t code, ident, aux;
	uint32_t pos;
	uint32_t id;	/* in the profile of epoch */
	uint64_t epoch; /* 0: empty */
};
#define FCACHE_SIZE 1024 /* per sampled process, allocated at its first sample */

/* The same for native addresses, one for the session: a file's link-time
 * address (and whether it was the sampled one, looked up as is, or a return
 * address, looked up a byte before) -> frame id and what the merge needs to
 * know of it. Keyed by the file, not the process, so that every process of
 * one interpreter, short-lived ones above all, shares what was named. */
struct ncache_ent {
	uint64_t file; /* native_file_id(); 0: empty */
	uint64_t key;  /* link-time address << 1 | sampled */
	uint32_t id;
	uint8_t kind; /* enum merge_nkind */
	uint64_t epoch;
};
#define NCACHE_SIZE 16384

struct sproc {
	UT_hash_handle hh;
	pid_t pid;
	enum sproc_state state;
	struct pyproc pp;
	struct procfs_cgroup cg; /* its cgroup path and container id */
	struct symbolizer *sz;
	struct fcache_ent *fcache;
	struct pythreads *threads; /* its threads' Python names */
	struct native_proc np;	   /* its executable mappings (native unwinding) */
	uint64_t classified_ns;	   /* CLOCK_MONOTONIC, like the BPF events' time_ns */
	uint64_t exited_ns;
	bool warned;
	bool rescan; /* code was mapped: read its mappings again after this poll */
};

struct session {
	struct session_opts opts;
	struct sampler sm; /* the BPF programs, or a test's fake */
	struct profile *prof;
	struct ksyms *ksyms;
	struct sproc *procs;
	struct pyproc_cache *cache;
	struct native *native;	   /* NULL: native unwinding off */
	struct nativesym *nsyms;   /* names of native frames */
	struct ncache_ent *ncache; /* NCACHE_SIZE entries, or NULL: no cache */
	struct session_stats st;
	uint32_t *ids;		     /* scratch: frame ids of one stack */
	int gend[TP_MAX_FRAMES + 1]; /* scratch: where each eval loop's Python frames end */
	struct merge_step steps[MERGE_STEPS_MAX(TP_USTACK_MAX, TP_MAX_FRAMES)]; /* scratch */
	size_t ids_cap;
	uint64_t start_ns;
	uint64_t dropped;	/* samples of processes user space no longer knows */
	uint64_t early_dropped; /* early samples the profile had no room for */
	uint64_t stop_ns;	/* when sampling stopped, 0 while it runs */
	uint64_t epoch;		/* of s->prof: frame ids cached before another are void */
	bool rescans;		/* some process's rescan is due */
	bool ksyms_failed;
	int ksyms_errno;
	/* /proc/kallsyms is read by a thread of its own from session_start
	 * (ksyms_reader); the first kernel frame takes its table if done. */
	pthread_t ksyms_thread;
	bool bg_reading;	/* the thread was started and not joined */
	struct ksyms *bg_ksyms; /* its table, the thread's until joined */
	int bg_errno;
	bool first_sample_seen;
	/* The kernel names kernel addresses itself (sampler_ops.kernel_names)
	 * as they are first seen, instead of /proc/kallsyms being read. */
	bool bpf_ksyms;
	struct kname *knames;
	struct away *away; /* threads off the CPU, by tid */
	/* What is kept of the targets (tables, symbol indexes, code
	 * objects), under one limit (--max-memory). */
	struct budget budget;
};

/* A thread off the CPU (--mode wall, off-cpu): the sample its stack went
 * into, with a count of 0 until the thread runs again (doc/DESIGN.md,
 * "Off-CPU time"). */
struct away {
	UT_hash_handle hh;
	uint32_t tid;
	uint64_t out_ns;  /* when it left: its TP_EV_SWITCH_IN names it by this */
	uint64_t from_ns; /* what the current profile has not weighed yet: from here */
	uint64_t ran_ns;  /* a cpu-clock sample of it on the CPU since, at this time: it is
			   * back, its return lost; 0: none */
	size_t index;	  /* its sample in s->prof */
};

/* A kernel address named by the kernel; name NULL: no symbol. */
struct kname {
	uint64_t addr;
	char *name;
	UT_hash_handle hh;
};

static struct sproc *sproc_get(struct session *s, pid_t pid)
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
	symbolizer_free(p->sz);
	pythreads_free(p->threads);
	free(p->fcache);
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
}

/* Whether a Python process passes the system-wide filters. */
static bool wanted(const struct session *s, const struct sproc *p)
{
	if (!s->opts.system_wide)
		return true;
	if (s->opts.comms) {
		bool hit = false;
		for (const char *const *c = s->opts.comms; *c && !hit; c++)
			hit = !strcmp(*c, p->pp.comm);
		if (!hit)
			return false;
	}
	if (s->opts.cgroup && !procfs_cgroup_within(p->cg.path, s->opts.cgroup))
		return false;
	return true;
}

static int marker(struct session *s, const char *text);

/* Why an off-CPU stack's thread was away, as its leaf: a flame graph shows
 * it above the kernel frames where it waited. */
static const char *const state_leaf[TP_TS__COUNT] = {
    [TP_TS_RUNNING] = "[running]",
    [TP_TS_RUNNABLE] = "[runnable]",
    [TP_TS_SLEEPING] = "[sleeping]",
    [TP_TS_BLOCKED] = "[blocked]",
};

/* Samples of a process taken before it was recognised are in the profile
 * as one marker frame, labelled like the process: lost, but not hidden; so
 * is its threads' time off the CPU then (--mode wall, off-cpu), under the
 * marker and the leaf of each reason. */
static void account_early(struct session *s, struct sproc *p)
{
	struct tp_unknown u;
	int id, leaf;
	if (s->sm.ops->take_unknown(s->sm.impl, (uint32_t)p->pid, &u) ||
	    (id = marker(s, "[before taipan recognised the process]")) < 0)
		return;
	uint32_t frames[2] = {(uint32_t)id};
	struct prof_labels lb = {
	    .pid = (uint32_t)p->pid,
	    .tid = (uint32_t)p->pid,
	    .ns_pid = p->pp.ns_pid,
	    .thread_name = p->pp.comm,
	    .comm = p->pp.comm,
	    .python_version = p->pp.version,
	    .cgroup = p->cg.path,
	    .container_id = p->cg.container,
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
		if (!u.stretches[st] || (leaf = marker(s, state_leaf[st])) < 0)
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
static void mark_not_python(struct session *s, pid_t pid)
{
	struct tp_proc marker = {.kind = TP_PROC_NOT_PYTHON};
	int ret = s->sm.ops->set_proc(s->sm.impl, (uint32_t)pid, &marker);
	if (ret)
		log_debug("pid %d: cannot mark it as not Python in BPF: %s; BPF keeps "
			  "announcing it",
			  pid, strerror(-ret));
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
		ret = pyproc_inspect_cached(s->cache, p->pid, &p->pp, msg, sizeof(msg));
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
	if (!ret)
		procfs_cgroup(p->pid, &p->cg); /* none when it fails: "" */
	if (!ret && !wanted(s, p)) {
		p->state = SP_OTHER;
		mark_not_python(s, p->pid);
		return 0;
	}
	if (!ret) {
		p->sz = symbolizer_new(&p->pp);
		if (!p->sz)
			return -ENOMEM;
		symbolizer_set_budget(p->sz, &s->budget);
		ret = s->sm.ops->set_proc(s->sm.impl, (uint32_t)p->pid, &p->pp.tp);
		if (ret) {
			snprintf(err, errlen, "pid %d: cannot register with BPF: %s", p->pid,
				 strerror(-ret));
			return ret;
		}
		p->state = SP_PYTHON;
		s->st.processes++;
		/* After its Python walks start: a file's first table can take
		 * a while to build (a large static interpreter), and a short
		 * process must not lose its Python frames meanwhile. Samples
		 * before it end their native part with [native: unknown code]. */
		native_rescan(s, p);
		account_early(s, p);
		log_debug("pid %d (%s): Python %s (version from %s, offsets from %s), %s", p->pid,
			  p->pp.comm, p->pp.version, p->pp.version_source, p->pp.layout_source,
			  p->pp.binary);
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
	mark_not_python(s, p->pid);
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
	if (p && p->state == SP_PYTHON) {
		/* BPF forgot it (evicted, or an exec we have not read yet): tell
		 * it again, and account for what it sampled meanwhile. */
		int ret = s->sm.ops->set_proc(s->sm.impl, (uint32_t)pid, &p->pp.tp);
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

static int ensure_ids(struct session *s, size_t n)
{
	if (n <= s->ids_cap)
		return 0;
	size_t cap = s->ids_cap ? s->ids_cap : 256;
	while (cap < n)
		cap *= 2;
	uint32_t *v = realloc(s->ids, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	s->ids = v;
	s->ids_cap = cap;
	return 0;
}

static int marker(struct session *s, const char *text)
{
	struct prof_frame f = {.name = text, .kind = PROF_FRAME_MARKER};
	return profile_intern_frame(s->prof, &f);
}

static void load_ksyms(struct session *s);

static void *ksyms_reader(void *arg)
{
	struct session *s = arg;
	s->bg_ksyms = ksyms_load(NULL);
	s->bg_errno = s->bg_ksyms ? 0 : errno;
	return NULL;
}

/* Starts reading the kernel's symbols in a thread: reading /proc/kallsyms
 * costs tens of milliseconds of CPU, most of it in the kernel's own
 * formatting, which neither the start of sampling nor the reader of the ring
 * has to wait for. Reads them here if no thread can be started. */
static void start_ksyms(struct session *s)
{
	if (s->ksyms || s->ksyms_failed || s->bg_reading)
		return;
	s->bg_reading = !pthread_create(&s->ksyms_thread, NULL, ksyms_reader, s);
	if (!s->bg_reading)
		load_ksyms(s);
}

/* Waits for the thread and takes its table (nothing else reads one while
 * it runs). It runs at the priority taipan started with, below the reader's
 * (session_start raises only the reader's): classifying the first processes
 * comes first, and a wait here is at most what reading the table here would
 * take. */
static void take_bg_ksyms(struct session *s)
{
	if (!s->bg_reading)
		return;
	pthread_join(s->ksyms_thread, NULL);
	s->bg_reading = false;
	s->ksyms = s->bg_ksyms;
	s->ksyms_errno = s->bg_errno;
	s->bg_ksyms = NULL;
}

/* The kernel's symbols, once read, saying so if they cannot be. */
static void load_ksyms(struct session *s)
{
	if (s->ksyms || s->ksyms_failed)
		return;
	take_bg_ksyms(s);
	if (!s->ksyms && !s->ksyms_errno) { /* no thread was started */
		s->ksyms = ksyms_load(NULL);
		s->ksyms_errno = s->ksyms ? 0 : errno;
	}
	if (s->ksyms)
		return;
	s->ksyms_failed = true;
	if (s->ksyms_errno == EPERM)
		log_warn("kernel symbol addresses in /proc/kallsyms are hidden from "
			 "taipan (it needs CAP_SYSLOG): kernel frames stay addresses");
	else
		log_warn("cannot read kernel symbols (/proc/kallsyms): kernel "
			 "frames stay addresses");
}

static void free_knames(struct session *s)
{
	struct kname *k, *tmp;
	HASH_ITER(hh, s->knames, k, tmp)
	{
		HASH_DEL(s->knames, k);
		free(k->name);
		free(k);
	}
}

/* Has the kernel name those of addr[0 .. n) that it has not named yet, in
 * one run. If it cannot, /proc/kallsyms names them from now on. */
static void name_kernel_addrs(struct session *s, const __u64 *addr, uint32_t n)
{
	uint64_t want[TP_KSYM_BATCH];
	char names[TP_KSYM_BATCH][TP_KSYM_LEN]; /* 16 KiB */
	uint32_t nwant = 0;
	if (!s->bpf_ksyms)
		return;
	for (uint32_t i = 0; i < n && nwant < TP_KSYM_BATCH; i++) {
		struct kname *k;
		HASH_FIND(hh, s->knames, &addr[i], sizeof(addr[i]), k);
		bool dup = k != NULL;
		for (uint32_t j = 0; j < nwant && !dup; j++)
			dup = want[j] == addr[i];
		if (!dup)
			want[nwant++] = addr[i];
	}
	if (!nwant)
		return;
	int ret = s->sm.ops->kernel_names(s->sm.impl, want, nwant, names);
	if (ret) {
		log_debug("the kernel cannot name kernel addresses (%s): reading /proc/kallsyms",
			  strerror(-ret));
		s->bpf_ksyms = false;
		free_knames(s);
		return;
	}
	for (uint32_t i = 0; i < nwant; i++) {
		struct kname *k = calloc(1, sizeof(*k));
		if (!k)
			return; /* named later, or an address */
		k->addr = want[i];
		/* "%ps" gives "0x..." for no symbol, and " [module]" after a
		 * module's symbol: the module is not part of the name, as with
		 * /proc/kallsyms. */
		if (strncmp(names[i], "0x", 2) && names[i][0]) {
			names[i][strcspn(names[i], " ")] = '\0';
			k->name = strdup(names[i]);
		}
		HASH_ADD(hh, s->knames, addr, sizeof(k->addr), k);
	}
}

static int kernel_frame(struct session *s, uint64_t addr)
{
	char buf[64];
	struct prof_frame f = {
	    .kind = PROF_FRAME_KERNEL, .module = "[kernel.kallsyms]", .addr = addr};
	const char *name = NULL;
	if (s->bpf_ksyms) {
		struct kname *k;
		HASH_FIND(hh, s->knames, &addr, sizeof(addr), k);
		name = k ? k->name : NULL;
	} else {
		load_ksyms(s);
		name = s->ksyms ? ksyms_lookup(s->ksyms, addr, NULL) : NULL;
	}
	if (!name) {
		snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)addr);
		name = buf;
	}
	f.name = name;
	return profile_intern_frame(s->prof, &f);
}

/* What python_frame() returns for a frame that stacks leave out. */
#define FRAME_SKIP INT_MAX

/* The profile frame id of Python frame bf of p, FRAME_SKIP, or a negative
 * errno. */
static int python_frame(struct session *s, struct sproc *p, const struct tp_frame *bf)
{
	struct fcache_ent *e = NULL;
	if (!p->fcache)
		p->fcache = calloc(FCACHE_SIZE, sizeof(*p->fcache)); /* none: no cache */
	if (p->fcache) {
		uint64_t h =
		    (bf->code >> 4) ^ ((uint64_t)bf->pos * 0x9e3779b97f4a7c15ULL) ^ bf->aux;
		e = &p->fcache[(h ^ (h >> 29)) & (FCACHE_SIZE - 1)];
		if (e->epoch == s->epoch && e->code == bf->code && e->ident == bf->ident &&
		    e->pos == bf->pos && e->aux == bf->aux)
			return (int)e->id;
	}
	struct prof_frame f;
	uint64_t snapped = symbolizer_snapshots_used(p->sz);
	int err = symbolizer_frame(p->sz, bf, &f);
	s->st.snapped_codes += symbolizer_snapshots_used(p->sz) - snapped;
	bool ok = !err || err == SYMBOLIZER_SKIP;
	if (err == -ESTALE)
		s->st.freed_frames++;
	else if (err < 0)
		s->st.bad_frames++;
	int id = err == SYMBOLIZER_SKIP ? FRAME_SKIP : profile_intern_frame(s->prof, &f);
	/* Not kept: frames that failed (counted each time), and frames whose
	 * identity BPF could not read (nothing tells a reused address). */
	if (id >= 0 && e && ok && bf->ident) {
		*e = (struct fcache_ent){.code = bf->code,
					 .ident = bf->ident,
					 .aux = bf->aux,
					 .pos = bf->pos,
					 .id = (uint32_t)id,
					 .epoch = s->epoch};
	}
	return id;
}

/* The profile frame id of native address addr of p, and its enum
 * merge_nkind in *kind. sampled: the instruction the sample interrupted, not
 * a return address. */
static int native_frame(struct session *s, struct sproc *p, uint64_t addr, bool sampled,
			uint8_t *kind)
{
	const struct native_map *m = native_find(&p->np, addr - !sampled);
	struct ncache_ent *e = NULL;
	uint64_t file = m && m->file ? native_file_id(m->file) : 0;
	uint64_t key = (addr - (m ? m->bias : 0)) << 1 | sampled;
	if (!s->ncache)
		s->ncache = calloc(NCACHE_SIZE, sizeof(*s->ncache)); /* none: no cache */
	if (s->ncache && file) {
		uint64_t h = (key ^ file * 0xff51afd7ed558ccdULL) * 0x9e3779b97f4a7c15ULL;
		e = &s->ncache[(h >> 40) & (NCACHE_SIZE - 1)];
		if (e->epoch == s->epoch && e->key == key && e->file == file) {
			*kind = e->kind;
			return (int)e->id;
		}
	}
	char buf[320];
	struct prof_frame f = {.kind = PROF_FRAME_NATIVE, .addr = addr, .module = "[unknown]"};
	*kind = MERGE_NK_OTHER;
	snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)addr);
	f.name = buf;
	if (m && m->file) {
		char root[64], mapped[96];
		snprintf(root, sizeof(root), "/proc/%d/root", p->pid);
		/* Its descriptor, if still open; else the mapping itself. */
		const char *path = native_file_open_path(m->file);
		if (!path) {
			procfs_map_file_path(p->pid, m->start, m->end, mapped, sizeof(mapped));
			path = mapped;
		}
		struct nativesym_file nf = {
		    .path = path,
		    .root = root,
		    .pid = p->pid,
		    .module = native_file_path(m->file),
		    .dev = (uint64_t)m->dev_major << 32 | m->dev_minor,
		    .ino = m->inode,
		};
		struct nativesym_sym sym;
		/* The same function in every process, whatever its load address. */
		f.addr = addr - m->bias;
		nativesym_lookup(s->nsyms, &nf, addr - !sampled - m->bias, &sym);
		nativesym_format(&sym, buf, sizeof(buf));
		f.module = native_file_path(m->file);
		f.build_id = sym.build_id && *sym.build_id ? sym.build_id : NULL;
		*kind = merge_native_kind(sym.name, f.module, p->pp.binary, p->pp.version);
	} else if (m) {
		f.module = "[anonymous]";
	}
	int id = profile_intern_frame(s->prof, &f);
	if (id >= 0 && e)
		*e = (struct ncache_ent){
		    .file = file, .key = key, .id = (uint32_t)id, .kind = *kind, .epoch = s->epoch};
	return id;
}

static int push_marker(struct session *s, uint32_t *n, const char *text)
{
	int id = marker(s, text);
	if (id >= 0)
		s->ids[(*n)++] = (uint32_t)id;
	return id < 0 ? id : 0;
}

/* Pushes the Python frames smp->frames[from .. to), root first (from > to
 * is walked down: frames are innermost first). */
static int push_python(struct session *s, struct sproc *p, const struct tp_sample *smp, uint32_t *n,
		       int root, int leaf)
{
	for (int i = root; i >= leaf; i--) {
		int id = python_frame(s, p, &smp->frames[i]);
		if (id < 0)
			return id;
		if (id != FRAME_SKIP)
			s->ids[(*n)++] = (uint32_t)id;
	}
	return 0;
}

/* The Python frames with the native ones (profile/merge.h): counts that
 * cannot match give the sample a marker and both parts, never a guess.
 * *take_gil is set when a thread without the GIL is in take_gil. */
static int push_merged(struct session *s, struct sproc *p, const struct tp_sample *smp, uint32_t *n,
		       bool *take_gil)
{
	uint32_t nat = smp->nustack > TP_USTACK_MAX ? TP_USTACK_MAX : smp->nustack;
	int ids[TP_USTACK_MAX];
	uint8_t kind[TP_USTACK_MAX];
	int ret;
	for (uint32_t i = 0; i < nat; i++) {
		ids[i] = native_frame(s, p, smp->ustack[i], i == 0, &kind[i]);
		if (ids[i] < 0)
			return ids[i];
		/* A thread without the GIL in take_gil waits for it. */
		if (smp->gil == TP_GIL_RELEASED && !*take_gil &&
		    !strcmp(profile_frame(s->prof, (uint32_t)ids[i])->name, "take_gil"))
			*take_gil = true;
	}
	struct merge_in in = merge_in_sample(smp, kind, p->pp.tp.off.flags,
					     s->opts.native == SESSION_NATIVE_FILTERED);
	size_t nsteps = merge_stack(&in, s->gend, s->steps);
	for (size_t i = 0; i < nsteps; i++) {
		const struct merge_step *st = &s->steps[i];
		switch (st->op) {
		case MERGE_NATIVE:
			s->ids[(*n)++] = (uint32_t)ids[st->index];
			break;
		case MERGE_PYTHON:
			ret = python_frame(s, p, &smp->frames[st->index]);
			if (ret < 0)
				return ret;
			if (ret != FRAME_SKIP)
				s->ids[(*n)++] = (uint32_t)ret;
			break;
		case MERGE_MARK_DISAGREE:
			s->st.merge_failures++;
			if ((ret = push_marker(s, n, "[native and Python stacks disagree]")) < 0)
				return ret;
			break;
		case MERGE_MARK_NATIVE_CUT:
			if (smp->uerr < TP_UERR__COUNT &&
			    (ret = push_marker(s, n, walkerr_native_marker(smp->uerr))) < 0)
				return ret;
			break;
		}
	}
	return 0;
}

static void came_back(struct session *s, uint32_t tid, uint64_t out_ns, uint64_t in_ns);

/* The time between two cpu-clock samples of a running thread. */
static uint64_t sample_period_ns(const struct session *s)
{
	return 1000000000ULL / (s->opts.rate_hz ? s->opts.rate_hz : 1);
}

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
static void seen_running(struct session *s, uint32_t tid, uint64_t time_ns)
{
	struct away *a;
	HASH_FIND(hh, s->away, &tid, sizeof(tid), a);
	if (a && !a->ran_ns && time_ns > a->out_ns)
		a->ran_ns = time_ns;
}

/* Thread smp->tid left the CPU with the stack s->ids[0 .. n): the stack goes
 * into the profile with a count of 0, and gets its count and time when the
 * thread runs again (came_back). */
static int went_away(struct session *s, const struct tp_sample *smp, const struct prof_labels *lb,
		     uint32_t n)
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
	int ret = profile_add_at(s->prof, s->ids, n, lb, 0, 0, &a->index);
	if (ret) {
		HASH_DEL(s->away, a);
		free(a);
	}
	return ret;
}

/* Thread tid, away since out_ns, runs again at in_ns (or the recording
 * ended then): its stack weighs the time, unless the whole stretch is
 * shorter than --min-block. */
static void came_back(struct session *s, uint32_t tid, uint64_t out_ns, uint64_t in_ns)
{
	struct away *a;
	HASH_FIND(hh, s->away, &tid, sizeof(tid), a);
	if (!a || a->out_ns != out_ns)
		return; /* its stack was lost (ring full), or that of a process forgotten */
	if (in_ns - out_ns < s->opts.min_block_ns) {
		s->st.offcpu_short++;
	} else {
		s->st.offcpu++;
		profile_bump(s->prof, a->index, 1, in_ns > a->from_ns ? in_ns - a->from_ns : 0);
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
	if (p->state == SP_PYTHON)
		account_early(s, p);
}

/* The recording ended at end_ns with threads still away: each weighs the
 * time until then. */
static void end_away(struct session *s, uint64_t end_ns)
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

/* How many of the innermost kernel frames of off-CPU sample smp are the
 * tracepoint's way into the BPF program (bpf_trace_run4, the program
 * itself): the stack a user wants ends in __schedule. A negative errno when
 * out of memory. */
static int tracer_frames(struct session *s, const struct tp_sample *smp)
{
	int k = 0;
	for (; k < (int)smp->nkstack && k < 4; k++) {
		int id = kernel_frame(s, smp->kstack[k]);
		if (id < 0)
			return id;
		const char *name = profile_frame(s->prof, (uint32_t)id)->name;
		if (strncmp(name, "bpf_", 4) && strncmp(name, "__bpf_", 6) &&
		    strncmp(name, "__traceiter_", 12))
			break;
	}
	return k;
}

static int on_sample(struct session *s, const struct tp_sample *smp, size_t size)
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
	if (!p || p->state != SP_PYTHON) {
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
	bool native = (smp->flags & TP_SF_NATIVE) && s->native;
	bool take_gil = false; /* take_gil is in its native stack */
	if (ensure_ids(s, (size_t)smp->nframes + smp->nkstack + (native ? smp->nustack : 0) + 6))
		return -ENOMEM;
	uint32_t n = 0;
	int id;
	if (smp->err != TP_ERR_NONE) {
		if (smp->err < TP_ERR__COUNT)
			s->st.walk_errors[smp->err]++;
		if (walkerr_is_cut(smp->err))
			s->st.truncated++;
		/* The frames we have are the innermost; what is missing is
		 * above them, so the marker is the root. */
		if ((id = marker(s, walkerr_marker(smp->err))) < 0)
			return id;
		s->ids[n++] = (uint32_t)id;
	} else if (!smp->nframes) {
		/* A Python thread between frames: the interpreter starting or
		 * finalizing, or C code called with no Python frame running.
		 * Its native and kernel frames follow. */
		s->st.no_python++;
		if ((id = marker(s, SESSION_MARKER_NO_PYTHON)) < 0)
			return id;
		s->ids[n++] = (uint32_t)id;
	}
	if (native && smp->uerr == TP_UERR_UNMAPPED && getenv("TAIPAN_DBG_UNMAPPED")) {
		uint64_t a = smp->nustack ? smp->ustack[smp->nustack - 1] : 0;
		const struct native_map *m = native_find(&p->np, a);
		fprintf(stderr, "UNMAPPED pid %d n=%u ip=0x%llx known=%d %s\n", p->pid,
			smp->nustack, (unsigned long long)a, m != NULL,
			m && m->file ? native_file_path(m->file) : "-");
	}
	if (native) {
		if (smp->uerr < TP_UERR__COUNT)
			s->st.native_errors[smp->uerr]++;
		if ((id = push_merged(s, p, smp, &n, &take_gil)) < 0)
			return id;
	} else {
		if ((id = push_python(s, p, smp, &n, (int)smp->nframes - 1, 0)) < 0)
			return id;
	}
	name_kernel_addrs(s, smp->kstack, smp->nkstack);
	int kskip = offcpu ? tracer_frames(s, smp) : 0;
	if (kskip < 0)
		return kskip;
	for (int i = (int)smp->nkstack - 1; i >= kskip; i--) {
		if ((id = kernel_frame(s, smp->kstack[i])) < 0)
			return id;
		s->ids[n++] = (uint32_t)id;
	}
	/* The Python name of the thread, else its OS name. */
	char thread[TP_COMM_LEN + 1];
	memcpy(thread, smp->comm, TP_COMM_LEN);
	thread[TP_COMM_LEN] = 0;
	if (!p->threads)
		p->threads = pythreads_new(); /* none: OS names */
	const char *pyname =
	    pythreads_name(p->threads, &p->pp, smp->tid, smp->tstate, clock_ns(CLOCK_MONOTONIC));
	struct prof_labels lb = {
	    .pid = smp->pid,
	    .tid = smp->tid,
	    .ns_pid = p->pp.ns_pid,
	    .thread_name = pyname ? pyname : thread,
	    .comm = p->pp.comm,
	    .python_version = p->pp.version,
	    .cgroup = p->cg.path,
	    .container_id = p->cg.container,
	    .state = s->opts.mode == PROF_MODE_CPU ? PROF_STATE_NONE : PROF_STATE_RUNNING,
	    .gil = smp->gil == TP_GIL_HELD	 ? PROF_GIL_HELD
		   : smp->gil != TP_GIL_RELEASED ? PROF_GIL_NONE
		   : take_gil			 ? PROF_GIL_WAITING
						 : PROF_GIL_RELEASED,
	};
	int ret;
	if (offcpu) {
		uint8_t st = smp->state < TP_TS__COUNT ? smp->state : TP_TS_SLEEPING;
		lb.state = (uint8_t)(PROF_STATE_RUNNING + st);
		if ((ret = push_marker(s, &n, state_leaf[st])) < 0)
			return ret;
		ret = went_away(s, smp, &lb, n);
	} else {
		ret = profile_add(s->prof, s->ids, n, &lb, 1);
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
	if (!pp || pp->state != SP_PYTHON) {
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
	c->pp = pp->pp;
	c->pp.pid = child;
	if (pp->pp.ns_pid) {
		pid_t ns;
		c->pp.ns_pid = procfs_ns_pid(child, 0, &ns) ? 0 : (uint32_t)ns;
	}
	c->cg = pp->cg;
	c->sz = symbolizer_new(&c->pp);
	if (c->sz)
		symbolizer_set_budget(c->sz, &s->budget);
	if (!c->sz) {
		sproc_drop(s, c);
		s->sm.ops->del_proc(s->sm.impl, (uint32_t)child);
		return;
	}
	c->state = SP_PYTHON;
	if (s->native && native_fork(s->native, child, &pp->np, &c->np))
		native_rescan(s, c);
	/* As of the fork: an exec after it, read later, still forgets it. */
	c->classified_ns = time_ns;
	s->st.processes++;
	log_debug("pid %d (%s): forked by %d, Python %s like its parent", child, c->pp.comm, parent,
		  c->pp.version);
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;
	const struct tp_event *ev = data;
	if (size < sizeof(*ev))
		return 0;
	switch (ev->kind) {
	case TP_EV_SAMPLE:
		return on_sample(s, data, size) == -ENOMEM ? -ENOMEM : 0;
	case TP_EV_SWITCH_IN: {
		const struct tp_switch_ev *sw = data;
		if (size >= sizeof(*sw) && sw->in_ns >= sw->out_ns)
			came_back(s, sw->tid, sw->out_ns, sw->in_ns);
		break;
	}
	case TP_EV_CODE: {
		struct sproc *p = sproc_get(s, (pid_t)ev->pid);
		s->st.codes_described++;
		if (size >= sizeof(struct tp_code_ev) && p && p->state == SP_PYTHON && p->sz &&
		    symbolizer_describe(p->sz, data) == -ENOMEM)
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
		if (p && p->state == SP_PYTHON && !p->exited_ns)
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
		if (p && p->state == SP_PYTHON)
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
	if (!s || !(s->prof = profile_new())) {
		free(s);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->opts = *o;
	s->epoch = 1;
	s->budget.limit = o->max_memory ? o->max_memory : BUDGET_DEFAULT;
	s->cache = pyproc_cache_new();
	if (!s->cache) {
		profile_free(s->prof);
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
	/* A run naming no address tells whether the kernel can. */
	s->bpf_ksyms = o->kernel_stacks && s->sm.ops->kernel_names &&
		       !s->sm.ops->kernel_names(s->sm.impl, NULL, 0, NULL);
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
	nativesym_free(s->nsyms);
	free(s->ncache);
	if (s->sm.ops)
		s->sm.ops->free(s->sm.impl);
	pyproc_cache_free(s->cache);
	profile_free(s->prof);
	take_bg_ksyms(s);
	ksyms_free(s->ksyms);
	free_knames(s);
	free(s->ids);
	struct away *a, *atmp;
	HASH_ITER(hh, s->away, a, atmp)
	{
		HASH_DEL(s->away, a);
		free(a);
	}
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

/* Threads asleep when a wall recording starts (doc/DESIGN.md, "Off-CPU
 * time"). BPF takes a thread's stack as it leaves the CPU, so one asleep
 * since before the start would be seen only once it woke: a server's idle
 * workers, perhaps never. Each such thread of a process known at the start
 * gets the stack BPF would have taken: its Python frames read from its
 * memory, its native ones unwound from the registers it entered the kernel
 * with, its kernel ones as the kernel keeps them (snap_threads); and BPF
 * learns when it left (set_away), so that its return comes as any other's.
 * Nothing is stopped: a thread whose CPU time moved while it was read is
 * left out, and BPF sees it leave the CPU again. */
struct asleep_pre {
	pid_t pid;
	struct tp_thread_snap *v; /* its threads before BPF watched */
	size_t n;
};

/* include/linux/sched.h */
#define TASK_INTERRUPTIBLE 0x0001
#define TASK_UNINTERRUPTIBLE 0x0002
#define TASK_STOPPED_OR_TRACED 0x000c
#define TASK_NOLOAD 0x0400

/* Why a thread that is not running is off the CPU, as on_switch names it;
 * -1: it is running, or about to. */
static int asleep_state(const struct tp_thread_snap *t)
{
	if (t->on_cpu ||
	    !(t->state & (TASK_INTERRUPTIBLE | TASK_UNINTERRUPTIBLE | TASK_STOPPED_OR_TRACED)))
		return -1;
	if ((t->state & (TASK_UNINTERRUPTIBLE | TASK_NOLOAD)) == TASK_UNINTERRUPTIBLE)
		return TP_TS_BLOCKED;
	return TP_TS_SLEEPING;
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
static void asleep_before(struct session *s, struct asleep_pre **out, size_t *n)
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
		if (p->state != SP_PYTHON || *n == cap)
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
	int ret = pywalk_sample(&p->pp, id, t->fsbase, smp);
	if (ret)
		return ret;
	if (nw)
		nwalk_regs(nw, t->ip, t->sp, t->bp, smp);
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
	if (!p || p->state != SP_PYTHON)
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
	if (s->native && nwalk_new(&p->pp, &nw) == -ENOMEM) {
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

int session_start(struct session *s, char *err, size_t errlen)
{
	/* Now rather than at the first kernel frame, which would stop the
	 * ring's reader while it fills; in a thread, so that sampling starts
	 * without waiting for it. */
	if (s->opts.kernel_stacks && !s->bpf_ksyms)
		start_ksyms(s);
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
	for (size_t i = 0; i < npre; i++) {
		if (!ret && asleep_proc(s, &pre[i]) == -ENOMEM) {
			snprintf(err, errlen, "out of memory");
			ret = -ENOMEM;
		}
		free(pre[i].v);
	}
	free(pre);
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
		} else if (p->state == SP_PENDING && !p->exited_ns)
			classify(s, p, false, err, sizeof(err));
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
			if (p->rescan && p->state == SP_PYTHON && !p->exited_ns)
				native_rescan(s, p);
			again |= p->rescan && p->state == SP_PYTHON && !p->exited_ns;
		}
		s->rescans = again;
	}
	housekeeping(s);
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
			profile_bump(old, a->index, 1, now > a->from_ns ? now - a->from_ns : 0);
		a->index = idx;
		a->from_ns = now;
	}
	s->start_ns = now;
	s->prof = fresh;
	s->epoch++;
	return old;
}

void session_stats(struct session *s, struct session_stats *st)
{
	uint64_t c[TP_STAT__COUNT];
	if (!s->sm.ops->stats(s->sm.impl, c)) {
		s->st.lost_ring = c[TP_STAT_RING_FULL];
		s->st.bpf_samples = c[TP_STAT_SAMPLES];
		s->st.codes_undescribed = c[TP_STAT_CODES_UNDESCRIBED];
		s->st.offcpu_missed = c[TP_STAT_SWITCH_IN_MISSED];
		s->st.lost_unknown = c[TP_STAT_UNKNOWN_PROC] + s->dropped;
		uint64_t early = s->st.lost_early + s->early_dropped;
		/* The early counts come from the same samples, read later. */
		s->st.unrecognised =
		    c[TP_STAT_UNKNOWN_PROC] > early ? c[TP_STAT_UNKNOWN_PROC] - early : 0;
	}
	s->st.lost = s->st.lost_ring + s->dropped + s->early_dropped;
	if (s->native) {
		struct native_stats ns;
		native_get_stats(s->native, &ns);
		s->st.native_files = ns.files;
		s->st.native_files_failed = ns.files_failed;
		s->st.native_table_bytes = ns.table_bytes;
		s->st.native_build_ms = ns.build_ns / 1000000;
		s->st.native_fds = ns.fds;
		s->st.native_maps_capped = ns.maps_capped;
		s->st.native_builds_capped = ns.builds_capped;
		s->st.native_over_budget = ns.files_over_budget;
		s->st.native_scans_partial = ns.scans_partial;
	}
	if (s->nsyms) {
		size_t files;
		nativesym_counts(s->nsyms, &files, &s->st.symbol_bytes);
		nativesym_limited(s->nsyms, &s->st.symbols_cut, &s->st.symbols_over_budget);
	}
	s->st.code_bytes = 0;
	s->st.lines_shared = 0;
	struct sproc *p, *tmp;
	HASH_ITER(hh, s->procs, p, tmp)
	{
		if (!p->sz)
			continue;
		s->st.code_bytes += symbolizer_bytes(p->sz);
		s->st.lines_shared += symbolizer_lines_shared(p->sz);
	}
	s->st.memory_limit = s->budget.limit;
	s->st.memory_used = __atomic_load_n(&s->budget.used, __ATOMIC_RELAXED);
	s->st.memory_peak = __atomic_load_n(&s->budget.peak, __ATOMIC_RELAXED);
	s->st.memory_refused = __atomic_load_n(&s->budget.refused, __ATOMIC_RELAXED);
	*st = s->st;
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
		if (p->state != SP_PYTHON || p->exited_ns || (kill(p->pid, 0) && errno != EPERM))
			continue;
		/* A zombie has exited: its exit may predate the tracepoints. */
		if (!procfs_status(p->pid, &ps) && (ps.state == 'Z' || ps.state == 'X'))
			continue;
		n++;
	}
	return n;
}
