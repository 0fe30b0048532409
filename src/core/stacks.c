/* stacks.c - a sample of a process becomes a stack of named frames and its
 * labels (stacks.h). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "core/native.h"
#include "core/nwalk.h"
#include "core/stacks.h"
#include "core/walkerr.h"
#include "proc/perfmap.h"
#include "proc/procfs.h"
#include "profile/ksyms.h"
#include "profile/merge.h"
#include "profile/nativesym.h"
#include "util/clock.h"
#include "util/hashfree.h"
#include "util/log.h"

/* An interpreted frame already turned into a profile frame id: a stack's
 * frames are mostly the ones of the stacks before it, and naming one costs a
 * line-table decode and three string lookups. */
struct fcache_ent {
	uint64_t code, ident, aux;
	uint32_t pos;
	uint32_t id;	/* in the profile of epoch */
	uint64_t epoch; /* 0: empty */
};
#define FCACHE_SIZE 1024 /* per sampled process, allocated at its first sample */

struct stacks_fcache {
	struct fcache_ent e[FCACHE_SIZE];
};

/* The same for native addresses, one for all processes: a file's link-time
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

/* A kernel address named by the kernel; name NULL: no symbol. */
struct kname {
	uint64_t addr;
	char *name;
	UT_hash_handle hh;
};

/* What interp_frame() returns for a frame that stacks leave out. */
#define FRAME_SKIP INT_MAX

struct stacks {
	struct stacks_opts o;
	struct profile *prof;
	uint64_t epoch; /* of prof: frame ids cached before another are void */
	struct nativesym *nsyms;
	struct ncache_ent *ncache;  /* NCACHE_SIZE entries, or NULL: no cache */
	uint32_t *ids;		    /* the stack being built */
	struct stacks_origin *from; /* where each of its frames comes from */
	size_t ids_cap;
	int gend[TP_MAX_FRAMES + 1]; /* scratch: where each eval loop's frames end */
	struct merge_step steps[MERGE_STEPS_MAX(TP_USTACK_MAX, TP_MAX_FRAMES)]; /* scratch */
	struct stacks_counts c;
	char thread[TP_COMM_LEN + 1]; /* the OS name of the stack's thread */
	/* --async: the sample's chain of tasks, root first, and where it goes:
	 * above interpreted frame task_idx */
	const char *task[STACKS_TASKS_MAX];
	size_t ntask;
	uint32_t task_idx;
	bool preset; /* stacks_preset_tasks() set them for the next build */
	/* Kernel names: the kernel's own (bpf_ksyms, as addresses are first
	 * seen), else /proc/kallsyms, read by a thread of its own from
	 * stacks_start_ksyms(); the first kernel frame takes its table. */
	bool bpf_ksyms;
	struct kname *knames;
	struct ksyms *ksyms;
	bool ksyms_failed;
	int ksyms_errno;
	pthread_t ksyms_thread;
	bool bg_reading;	/* the thread was started and not joined */
	struct ksyms *bg_ksyms; /* its table, the thread's until joined */
	int bg_errno;
};

/* Why an off-CPU stack's thread was away, as its leaf. */
static const char *const state_leaf[TP_TS__COUNT] = {
    [TP_TS_RUNNING] = "[running]",
    [TP_TS_RUNNABLE] = "[runnable]",
    [TP_TS_SLEEPING] = "[sleeping]",
    [TP_TS_BLOCKED] = "[blocked]",
};

const char *stacks_state_leaf(unsigned int state)
{
	return state < TP_TS__COUNT ? state_leaf[state] : state_leaf[TP_TS_SLEEPING];
}

struct stacks *stacks_new(const struct stacks_opts *o, struct profile *prof,
			  struct nativesym *nsyms)
{
	struct stacks *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->o = *o;
	st->prof = prof;
	st->epoch = 1;
	st->nsyms = nsyms;
	/* A run naming no address tells whether the kernel can. */
	st->bpf_ksyms = o->sm && o->sm->ops->kernel_names &&
			!o->sm->ops->kernel_names(o->sm->impl, NULL, 0, NULL);
	return st;
}

