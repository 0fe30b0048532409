/* runtime.c - Ruby (MRI) as a runtime of the session (core/runtime.h): a
 * process found by its libruby (rbproc.c), walked in BPF by ruby.bpf.h and
 * in user space by the same walker (ruby/walk.h), its frames named from the
 * live process (rbframes.c), cached by instruction sequence and pc.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/runtime.h"
#include "proc/memread.h"
#include "proc/procfs.h"
#include "profile/merge.h"
#include "ruby/rbframes.h"
#include "ruby/rbproc.h"
#include "util/clock.h"
#include "util/log.h"

/* What the shared walker asks of its includer: memory of the live
 * process, and counters in the state. */
struct tpw_host {
	pid_t pid;
	uint64_t stats[TP_STAT__COUNT];
};
#define tpw_read(st, dst, len, addr) mem_read((st)->host.pid, (addr), (dst), (len))
#define tpw_count(st, stat) ((st)->host.stats[(stat)]++)
#include "walk/state.h"
#include "ruby/walk.h"

/* Frames named, by instruction sequence (or method entry) and pc: a power
 * of two. Entries are never evicted, so that the names they hold live as
 * long as the process's data (runtime_ops.frame); past NAMES_MAX, frames
 * are named each time into a scratch entry. */
#define NAMES_SIZE 32768
#define NAMES_MAX (NAMES_SIZE / 2)
#define LABEL_MAX 256
#define PATH_MAX_RB 1024

struct name_ent {
	uint64_t code, aux, ident; /* code 0: empty */
	uint32_t flags;
	int err;
	int line, first_line;
	char *label, *path;
};

/* Where each method is defined ("Work#"), by the instruction sequence of
 * its frames: the blocks in it are named after it ("block in
 * Work#sorter"). A power of two; entries are replaced. */
#define OWNERS 1024
struct owner_ent {
	uint64_t iseq;
	char owner[LABEL_MAX];
};

/* Threads' names, by thread id, refreshed after THREAD_NAME_NS. */
#define TNAMES 256
#define THREAD_NAME_NS 1000000000ULL
struct tname_ent {
	uint32_t tid;
	uint64_t ec, at_ns;
	char name[64];
	bool named;
};

struct rt_proc {
	struct rbproc rb;
	struct tp_proc bpf;
	struct name_ent *names;
	size_t nnames;
	struct name_ent scratch;
	char scratch_label[LABEL_MAX], scratch_path[PATH_MAX_RB];
	struct tname_ent tnames[TNAMES];
	struct owner_ent *owners;
};

static int reader(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return mem_read(*(const pid_t *)ctx, addr, buf, len);
}

static void *cache_new(void)
{
	return calloc(1, 1); /* nothing is shared between Ruby processes yet */
}

static void cache_free(void *cache)
{
	free(cache);
}

static struct rt_proc *proc_new(const struct rbproc *rb)
{
	struct rt_proc *rp = calloc(1, sizeof(*rp));
	if (!rp)
		return NULL;
	rp->rb = *rb;
	tp_rb_proc_set(&rp->bpf, &rb->tp);
	return rp;
}

static int detect(void *cache, pid_t pid, struct rt_proc **out, char *msg, size_t msglen)
{
	(void)cache;
	struct rbproc rb;
	int ret = rbproc_inspect(pid, &rb, msg, msglen);
	if (ret)
		return ret;
	*out = proc_new(&rb);
	return *out ? 0 : -ENOMEM;
}

static int fork_proc(const struct rt_proc *parent, pid_t child, struct rt_proc **out)
{
	struct rbproc rb = parent->rb;
	rb.pid = child;
	if (rb.ns_pid) {
		pid_t ns;
		rb.ns_pid = procfs_ns_pid(child, 0, &ns) ? 0 : (uint32_t)ns;
	}
	*out = proc_new(&rb);
	return *out ? 0 : -ENOMEM;
}

static void proc_free(struct rt_proc *rp)
{
	if (!rp)
		return;
	if (rp->names)
		for (size_t i = 0; i < NAMES_SIZE; i++) {
			free(rp->names[i].label);
			free(rp->names[i].path);
		}
	free(rp->names);
	free(rp->owners);
	free(rp);
}

