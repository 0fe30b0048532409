/* nwalk.c - native stacks of a live process's threads for `taipan dump`
 * (nwalk.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/nwalk.h"
#include "profile/merge.h"
#include "profile/nativesym.h"
#include "proc/procmaps.h"
#include "proc/memread.h"
#include "proc/mapfile.h"
#include "proc/perfmap.h"
#include "proc/unwtab.h"
#include "util/clock.h"
#include "util/log.h"

/* The most of a thread's stack copied while it is stopped; the native walk
 * reads what lies beyond from the running process. */
#define STACK_COPY_MAX (1 << 20)

/* A mapped file and, once a stack touched it, its table. */
struct nw_file {
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	bool vdso;
	int built;	      /* 0: not yet; 1: words hold its table; -1: none (frame pointers) */
	const char *module;   /* the path as the process names it (in pm) */
	int fd;		      /* open (proc/mapfile.h), or -1: it cannot be */
	char open_path[32];   /* "/proc/self/fd/FD", or "" */
	struct tp_ufile info; /* of its table */
	uint32_t *words;      /* page index, then rows (unwtab_pack) */
};

/* What an executable mapping resolved to, lazily. */
struct nw_map {
	int file; /* index in files, -1: anonymous or unopenable, -2: not resolved */
	bool bias_known;
	uint64_t bias;
};

struct nwalk;
struct tpw_host {
	struct nwalk *nw;
	pid_t pid;
	const uint8_t *stack; /* the copy of the thread's stack from stack_lo */
	uint64_t stack_lo, stack_len;
};

/* A read of the walked thread's memory: from the copy of its stack where it
 * holds the bytes, else from the process. */
static int host_read(const struct tpw_host *h, void *dst, size_t len, uint64_t addr)
{
	if (addr >= h->stack_lo && addr - h->stack_lo <= h->stack_len &&
	    len <= h->stack_len - (addr - h->stack_lo)) {
		memcpy(dst, h->stack + (addr - h->stack_lo), len);
		return 0;
	}
	return mem_read(h->pid, addr, dst, len);
}

#define tpw_read(st, dst, len, addr) host_read(&(st)->host, (dst), (len), (addr))
#define tpw_count(st, stat) ((void)(st), (void)(stat))
#include "walk/state.h"

struct nwalk {
	pid_t pid;
	const struct runtime_ops *rt; /* the process's runtime and its data, */
	const struct rt_proc *rp;     /* for the interpreted frames and the merge */
	struct proc_maps pm;	      /* executable mappings only, sorted by start */
	uint64_t *ranges;	      /* every mapping as start, end pairs, sorted */
	size_t nall;
	uint8_t *stack; /* STACK_COPY_MAX bytes: the stopped thread's stack */
	struct nw_map *maps;
	struct nw_file *files;
	size_t nfiles;
	struct unwtab_rules rules; /* the rules of its tables' rows */
	struct nativesym *ns;
	struct tpw_state *st;
	struct tpw_anchors anchors; /* of the runtime's walk of the thread being walked */
	struct perfmap *perfmap;    /* the names of its JIT code, read when first needed */
	char root[64];
	struct nwalk_stats stats;
	uint64_t top; /* the main thread's stack top (startstack of /proc/PID/stat), 0: unknown */
	/* Threads seized that did not stop in time: their interrupt is still
	 * pending, so they are let go when they stop, or when taipan exits. */
	pid_t *stuck;
	size_t nstuck, stuck_cap;
};

static const struct map_entry *find_map(const struct nwalk *nw, uint64_t addr)
{
	size_t lo = 0, hi = nw->pm.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct map_entry *me = &nw->pm.v[mid];
		if (addr < me->start)
			hi = mid;
		else if (addr >= me->end)
			lo = mid + 1;
		else
			return me;
	}
	return NULL;
}

static void sym_file(const struct nwalk *nw, const struct nw_file *f, struct nativesym_file *nf)
{
	*nf = (struct nativesym_file){
	    .path = f->open_path,
	    .root = nw->root,
	    .pid = nw->pid,
	    .module = f->module,
	    .dev = (uint64_t)f->dev_major << 32 | f->dev_minor,
	    .ino = f->inode,
	};
}