static void free_knames(struct stacks *st)
{
	HASH_FREE_ALL(st->knames, k, free(k->name));
}

static void take_bg_ksyms(struct stacks *st);

void stacks_free(struct stacks *st)
{
	if (!st)
		return;
	take_bg_ksyms(st);
	ksyms_free(st->ksyms);
	free_knames(st);
	free(st->ncache);
	free(st->ids);
	free(st->from);
	free(st);
}

void stacks_set_profile(struct stacks *st, struct profile *prof)
{
	st->prof = prof;
	st->epoch++;
}

void stacks_fcache_free(struct stacks_fcache *c)
{
	free(c);
}

void stacks_get_counts(const struct stacks *st, struct stacks_counts *out)
{
	*out = st->c;
}

static int ensure_ids(struct stacks *st, size_t n)
{
	if (n <= st->ids_cap)
		return 0;
	size_t cap = st->ids_cap ? st->ids_cap : 256;
	while (cap < n)
		cap *= 2;
	uint32_t *v = realloc(st->ids, cap * sizeof(*v));
	if (v)
		st->ids = v;
	struct stacks_origin *o = v ? realloc(st->from, cap * sizeof(*o)) : NULL;
	if (!o)
		return -ENOMEM;
	st->from = o;
	st->ids_cap = cap;
	return 0;
}

/* Appends frame id, from from[index]. */
static void push(struct stacks *st, uint32_t *n, int id, enum stacks_from from, uint32_t index)
{
	st->from[*n] = (struct stacks_origin){.from = (uint8_t)from, .index = index};
	st->ids[(*n)++] = (uint32_t)id;
}

const struct stacks_origin *stacks_origins(const struct stacks *st)
{
	return st->from;
}

static int push_mark(struct stacks *st, uint32_t *n, const char *text, enum stacks_from from);

int stacks_marker(struct stacks *st, const char *text)
{
	struct prof_frame f = {.name = text, .kind = PROF_FRAME_MARKER};
	return profile_intern_frame(st->prof, &f);
}

/* Appends marker text, from from. */
static int push_mark(struct stacks *st, uint32_t *n, const char *text, enum stacks_from from)
{
	int id = stacks_marker(st, text);
	if (id >= 0)
		push(st, n, id, from, 0);
	return id < 0 ? id : 0;
}

int stacks_push_marker(struct stacks *st, uint32_t *n, const char *text)
{
	return push_mark(st, n, text, STACKS_FROM_CALLER);
}

/* --- kernel frames ------------------------------------------------------------ */

static void *ksyms_reader(void *arg)
{
	struct stacks *st = arg;
	st->bg_ksyms = ksyms_load(NULL);
	st->bg_errno = st->bg_ksyms ? 0 : errno;
	return NULL;
}

static void load_ksyms(struct stacks *st);

/* Reading /proc/kallsyms costs tens of milliseconds of CPU, most of it in
 * the kernel's own formatting, which neither the start of sampling nor the
 * reader of the ring has to wait for. Reads them here if no thread can be
 * started. */
void stacks_start_ksyms(struct stacks *st)
{
	if (st->bpf_ksyms || st->ksyms || st->ksyms_failed || st->bg_reading)
		return;
	st->bg_reading = !pthread_create(&st->ksyms_thread, NULL, ksyms_reader, st);
	if (!st->bg_reading)
		load_ksyms(st);
}

/* Waits for the thread and takes its table (nothing else reads one while
 * it runs). It runs at the priority taipan started with, below the reader's
 * (session_start raises only the reader's): classifying the first processes
 * comes first, and a wait here is at most what reading the table here would
 * take. */
static void take_bg_ksyms(struct stacks *st)
{
	if (!st->bg_reading)
		return;
	pthread_join(st->ksyms_thread, NULL);
	st->bg_reading = false;
	st->ksyms = st->bg_ksyms;
	st->ksyms_errno = st->bg_errno;
	st->bg_ksyms = NULL;
}