static const struct tp_proc *bpf_proc(const struct rt_proc *rp)
{
	return &rp->bpf;
}

static void facts(const struct rt_proc *rp, struct rt_facts *out)
{
	*out = (struct rt_facts){
	    .version = rp->rb.version,
	    .comm = rp->rb.comm,
	    .ns_pid = rp->rb.ns_pid,
	    .binary = rp->rb.lib,
	    .how = rp->rb.how,
	};
}

static void set_budget(struct rt_proc *rp, struct budget *b)
{
	(void)rp;
	(void)b;
}

static int describe(struct rt_proc *rp, const void *ev, size_t size)
{
	(void)rp;
	(void)ev;
	(void)size;
	return -ENOTSUP; /* BPF sends no code events for Ruby */
}

/* The owners' entry of instruction sequence iseq, NULL without a table. */
static struct owner_ent *owner_slot(struct rt_proc *rp, uint64_t iseq)
{
	if (!rp->owners)
		rp->owners = calloc(OWNERS, sizeof(*rp->owners)); /* none: no blocks named */
	return rp->owners ? &rp->owners[(iseq >> 4) * 0x9e3779b97f4a7c15ULL >> 54 & (OWNERS - 1)]
			  : NULL;
}

/* The label of a frame whose own is label, into out: "Owner#label" or
 * "Owner.label" when me is a method entry whose owner is named, then
 * remembered for the instruction sequence iseq (0: a C function's); a
 * block's "block in m" as "block in Owner#m" when the method it is in
 * was named so; else label itself. */
static void qualify(struct rt_proc *rp, uint64_t me, uint64_t iseq, const char *label, char *out)
{
	char owner[LABEL_MAX], sep;
	const struct rb_offsets *o = rp->rb.o;
	if (me && !rb_method_owner(o, &rp->rb.ids, rp->rb.bias, reader, &rp->rb.pid, me, owner,
				   sizeof(owner), &sep)) {
		snprintf(out, LABEL_MAX, "%.127s%c%.126s", owner, sep, label);
		struct owner_ent *e = iseq ? owner_slot(rp, iseq) : NULL;
		if (e) {
			e->iseq = iseq;
			snprintf(e->owner, sizeof(e->owner), "%.127s%c", owner, sep);
		}
		return;
	}
	const char *in = strstr(label, " in ");
	uint64_t body, local;
	if (in && iseq && !mem_read_u64_with(reader, &rp->rb.pid, iseq + o->iseq_body, &body) &&
	    !mem_read_u64_with(reader, &rp->rb.pid, body + o->body_local_iseq, &local)) {
		struct owner_ent *e = owner_slot(rp, local);
		if (e && e->iseq == local) {
			snprintf(out, LABEL_MAX, "%.*s in %.120s%.120s", (int)(in - label) & 63,
				 label, e->owner, in + 4);
			return;
		}
	}
	snprintf(out, LABEL_MAX, "%s", label);
}

/* Names frame f into e (whose strings it sets, pointing into label and
 * path when given, else allocated). */
static void name_frame(struct rt_proc *rp, const struct tp_frame *f, struct name_ent *e,
		       char *label, char *path)
{
	char lb[LABEL_MAX], pb[PATH_MAX_RB];
	char *l = label ? label : lb, *p = path ? path : pb;
	e->code = f->code;
	e->aux = f->aux;
	e->ident = f->ident;
	e->flags = f->flags;
	e->line = e->first_line = 0;
	l[0] = p[0] = 0;
	char m[LABEL_MAX];
	if (f->flags & TP_FF_RB_CFUNC) {
		/* Its method's name; where it cannot be read, a marker, and the
		 * C function's native frame under it names it. */
		if (rb_cfunc_name(rp->rb.o, &rp->rb.ids, rp->rb.bias, reader, &rp->rb.pid, f->code,
				  m, sizeof(m)) ||
		    !m[0])
			snprintf(l, LABEL_MAX, "[C function]");
		else
			qualify(rp, f->code, 0, m, l);
		e->err = 0;
	} else {
		e->err = rb_frame_name(rp->rb.o, reader, &rp->rb.pid, f->code, f->aux, m, sizeof(m),
				       p, PATH_MAX_RB, &e->line);
		e->first_line =
		    e->err ? 0 : rb_iseq_first_line(rp->rb.o, reader, &rp->rb.pid, f->code);
		qualify(rp, f->ident, f->code, m, l);
	}
	e->label = label ? label : strdup(l);
	e->path = path ? path : strdup(p);
	if (!e->label || !e->path) {
		free(label ? NULL : e->label);
		free(path ? NULL : e->path);
		e->label = e->path = NULL;
		e->err = -ENOMEM;
	}
}