/* The file of mapping me: shared by its mappings (device and inode). */
static int map_file(struct nwalk *nw, const struct map_entry *me)
{
	struct nw_map *m = &nw->maps[me - nw->pm.v];
	if (m->file != -2)
		return m->file;
	bool vdso = !strcmp(me->path, "[vdso]");
	m->file = -1;
	if (!vdso && (!me->inode || me->path[0] != '/'))
		return -1;
	for (size_t i = 0; i < nw->nfiles; i++) {
		const struct nw_file *f = &nw->files[i];
		if (f->vdso == vdso && f->inode == me->inode && f->dev_major == me->dev_major &&
		    f->dev_minor == me->dev_minor)
			return m->file = (int)i;
	}
	struct nw_file *f = &nw->files[nw->nfiles]; /* room for every mapping */
	*f = (struct nw_file){.inode = me->inode,
			      .dev_major = me->dev_major,
			      .dev_minor = me->dev_minor,
			      .vdso = vdso,
			      .module = me->path};
	/* As native unwinding for BPF opens it (proc/mapfile.h). */
	f->fd = mapfile_open(nw->pid, me);
	if (f->fd >= 0)
		snprintf(f->open_path, sizeof(f->open_path), "/proc/self/fd/%d", f->fd);
	else
		f->fd = -1;
	return m->file = (int)nw->nfiles++;
}

/* Builds f's table the first time a stack needs it. */
static bool file_table(struct nwalk *nw, struct nw_file *f, const struct map_entry *me)
{
	if (f->built)
		return f->built > 0;
	struct unwtab t = {0};
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
	int ret;
	f->built = -1;
	(void)me;
	int fd = f->fd >= 0 ? dup(f->fd) : -1;
	ret = fd < 0 ? -ENOENT : unwtab_build_fd(fd, &t);
	nw->stats.build_ns += clock_ns(CLOCK_MONOTONIC) - t0;
	if (ret) {
		log_debug("%s: no unwind table (%s): its frames are followed by frame pointer",
			  f->module, strerror(-ret));
		return false;
	}
	f->words = unwtab_pack(&t, &nw->rules);
	if (f->words) {
		f->info = (struct tp_ufile){.base = t.base, .npages = t.npages, .nrows = t.nrows};
		f->built = 1;
		nw->stats.tables++;
	}
	unwtab_free(&t);
	return f->built > 0;
}

/* The bias of mapping me, through the PT_LOAD that holds addr's file
 * offset (nativesym reads a file's segments once). */
static bool map_bias(struct nwalk *nw, const struct map_entry *me, uint64_t addr, uint64_t *bias)
{
	struct nw_map *m = &nw->maps[me - nw->pm.v];
	if (!m->bias_known) {
		const struct nw_file *f = &nw->files[m->file];
		struct nativesym_file nf;
		uint64_t vaddr;
		if (f->vdso) {
			m->bias = me->start;
		} else {
			sym_file(nw, f, &nf);
			if (!f->open_path[0] ||
			    nativesym_vaddr(nw->ns, &nf, addr - me->start + me->offset, &vaddr))
				return false;
			m->bias = addr - vaddr;
		}
		m->bias_known = true;
	}
	*bias = m->bias;
	return true;
}

static int nw_mapping(struct tpw_state *st, uint64_t ip, struct tp_umap *um)
{
	struct nwalk *nw = st->host.nw;
	const struct map_entry *me = find_map(nw, ip);
	if (!me)
		return -1;
	uint64_t bias = me->start - me->offset;
	*um = (struct tp_umap){.bias = bias, .flags = TP_UM_FP, .start = me->start, .end = me->end};
	int fi = map_file(nw, me);
	if (fi < 0 || !map_bias(nw, me, ip, &bias))
		return 0;
	um->bias = bias;
	if (file_table(nw, &nw->files[fi], me)) {
		um->file = (uint32_t)fi + 1;
		um->flags = 0;
	}
	return 0;
}

static struct nw_file *nw_table(struct tpw_state *st, uint32_t file)
{
	struct nwalk *nw = st->host.nw;
	return file && file <= nw->nfiles && nw->files[file - 1].built > 0 ? &nw->files[file - 1]
									   : NULL;
}

static int nw_info(struct tpw_state *st, uint32_t file, struct tp_ufile *info)
{
	struct nw_file *f = nw_table(st, file);
	if (!f)
		return -1;
	*info = f->info;
	return 0;
}

static int nw_elem(void *t, uint32_t i, __u64 *v)
{
	const struct nw_file *f = t;
	if (i >= (2 * f->info.npages + f->info.nrows + 1) / 2)
		return -1;
	*v = f->words[2 * i] | (__u64)f->words[2 * i + 1] << 32;
	return 0;
}

static const struct tp_urule *nw_rule(struct tpw_state *st, uint32_t id)
{
	const struct nwalk *nw = st->host.nw;
	return id < nw->rules.n ? &nw->rules.v[id] : NULL;
}