/* The kernel's symbols, once read, saying so if they cannot be. */
static void load_ksyms(struct stacks *st)
{
	if (st->ksyms || st->ksyms_failed)
		return;
	take_bg_ksyms(st);
	if (!st->ksyms && !st->ksyms_errno) { /* no thread was started */
		st->ksyms = ksyms_load(NULL);
		st->ksyms_errno = st->ksyms ? 0 : errno;
	}
	if (st->ksyms)
		return;
	st->ksyms_failed = true;
	if (st->ksyms_errno == EPERM)
		log_warn("kernel symbol addresses in /proc/kallsyms are hidden from "
			 "taipan (it needs CAP_SYSLOG): kernel frames stay addresses");
	else
		log_warn("cannot read kernel symbols (/proc/kallsyms): kernel "
			 "frames stay addresses");
}

/* Has the kernel name those of addr[0 .. n) that it has not named yet, in
 * one run. If it cannot, /proc/kallsyms names them from now on. */
static void name_kernel_addrs(struct stacks *st, const __u64 *addr, uint32_t n)
{
	uint64_t want[TP_KSYM_BATCH];
	char names[TP_KSYM_BATCH][TP_KSYM_LEN]; /* 16 KiB */
	uint32_t nwant = 0;
	if (!st->bpf_ksyms)
		return;
	for (uint32_t i = 0; i < n && nwant < TP_KSYM_BATCH; i++) {
		struct kname *k;
		HASH_FIND(hh, st->knames, &addr[i], sizeof(addr[i]), k);
		bool dup = k != NULL;
		for (uint32_t j = 0; j < nwant && !dup; j++)
			dup = want[j] == addr[i];
		if (!dup)
			want[nwant++] = addr[i];
	}
	if (!nwant)
		return;
	int ret = st->o.sm->ops->kernel_names(st->o.sm->impl, want, nwant, names);
	if (ret) {
		log_debug("the kernel cannot name kernel addresses (%s): reading /proc/kallsyms",
			  strerror(-ret));
		st->bpf_ksyms = false;
		free_knames(st);
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
		HASH_ADD(hh, st->knames, addr, sizeof(k->addr), k);
	}
}

static int kernel_frame(struct stacks *st, uint64_t addr)
{
	char buf[64];
	struct prof_frame f = {
	    .kind = PROF_FRAME_KERNEL, .module = "[kernel.kallsyms]", .addr = addr};
	const char *name = NULL;
	if (st->bpf_ksyms) {
		struct kname *k;
		HASH_FIND(hh, st->knames, &addr, sizeof(addr), k);
		name = k ? k->name : NULL;
	} else {
		load_ksyms(st);
		name = st->ksyms ? ksyms_lookup(st->ksyms, addr, NULL) : NULL;
	}
	if (!name) {
		snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)addr);
		name = buf;
	}
	f.name = name;
	return profile_intern_frame(st->prof, &f);
}

/* How many of the innermost kernel frames of off-CPU sample smp are the
 * tracepoint's way into the BPF program (bpf_trace_run4, the program
 * itself): the stack a user wants ends in __schedule. A negative errno when
 * out of memory. */
static int tracer_frames(struct stacks *st, const struct tp_sample *smp)
{
	int k = 0;
	for (; k < (int)smp->nkstack && k < 4; k++) {
		int id = kernel_frame(st, smp->kstack[k]);
		if (id < 0)
			return id;
		const char *name = profile_frame(st->prof, (uint32_t)id)->name;
		if (strncmp(name, "bpf_", 4) && strncmp(name, "__bpf_", 6) &&
		    strncmp(name, "__traceiter_", 12))
			break;
	}
	return k;
}

/* --- interpreted and native frames --------------------------------------------- */

/* The profile frame id of interpreted frame bf of p, FRAME_SKIP, or a
 * negative errno. */