static int frame(struct rt_proc *rp, const struct tp_frame *f, struct prof_frame *out)
{
	if (f->flags & TP_FF_RB_GC) {
		*out = (struct prof_frame){.kind = PROF_FRAME_MARKER, .name = "[GC]"};
		return 0;
	}
	if (!rp->names)
		rp->names = calloc(NAMES_SIZE, sizeof(*rp->names)); /* none: no cache */
	struct name_ent *e = NULL;
	if (rp->names && f->code) {
		uint64_t h =
		    (f->code >> 3) * 0x9e3779b97f4a7c15ULL ^ f->aux * 0xff51afd7ed558ccdULL;
		for (size_t i = 0; i < NAMES_SIZE; i++) {
			struct name_ent *c = &rp->names[(h + i) & (NAMES_SIZE - 1)];
			if (c->code == f->code && c->aux == f->aux && c->ident == f->ident &&
			    c->flags == f->flags) {
				e = c;
				break;
			}
			if (!c->code) {
				if (rp->nnames < NAMES_MAX) {
					name_frame(rp, f, c, NULL, NULL);
					if (c->label)
						rp->nnames++;
					else
						c->code = 0;
					e = c->label ? c : NULL;
				}
				break;
			}
		}
	}
	if (!e) {
		e = &rp->scratch;
		name_frame(rp, f, e, rp->scratch_label, rp->scratch_path);
	}
	*out = (struct prof_frame){.kind = PROF_FRAME_INTERP, .name = "[unknown]"};
	if (e->err)
		return e->err;
	out->name = e->label;
	out->file = e->path[0] ? e->path : NULL;
	out->line = e->line;
	out->first_line = e->first_line;
	return 0;
}

static const char *thread_name(struct rt_proc *rp, uint32_t tid, uint64_t ec, uint64_t now_ns)
{
	struct tname_ent *t = &rp->tnames[tid & (TNAMES - 1)];
	if (t->tid == tid && t->ec == ec && now_ns - t->at_ns < THREAD_NAME_NS)
		return t->named ? t->name : NULL;
	*t = (struct tname_ent){.tid = tid, .ec = ec, .at_ns = now_ns};
	uint64_t th, name;
	const struct rb_offsets *o = rp->rb.o;
	if (!ec || !o->thread_name ||
	    mem_read_u64_with(reader, &rp->rb.pid, ec + rp->rb.ec_thread_ptr, &th) || !th ||
	    mem_read_u64_with(reader, &rp->rb.pid, th + o->thread_name, &name) || !name)
		return NULL;
	/* nil, or a string (Thread#name=); anything else is not a name. */
	t->named =
	    !rb_read_string(o, reader, &rp->rb.pid, name, t->name, sizeof(t->name)) && t->name[0];
	return t->named ? t->name : NULL;
}

static int native_kind(const struct rt_proc *rp, const char *name, const char *module,
		       uint64_t vaddr)
{
	(void)name;
	if (!module || !vaddr || strcmp(module, rp->rb.lib))
		return MERGE_NK_OTHER;
	if (vaddr >= rp->rb.exec.lo && vaddr < rp->rb.exec.hi)
		return MERGE_NK_EVAL;
	if (vaddr >= rp->rb.core.lo && vaddr < rp->rb.core.hi)
		return MERGE_NK_MACHINERY;
	return MERGE_NK_OTHER;
}

static bool jit_code(const struct rt_proc *rp)
{
	return rp->rb.yjit;
}

static bool interp_frames(const struct rt_proc *rp)
{
	(void)rp;
	return true; /* a call of the VM runs frames up to its FINISH frame */
}