#define tpn_mapping(st, ip, m) nw_mapping((st), (ip), (m))
#define tpn_table(st, file) ((void *)nw_table((st), (file)))
#define tpn_file(st, file, info) nw_info((st), (file), (info))
#define tpn_elem(st, t, i, v) ((void)(st), nw_elem((t), (i), (v)))
#define tpn_rule(st, id) nw_rule((st), (id))
#include "walk/native.h"

static int by_start(const void *a, const void *b)
{
	const struct map_entry *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* The stack top of pid's main thread: startstack, field 28 of
 * /proc/PID/stat (after the command, which may hold spaces and parens).
 * 0 when it cannot be read. */
static uint64_t stack_top(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	unsigned long long v = 0;
	/* Fields 3 to 27, then startstack. */
	for (int field = 2; p && field < 28; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", &v) != 1)
		return 0;
	return v;
}

int nwalk_new(pid_t pid, const struct runtime_ops *rt, const struct rt_proc *rp, struct nwalk **out)
{
	struct nwalk *nw = calloc(1, sizeof(*nw));
	int ret;
	if (!nw)
		return -ENOMEM;
	nw->pid = pid;
	nw->top = stack_top(pid);
	nw->perfmap = perfmap_new(pid, NULL);
	if (!nw->perfmap) {
		free(nw);
		return -ENOMEM;
	}
	nw->rt = rt;
	nw->rp = rp;
	snprintf(nw->root, sizeof(nw->root), "/proc/%d/root", pid);
	ret = procmaps_read(pid, &nw->pm);
	if (ret) {
		perfmap_free(nw->perfmap);
		free(nw);
		return ret;
	}
	/* Where each thread's stack ends: the end of the mapping holding its
	 * stack pointer. */
	nw->ranges = malloc((nw->pm.n ? nw->pm.n : 1) * 2 * sizeof(*nw->ranges));
	nw->stack = malloc(STACK_COPY_MAX);
	if (!nw->ranges || !nw->stack) {
		nwalk_free(nw);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nw->pm.n; i++) {
		nw->ranges[2 * i] = nw->pm.v[i].start;
		nw->ranges[2 * i + 1] = nw->pm.v[i].end;
	}
	nw->nall = nw->pm.n;
	/* Executable mappings only. */
	size_t keep = 0;
	for (size_t i = 0; i < nw->pm.n; i++) {
		if (nw->pm.v[i].perms[2] == 'x')
			nw->pm.v[keep++] = nw->pm.v[i];
		else
			free(nw->pm.v[i].path);
	}
	nw->pm.n = keep;
	qsort(nw->pm.v, keep, sizeof(*nw->pm.v), by_start);
	nw->maps = calloc(keep ? keep : 1, sizeof(*nw->maps));
	nw->files = calloc(keep ? keep : 1, sizeof(*nw->files));
	nw->ns = nativesym_new();
	nw->st = calloc(1, sizeof(*nw->st));
	if (!nw->maps || !nw->files || !nw->ns || !nw->st) {
		nwalk_free(nw);
		return -ENOMEM;
	}
	for (size_t i = 0; i < keep; i++)
		nw->maps[i].file = -2;
	nw->st->host.nw = nw;
	nw->st->host.pid = pid;
	*out = nw;
	return 0;
}

/* The signal a stopped tracee's wait status says to give back on detach:
 * that of a signal-delivery stop; none for our interrupt (an event stop). */
static int stop_signal(int status)
{
	return status >> 16 == 0 && WSTOPSIG(status) != SIGTRAP ? WSTOPSIG(status) : 0;
}

/* Lets go of the threads that did not stop in time and have stopped since.
 * One still in the kernel cannot be detached (ptrace wants it stopped): the
 * kernel lets it go, its interrupt cancelled, when taipan exits. */
static void release_stuck(struct nwalk *nw)
{
	for (size_t i = 0; i < nw->nstuck; i++) {
		int status;
		if (waitpid(nw->stuck[i], &status, __WALL | WNOHANG) == nw->stuck[i] &&
		    WIFSTOPPED(status))
			ptrace(PTRACE_DETACH, nw->stuck[i], 0, (void *)(long)stop_signal(status));
	}
	nw->nstuck = 0;
}

void nwalk_free(struct nwalk *nw)
{
	if (!nw)
		return;
	release_stuck(nw);
	free(nw->stuck);
	for (size_t i = 0; i < nw->nfiles; i++) {
		free(nw->files[i].words);
		if (nw->files[i].fd >= 0)
			close(nw->files[i].fd);
	}
	free(nw->files);
	free(nw->maps);
	free(nw->ranges);
	free(nw->stack);
	procmaps_free(&nw->pm);
	nativesym_free(nw->ns);
	perfmap_free(nw->perfmap);
	unwtab_rules_free(&nw->rules);
	free(nw->st);
	free(nw);
}

/* Copies the stack of the stopped thread, from sp up to the end of its
 * mapping (STACK_COPY_MAX at most): the unwind, which may have to build
 * tables first, runs on the copy after the thread runs again. */
static void copy_stack(struct nwalk *nw, uint64_t sp)
{
	struct tpw_host *h = &nw->st->host;
	h->stack = nw->stack;
	h->stack_lo = sp;
	h->stack_len = 0;
	for (size_t i = 0; i < nw->nall; i++) {
		uint64_t start = nw->ranges[2 * i], end = nw->ranges[2 * i + 1];
		if (sp < start || sp >= end)
			continue;
		uint64_t len = end - sp < STACK_COPY_MAX ? end - sp : STACK_COPY_MAX;
		if (!mem_read(nw->pid, sp, nw->stack, len))
			h->stack_len = len;
		break;
	}
}

/* The native stack from the registers, into out, its frames that hold
 * anchors (NULL: none) marked. */
static void unwind(struct nwalk *nw, const struct user_regs_struct *r,
		   const struct tpw_anchors *anchors, bool main_thread, struct tp_sample *out)
{
	struct tpw_state *st = nw->st;
	st->s.time_ns = clock_ns(CLOCK_MONOTONIC);
	st->s.flags = 0;
	if (anchors)
		st->a = *anchors;
	else
		st->a.n = st->a.full = 0;
	tpn_begin(st, r->rip, r->rsp, r->rbp, r->r10, r->r11, r->r13);
	if (main_thread)
		st->u.top = nw->top;
	/* Each step unwinds at least one frame until TP_USTACK_MAX ends it. */
	for (unsigned int runs = 0; runs <= TP_USTACK_MAX && tpn_step(st); runs++)
		;
	if (!st->u.done)
		tpn_fail(st, TP_UERR_STEPS);
	memcpy(out->ustack, st->s.ustack, sizeof(out->ustack));
	memcpy(out->anchored, st->s.anchored, sizeof(out->anchored));
	memcpy(out->exact, st->s.exact, sizeof(out->exact));
	out->nustack = st->s.nustack;
	out->uerr = st->s.uerr;
	out->flags |= TP_SF_NATIVE | (st->s.flags & TP_SF_ANCHORED);
}

/* Waits for the seized and interrupted thread tid to stop, at most
 * NWALK_STOP_TIMEOUT_MS: a thread in uninterruptible sleep (waiting for a
 * vfork child to exec, in a D-state system call) stops only when it leaves
 * it, which may be never. Polls, since waitpid has no deadline; a thread
 * that can stop does so within microseconds, the first polls. Returns 1
 * with *status, 0 on timeout, or a negative errno. */
static int wait_stop(pid_t tid, int *status)
{
	uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + NWALK_STOP_TIMEOUT_MS * 1000000ULL;
	long pause_ns = 10000;
	for (;;) {
		pid_t r = waitpid(tid, status, __WALL | WNOHANG);
		if (r == tid)
			return 1;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (clock_ns(CLOCK_MONOTONIC) >= deadline)
			return 0;
		struct timespec ts = {0, pause_ns};
		nanosleep(&ts, NULL);
		if (pause_ns < 5000000)
			pause_ns *= 2;
	}
}

/* Remembers tid as seized but not stopped; -ENOMEM when it cannot. */
static int add_stuck(struct nwalk *nw, pid_t tid)
{
	if (nw->nstuck == nw->stuck_cap) {
		size_t ncap = nw->stuck_cap ? nw->stuck_cap * 2 : 8;
		pid_t *n = realloc(nw->stuck, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		nw->stuck = n;
		nw->stuck_cap = ncap;
	}
	nw->stuck[nw->nstuck++] = tid;
	return 0;
}

int nwalk_thread(struct nwalk *nw, pid_t tid, uint64_t tstate, struct tp_sample *out, char *err,
		 size_t errlen)
{
	struct user_regs_struct regs;
	struct tpw_anchors *anchors = &nw->anchors;
	int status, sig = 0, ret = 0;

	if (ptrace(PTRACE_SEIZE, tid, 0, 0)) {
		ret = -errno;
		snprintf(err, errlen, "cannot stop it to read its registers (ptrace: %s%s)",
			 strerror(errno),
			 errno == EPERM ? "; another tracer, or Yama's kernel.yama.ptrace_scope"
					: "");
		return ret;
	}
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0)) {
		ret = -errno;
		snprintf(err, errlen, "cannot stop it (ptrace: %s)", strerror(errno));
		goto detach;
	}
	ret = wait_stop(tid, &status);
	if (ret < 0) {
		snprintf(err, errlen, "cannot wait for it to stop: %s", strerror(-ret));
		goto detach;
	}
	if (ret == 0) {
		/* Still seized, its interrupt pending: it cannot be detached
		 * until it stops. The other threads go on. */
		snprintf(err, errlen,
			 "cannot stop thread %d within %d s (it is in uninterruptible sleep?)",
			 (int)tid, NWALK_STOP_TIMEOUT_MS / 1000);
		nw->stats.stuck++;
		return add_stuck(nw, tid) ? -ENOMEM : -ETIMEDOUT;
	}
	ret = 0;
	if (!WIFSTOPPED(status)) {
		snprintf(err, errlen, "it exited");
		return -ESRCH; /* nothing left to detach from */
	}
	/* A signal-delivery stop (not our interrupt): the signal is given back
	 * on detach. */
	sig = stop_signal(status);
	if (ptrace(PTRACE_GETREGS, tid, 0, &regs)) {
		ret = -errno;
		snprintf(err, errlen, "cannot read its registers (ptrace: %s)", strerror(errno));
		goto detach;
	}
	memset(out, 0, offsetof(struct tp_sample, frames));
	anchors->n = anchors->full = 0;
	if (tstate && (ret = nw->rt->walk_tstate(nw->rp, tstate, out, anchors)))
		goto detach;
	out->pid = (uint32_t)nw->pid;
	out->tid = (uint32_t)tid;
	copy_stack(nw, regs.rsp);
detach:
	ptrace(PTRACE_DETACH, tid, 0, (void *)(long)sig);
	uint64_t stop = clock_ns(CLOCK_MONOTONIC) - t0;
	if (!ret)
		unwind(nw, &regs, anchors, tid == nw->pid, out); /* the thread runs again */
	nw->stats.stopped_ns += stop;
	if (stop > nw->stats.max_stop_ns)
		nw->stats.max_stop_ns = stop;
	nw->stats.threads += !ret;
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	return ret;
}

struct tpw_anchors *nwalk_anchors(struct nwalk *nw)
{
	return &nw->anchors;
}

void nwalk_regs(struct nwalk *nw, uint64_t ip, uint64_t sp, uint64_t bp,
		const struct tpw_anchors *anchors, struct tp_sample *out)
{
	struct user_regs_struct regs = {.rip = ip, .rsp = sp, .rbp = bp};
	copy_stack(nw, sp);
	unwind(nw, &regs, anchors, false, out);
	nw->stats.threads++;
}

const char *nwalk_mapping_at(const struct nwalk *nw, uint64_t addr)
{
	const struct map_entry *me = find_map(nw, addr);
	return me ? me->path : NULL;
}

void nwalk_name(struct nwalk *nw, uint64_t addr, bool sampled, struct nwalk_sym *out)
{
	uint64_t at = addr - !sampled;
	const struct map_entry *me = find_map(nw, at);
	out->module = "[unknown]";
	out->build_id[0] = 0;
	out->kind = MERGE_NK_OTHER;
	out->anon = me && !me->path[0];
	snprintf(out->name, sizeof(out->name), "0x%llx", (unsigned long long)addr);
	int fi = me ? map_file(nw, me) : -1;
	if (fi < 0) {
		if (me)
			out->module = "[anonymous]";
		/* JIT code: named by the process's perf map, if it has one. */
		const char *jit = perfmap_find(nw->perfmap, at, clock_ns(CLOCK_MONOTONIC));
		if (jit) {
			snprintf(out->name, sizeof(out->name), "%s", jit);
			out->kind = (uint8_t)nw->rt->native_kind(nw->rp, out->name, out->module, 0);
		}
		return;
	}
	struct nw_file *f = &nw->files[fi];
	uint64_t bias;
	out->module = f->module;
	if (!map_bias(nw, me, at, &bias)) {
		snprintf(out->name, sizeof(out->name), "%s+0x%llx", f->module,
			 (unsigned long long)(at - me->start));
		return;
	}
	struct nativesym_file nf;
	struct prof_frame pf;
	sym_file(nw, f, &nf);
	const char *fn = nativesym_frame(nw->ns, &nf, at - bias, out->name, sizeof(out->name), &pf);
	snprintf(out->build_id, sizeof(out->build_id), "%s", pf.build_id ? pf.build_id : "");
	out->kind = (uint8_t)nw->rt->native_kind(nw->rp, fn, f->module, at - bias);
}

void nwalk_get_stats(const struct nwalk *nw, struct nwalk_stats *out)
{
	*out = nw->stats;
}