static int interp_frame(struct stacks *st, const struct stacks_proc *p, const struct tp_frame *bf)
{
	struct fcache_ent *e = NULL;
	if (p->fcache && !*p->fcache)
		*p->fcache = calloc(1, sizeof(**p->fcache)); /* none: no cache */
	if (p->fcache && *p->fcache) {
		uint64_t h =
		    (bf->code >> 4) ^ ((uint64_t)bf->pos * 0x9e3779b97f4a7c15ULL) ^ bf->aux;
		e = &(*p->fcache)->e[(h ^ (h >> 29)) & (FCACHE_SIZE - 1)];
		if (e->epoch == st->epoch && e->code == bf->code && e->ident == bf->ident &&
		    e->pos == bf->pos && e->aux == bf->aux)
			return (int)e->id;
	}
	struct prof_frame f;
	uint64_t snapped, snapped_after, shared;
	size_t bytes;
	p->rt->counts(p->rp, &snapped, &bytes, &shared);
	int err = p->rt->frame(p->rp, bf, &f);
	if (f.kind == PROF_FRAME_INTERP)
		f.runtime = p->rt->name;
	p->rt->counts(p->rp, &snapped_after, &bytes, &shared);
	st->c.snapped_codes += snapped_after - snapped;
	bool ok = !err || err == RT_FRAME_SKIP;
	if (err == -ESTALE)
		st->c.freed_frames++;
	else if (err < 0)
		st->c.bad_frames++;
	int id = err == RT_FRAME_SKIP ? FRAME_SKIP : profile_intern_frame(st->prof, &f);
	/* Not kept: frames that failed (counted each time), and frames whose
	 * identity BPF could not read (nothing tells a reused address). */
	if (id >= 0 && e && ok && bf->ident) {
		*e = (struct fcache_ent){.code = bf->code,
					 .ident = bf->ident,
					 .aux = bf->aux,
					 .pos = bf->pos,
					 .id = (uint32_t)id,
					 .epoch = st->epoch};
	}
	return id;
}

/* The profile frame id of native address addr of p named through dump's
 * walker, and its enum merge_nkind in *kind. */
static int walker_frame(struct stacks *st, const struct stacks_proc *p, uint64_t addr, bool sampled,
			uint8_t *kind, bool *anon)
{
	struct nwalk_sym sym;
	nwalk_name(p->nw, addr, sampled, &sym);
	*anon = sym.anon;
	struct prof_frame f = {.kind = PROF_FRAME_NATIVE,
			       .addr = addr,
			       .name = sym.name,
			       .module = sym.module,
			       .build_id = sym.build_id[0] ? sym.build_id : NULL};
	*kind = sym.kind;
	return profile_intern_frame(st->prof, &f);
}

/* The profile frame id of native address addr of p, its enum merge_nkind
 * in *kind, and in *anon whether it lies in anonymous memory (JIT code, if
 * anything). sampled: the instruction the sample interrupted, not a return
 * address. */
static int native_frame(struct stacks *st, const struct stacks_proc *p, uint64_t addr, bool sampled,
			uint8_t *kind, bool *anon)
{
	if (p->nw)
		return walker_frame(st, p, addr, sampled, kind, anon);
	/* A debug file arrived (debuginfod): what was named without it is
	 * named again. */
	if (st->nsyms && nativesym_changed(st->nsyms))
		st->epoch++;
	const struct native_map *m = p->np ? native_find(p->np, addr - !sampled) : NULL;
	*anon = m && !m->file;
	struct ncache_ent *e = NULL;
	uint64_t file = m && m->file ? native_file_id(m->file) : 0;
	uint64_t key = (addr - (m ? m->bias : 0)) << 1 | sampled;
	if (!st->ncache)
		st->ncache = calloc(NCACHE_SIZE, sizeof(*st->ncache)); /* none: no cache */
	if (st->ncache && file) {
		uint64_t h = (key ^ file * 0xff51afd7ed558ccdULL) * 0x9e3779b97f4a7c15ULL;
		e = &st->ncache[(h >> 40) & (NCACHE_SIZE - 1)];
		if (e->epoch == st->epoch && e->key == key && e->file == file) {
			*kind = e->kind;
			return (int)e->id;
		}
	}
	char buf[320];
	struct prof_frame f = {.kind = PROF_FRAME_NATIVE, .addr = addr, .module = "[unknown]"};
	*kind = MERGE_NK_OTHER;
	snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)addr);
	f.name = buf;
	if (m && m->file && st->nsyms) {
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
		const char *fn = nativesym_frame(st->nsyms, &nf, addr - !sampled - m->bias, buf,
						 sizeof(buf), &f);
		/* The same function in every process, whatever its load address. */
		f.addr = addr - m->bias;
		*kind = (uint8_t)p->rt->native_kind(p->rp, fn, f.module, addr - !sampled - m->bias);
	} else {
		if (m)
			f.module = "[anonymous]";
		/* JIT code: named by the process's perf map, if it has one. */
		const char *jit =
		    p->np && p->np->perfmap
			? perfmap_find(p->np->perfmap, addr - !sampled, clock_ns(CLOCK_MONOTONIC))
			: NULL;
		if (jit) {
			f.name = jit;
			*kind = (uint8_t)p->rt->native_kind(p->rp, jit, f.module, 0);
		}
	}
	int id = profile_intern_frame(st->prof, &f);
	if (id >= 0 && e)
		*e = (struct ncache_ent){.file = file,
					 .key = key,
					 .id = (uint32_t)id,
					 .kind = *kind,
					 .epoch = st->epoch};
	return id;
}