static struct tpw_state *state_new(const struct rt_proc *rp)
{
	struct tpw_state *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->host.pid = rp->rb.pid;
	st->proc = rp->bpf;
	st->s.time_ns = clock_ns(CLOCK_MONOTONIC);
	tpw_begin(st);
	tpw_rb_begin(st);
	return st;
}

/* The walk BPF does from EC ec (0: from the thread pointer fsbase). */
static int walk(const struct rt_proc *rp, uint64_t id, uint64_t fsbase, uint64_t ec,
		struct tp_sample *out, struct tpw_anchors *anchors)
{
	struct tpw_state *st = state_new(rp);
	if (!st)
		return -ENOMEM;
	st->s.pid = (uint32_t)(id >> 32);
	st->s.tid = (uint32_t)id;
	if (!ec && !fsbase)
		st->s.err = TP_ERR_FSBASE;
	else if (!ec)
		ec = tpw_rb_ec(st, fsbase);
	if (ec && tpw_rb_start(st, ec)) {
		for (uint32_t i = 0; i < TP_MAX_TAIL_CALLS && tpw_rb_step(st); i++)
			;
		tpw_rb_end(st);
	}
	*out = st->s;
	if (anchors)
		*anchors = st->a;
	free(st);
	return 0;
}

static int walk_thread(const struct rt_proc *rp, uint64_t id, uint64_t fsbase,
		       struct tp_sample *out, struct tpw_anchors *anchors)
{
	return walk(rp, id, fsbase, 0, out, anchors);
}

static int walk_tstate(const struct rt_proc *rp, uint64_t ec, struct tp_sample *out,
		       struct tpw_anchors *anchors)
{
	return walk(rp, 0, 0, ec, out, anchors);
}

/* The most ractors and threads dump lists: a list longer than this is
 * cut (or loops), and says so. */
#define RACTORS_MAX 1024
#define THREADS_MAX 4096

/* The next node of the ccan list node at node into *next. */
static int list_next(pid_t pid, uint64_t node, uint64_t *next)
{
	return mem_read_u64_with(reader, &pid, node, next);
}

/* Thread th (an rb_thread_t) into t, with its frames (t->frames, its own,
 * freed by threads_free). 0 or -ENOMEM; what cannot be read is in t->err. */
static int read_thread(const struct rt_proc *rp, uint64_t th, unsigned int ractor,
		       struct rt_thread *t)
{
	const struct rb_offsets *o = rp->rb.o;
	pid_t pid = rp->rb.pid;
	uint64_t ec = 0, nt = 0;
	int32_t tid = 0;
	*t = (struct rt_thread){.thread_id = th, .interp = ractor, .err = TP_ERR_RB_NO_EC};
	if (mem_read_u64_with(reader, &pid, th + o->thread_ec, &ec))
		ec = 0;
	if (o->thread_tid)
		mem_read(pid, th + o->thread_tid, &tid, sizeof(tid));
	else if (o->thread_nt && !mem_read_u64_with(reader, &pid, th + o->thread_nt, &nt) && nt)
		mem_read(pid, nt + o->nt_tid, &tid, sizeof(tid));
	t->tid = tid > 0 ? tid : 0;
	if (!ec)
		return 0;
	struct tp_sample *smp = malloc(sizeof(*smp));
	if (!smp)
		return -ENOMEM;
	int ret = walk(rp, (uint64_t)pid << 32 | (uint32_t)t->tid, 0, ec, smp, NULL);
	struct tp_frame *frames = NULL;
	uint32_t n = smp->nframes < TP_MAX_FRAMES ? smp->nframes : TP_MAX_FRAMES;
	if (!ret && !(frames = malloc((n ? n : 1) * sizeof(*frames))))
		ret = -ENOMEM;
	if (!ret) {
		memcpy(frames, smp->frames, n * sizeof(*frames));
		t->tstate = ec;
		t->err = smp->err;
		t->lock = smp->gil;
		t->nframes = n;
		t->frames = frames;
	}
	free(smp);
	return ret;
}

/* Every thread of every ractor: the VM's list of ractors, each one's list
 * of threads (ccan lists, bounded), found from ruby_current_vm_ptr and
 * checked through the main thread, which must point back at the VM. */