/* Pushes the interpreted frames smp->frames[leaf .. root], root first
 * (frames are innermost first). */
/* --async: before interpreted frame i, the coroutine a task runs, that
 * task and the tasks that await it, the outermost first. */
static int push_tasks(struct stacks *st, uint32_t *n, uint32_t i)
{
	if (!st->ntask || i != st->task_idx)
		return 0;
	for (size_t k = 0; k < st->ntask; k++) {
		char name[96];
		snprintf(name, sizeof(name), "[task %s]", st->task[k]);
		int id = stacks_marker(st, name);
		if (id < 0)
			return id;
		push(st, n, id, STACKS_FROM_TASK, (uint32_t)k);
	}
	return 0;
}

static int push_interp(struct stacks *st, const struct stacks_proc *p, const struct tp_sample *smp,
		       uint32_t *n, int root, int leaf)
{
	for (int i = root; i >= leaf; i--) {
		int id = push_tasks(st, n, (uint32_t)i);
		if (id < 0 || (id = interp_frame(st, p, &smp->frames[i])) < 0)
			return id;
		if (id != FRAME_SKIP)
			push(st, n, id, STACKS_FROM_INTERP, (uint32_t)i);
	}
	return 0;
}

/* The marker of a native walk that stopped short: its error's, said more
 * precisely where user space knows more of the last frame it reached. Code
 * BPF had no mapping for is code taipan had not read yet if a mapping holds
 * it now (mapped since: dlopen, a JIT; or left for the next turn of a scan
 * of a process that maps many files), else a return address into nothing;
 * a frame pointer lost in
 * code without CFI names that code's module. Counts the first two. */
static const char *native_cut_marker(struct stacks *st, const struct stacks_proc *p,
				     const struct tp_sample *smp, char *buf, size_t len)
{
	uint32_t nat = smp->nustack > TP_USTACK_MAX ? TP_USTACK_MAX : smp->nustack;
	if (!nat || (smp->uerr != TP_UERR_UNMAPPED && smp->uerr != TP_UERR_NOFP) ||
	    (!p->np && !p->nw))
		return walkerr_native_marker(smp->uerr);
	uint32_t k = nat - 1;
	bool exact = !k || ((smp->exact[k >> 6] >> (k & 63)) & 1);
	uint64_t at = smp->ustack[k] - !exact;
	const char *path; /* NULL: no mapping holds it; "": anonymous */
	if (p->nw) {
		path = nwalk_mapping_at(p->nw, at);
	} else {
		const struct native_map *m = native_find(p->np, at);
		path = !m ? NULL : m->file ? native_file_path(m->file) : "";
		if (!m && native_pending(p->np, at))
			path = ""; /* mapped, left for the next turn */
	}
	if (smp->uerr == TP_UERR_UNMAPPED) {
		if (path) {
			st->c.native_new_code++;
			return STACKS_MARKER_NEW_CODE;
		}
		st->c.native_nowhere++;
		return STACKS_MARKER_NOWHERE;
	}
	if (!path || !*path || *path == '[')
		return STACKS_MARKER_NOFP_JIT;
	const char *base = strrchr(path, '/');
	snprintf(buf, len, STACKS_NOFP_IN_FORMAT, base ? base + 1 : path);
	return buf;
}

/* The interpreted frames with the native ones (profile/merge.h): counts
 * that cannot match give the sample a marker and both parts, never a
 * guess. *lock_wait is set when a thread without the interpreter's lock is
 * in the runtime's function that waits for it (runtime_ops.lock_wait_function). */
static int push_merged(struct stacks *st, const struct stacks_proc *p, const struct tp_sample *smp,
		       uint32_t *n, bool *lock_wait)
{
	uint32_t nat = smp->nustack > TP_USTACK_MAX ? TP_USTACK_MAX : smp->nustack;
	int ids[TP_USTACK_MAX];
	uint8_t kind[TP_USTACK_MAX];
	char buf[160];
	int ret;
	/* The first frame, innermost first, in anonymous memory: the
	 * runtime's JIT code where it has one (runtime_ops.jit_marker). */
	uint32_t jit = nat;
	for (uint32_t i = 0; i < nat; i++) {
		bool exact = i == 0 || ((smp->exact[i >> 6] >> (i & 63)) & 1), anon;
		ids[i] = native_frame(st, p, smp->ustack[i], exact, &kind[i], &anon);
		if (ids[i] < 0)
			return ids[i];
		if (anon && jit == nat)
			jit = i;
		/* A thread without the lock in the function that takes it
		 * waits for it. */
		if (smp->gil == TP_GIL_RELEASED && !*lock_wait && p->rt->lock_wait_function &&
		    !strcmp(profile_frame(st->prof, (uint32_t)ids[i])->name,
			    p->rt->lock_wait_function))
			*lock_wait = true;
	}
	merge_anchor_kinds(smp, kind);
	struct merge_in in =
	    merge_in_sample(smp, kind, p->rt->interp_frames(p->rp), st->o.filtered);
	/* JIT code has no unwind table: what the walk found past it is not
	 * the thread's. The stack is cut there, under the JIT's marker. */
	if (!p->rt->jit_marker || !p->rt->jit_code(p->rp))
		jit = nat;
	if (jit < nat) {
		st->c.native_jit++;
		in.nnative = jit;
		in.nat_cut = true;
	}
	size_t nsteps = merge_stack(&in, st->gend, st->steps);
	for (size_t i = 0; i < nsteps; i++) {
		const struct merge_step *step = &st->steps[i];
		switch (step->op) {
		case MERGE_NATIVE:
			push(st, n, ids[step->index], STACKS_FROM_NATIVE, step->index);
			break;
		case MERGE_PYTHON:
			if ((ret = push_tasks(st, n, step->index)) < 0)
				return ret;
			ret = interp_frame(st, p, &smp->frames[step->index]);
			if (ret < 0)
				return ret;
			if (ret != FRAME_SKIP)
				push(st, n, ret, STACKS_FROM_INTERP, step->index);
			break;
		case MERGE_MARK_DISAGREE:
			st->c.merge_failures++;
			if ((ret = push_mark(st, n, p->rt->disagree_marker, STACKS_FROM_DISAGREE)) <
			    0)
				return ret;
			break;
		case MERGE_MARK_NATIVE_CUT:
			if (jit < nat) {
				if ((ret = push_mark(st, n, p->rt->jit_marker, STACKS_FROM_JIT)) <
				    0)
					return ret;
			} else if (smp->uerr < TP_UERR__COUNT &&
				   (ret = push_mark(st, n,
						    native_cut_marker(st, p, smp, buf, sizeof(buf)),
						    STACKS_FROM_NATIVE_CUT)) < 0)
				return ret;
			break;
		}
	}
	return 0;
}

void stacks_preset_tasks(struct stacks *st, const char *const *names, size_t n, uint32_t idx)
{
	st->ntask = n < STACKS_TASKS_MAX ? n : STACKS_TASKS_MAX;
	memcpy(st->task, names, st->ntask * sizeof(*names));
	st->task_idx = idx;
	st->preset = true;
}