static int threads(const struct rt_proc *rp, struct rt_threads *out, char *msg, size_t msglen)
{
	const struct rb_offsets *o = rp->rb.o;
	pid_t pid = rp->rb.pid;
	uint64_t vm = 0, main_th = 0, back = 0;
	memset(out, 0, sizeof(*out));
	if (!rp->rb.vm_ptr) {
		snprintf(msg, msglen,
			 "pid %d: Ruby %s: the VM is not found in %s (neither ruby_current_vm_ptr "
			 "nor ruby_vm_at_exit's code), so its threads cannot be listed",
			 pid, rp->rb.version, rp->rb.lib);
		return -ENOTSUP;
	}
	int ret = mem_read_u64_with(reader, &pid, rp->rb.bias + rp->rb.vm_ptr, &vm);
	if (!ret && vm)
		ret = mem_read_u64_with(reader, &pid, vm + o->vm_main_thread, &main_th);
	if (!ret && vm && main_th)
		ret = mem_read_u64_with(reader, &pid, main_th + o->thread_vm, &back);
	if (ret == -ESRCH)
		return ret;
	if (ret || !vm || !main_th || back != vm) {
		snprintf(msg, msglen,
			 "pid %d: Ruby %s: the VM at 0x%llx (from 0x%llx) %s (is the process "
			 "starting or exiting?)",
			 pid, rp->rb.version, (unsigned long long)vm,
			 (unsigned long long)(rp->rb.bias + rp->rb.vm_ptr),
			 ret ? "cannot be read" : "has no main thread that points back at it");
		return ret ? ret : -EPROTO;
	}
	size_t cap = 0;
	uint64_t rhead = vm + o->vm_ractor_set, rnode;
	unsigned int nr = 0;
	ret = list_next(pid, rhead, &rnode);
	while (!ret && rnode != rhead) {
		if (nr++ >= RACTORS_MAX || !rnode) {
			ret = -ELOOP;
			break;
		}
		uint64_t r = rnode - o->ractor_vmlr_node, thead = r + o->ractor_threads_set, tnode;
		ret = list_next(pid, thead, &tnode);
		while (!ret && tnode != thead) {
			if (out->n >= THREADS_MAX || !tnode) {
				ret = -ELOOP;
				break;
			}
			if (out->n == cap) {
				size_t c = cap ? cap * 2 : 16;
				struct rt_thread *v = realloc(out->v, c * sizeof(*v));
				if (!v)
					return -ENOMEM;
				out->v = v;
				cap = c;
			}
			/* Counted before it is read: its frames are the list's. */
			if (read_thread(rp, tnode - o->thread_lt_node, nr - 1, &out->v[out->n++]))
				return -ENOMEM;
			ret = list_next(pid, tnode, &tnode);
		}
		if (!ret)
			ret = list_next(pid, rnode, &rnode);
	}
	if (ret == -ESRCH && !out->n)
		return ret;
	if (ret)
		out->err = TP_ERR_RB_THREAD_LIST;
	log_debug("threads listed from the VM at 0x%llx: %zu in %u ractor%s",
		  (unsigned long long)vm, out->n, nr, nr == 1 ? "" : "s");
	return 0;
}

static void threads_free(struct rt_threads *t)
{
	for (size_t i = 0; i < t->n; i++)
		free((void *)t->v[i].frames);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

static void counts(const struct rt_proc *rp, uint64_t *snapshots_used, size_t *bytes,
		   uint64_t *lines_shared)
{
	*snapshots_used = 0;
	*bytes = rp->names ? NAMES_SIZE * sizeof(struct name_ent) + rp->nnames * 64 : 0;
	*lines_shared = 0;
}

const struct runtime_ops ruby_runtime = {
    .name = "ruby",
    .title = "Ruby",
    .version_label = NULL,
    .lock_label = "gvl",
    .interp_noun = "ractor",
    .no_frame_marker = "[no Ruby frame]",
    .disagree_marker = "[native and Ruby stacks disagree]",
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
    .jit_marker = "[YJIT]",
    .jit_code = jit_code,
    .interp_frames = interp_frames,
    .walk_thread = walk_thread,
    .walk_tstate = walk_tstate,
    .threads = threads,
    .threads_free = threads_free,
    .lock_wait_function = NULL,
    .counts = counts,
};