int stacks_build(struct stacks *st, const struct stacks_proc *p, const struct tp_sample *smp,
		 bool with_native, const uint32_t **ids, uint32_t *nids, struct prof_labels *lb)
{
	bool native = with_native && (smp->flags & TP_SF_NATIVE);
	bool offcpu = smp->flags & TP_SF_OFFCPU;
	if (!st->preset)
		st->ntask = 0;
	if (!st->preset && st->o.tasks && p->rt->task_chain && smp->task_frame &&
	    smp->task_idx < smp->nframes) {
		uint64_t read_ns = 0;
		bool failed = false;
		st->ntask = p->rt->task_chain(p->rp, smp->task_frame, clock_ns(CLOCK_MONOTONIC),
					      st->task, STACKS_TASKS_MAX, &read_ns, &failed);
		st->task_idx = smp->task_idx;
		if (read_ns) {
			st->c.task_reads++;
			st->c.task_read_failures += failed;
			st->c.task_read_ns += read_ns;
		}
	}
	st->preset = false;
	bool lock_wait = false; /* it waits for the interpreter's lock */
	/* Room for every frame, the markers, and the caller's leaf. */
	if (ensure_ids(st, (size_t)smp->nframes + smp->nkstack + (native ? smp->nustack : 0) + 6 +
			       st->ntask))
		return -ENOMEM;
	uint32_t n = 0;
	int id;
	if (smp->err != TP_ERR_NONE) {
		if (smp->err < TP_ERR__COUNT)
			st->c.walk_errors[smp->err]++;
		if (walkerr_is_cut(smp->err))
			st->c.truncated++;
		/* The frames we have are the innermost; what is missing is
		 * above them, so the marker is the root. */
		if ((id = push_mark(st, &n, walkerr_marker(smp->err), STACKS_FROM_WALK_ERR)) < 0)
			return id;
	} else if (!smp->nframes) {
		/* A thread between frames: the interpreter starting or
		 * finalizing, or C code called with no interpreted frame
		 * running. Its native and kernel frames follow. */
		st->c.no_frame++;
		if ((id = push_mark(st, &n, p->rt->no_frame_marker, STACKS_FROM_NO_FRAME)) < 0)
			return id;
	}
	if (native) {
		if (smp->uerr < TP_UERR__COUNT)
			st->c.native_errors[smp->uerr]++;
		if ((id = push_merged(st, p, smp, &n, &lock_wait)) < 0)
			return id;
	} else {
		if ((id = push_interp(st, p, smp, &n, (int)smp->nframes - 1, 0)) < 0)
			return id;
	}
	name_kernel_addrs(st, smp->kstack, smp->nkstack);
	int kskip = offcpu ? tracer_frames(st, smp) : 0;
	if (kskip < 0)
		return kskip;
	for (int i = (int)smp->nkstack - 1; i >= kskip; i--) {
		if ((id = kernel_frame(st, smp->kstack[i])) < 0)
			return id;
		push(st, &n, id, STACKS_FROM_KERNEL, (uint32_t)i);
	}
	/* The name the program gave the thread, else its OS name. */
	memcpy(st->thread, smp->comm, TP_COMM_LEN);
	st->thread[TP_COMM_LEN] = 0;
	const char *named =
	    p->rt->thread_name(p->rp, smp->tid, smp->tstate, clock_ns(CLOCK_MONOTONIC));
	*lb = (struct prof_labels){
	    .pid = smp->pid,
	    .tid = smp->tid,
	    .thread_name = named ? named : st->thread,
	    .ns_pid = p->f->ns_pid,
	    .comm = p->f->comm,
	    .runtime = p->rt->name,
	    .runtime_version = p->f->version,
	    .version_alias = p->rt->version_label,
	    .lock_name = p->rt->lock_label,
	    .cgroup = p->cgroup,
	    .container_id = p->container,
	    .exe = p->exe,
	    .task = st->ntask ? st->task[st->ntask - 1] : NULL,
	    .lock = smp->gil == TP_GIL_HELD	  ? PROF_LOCK_HELD
		    : smp->gil == TP_GIL_WAITING  ? PROF_LOCK_WAITING
		    : smp->gil != TP_GIL_RELEASED ? PROF_LOCK_NONE
		    : lock_wait			  ? PROF_LOCK_WAITING
						  : PROF_LOCK_RELEASED,
	};
	*ids = st->ids;
	*nids = n;
	return 0;
}
