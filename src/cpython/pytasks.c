/* pytasks.c - the asyncio tasks of a live Python process (pytasks.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpython/abi.h"
#include "cpython/pyobj.h"
#include "cpython/pytasks.h"
#include "proc/elfsym.h"
#include "proc/mapfile.h"
#include "proc/procmaps.h"

/* Include/opcode.h: YIELD_FROM (<= 3.10). */
#define OP_YIELD_FROM 72
/* 3.11/3.12: a coroutine suspended in an await resumes at RESUME (151;
 * 3.11's RESUME_QUICK 150, 3.12's INSTRUMENTED_RESUME 240) with oparg 2
 * (after yield from) or 3 (after await). */
#define OP_RESUME 151
#define OP_RESUME_QUICK_311 150
#define OP_INSTRUMENTED_RESUME_312 240
/* The _asyncio C Task's type name, from 3.8 on. */
#define TASK_TYPE "_asyncio.Task"
/* Interpreters, thread states and types visited at most. */
#define INTERPS_MAX 64
#define TSTATES_MAX 4096
#define TYPE_DEPTH 16
#define SET_MAX (1u << 20)

/* Modules/_asynciomodule.c, struct _Py_AsyncioModuleDebugOffsets (3.14+):
 * 13 u64, in this order. */
enum {
	AD_TASK_SIZE,
	AD_TASK_NAME,
	AD_TASK_AWAITED_BY,
	AD_TASK_IS_TASK,
	AD_TASK_AWAITED_BY_IS_SET,
	AD_TASK_CORO,
	AD_TASK_NODE,
	AD_INTERP_SIZE,
	AD_INTERP_TASKS_HEAD,
	AD_TSTATE_SIZE,
	AD_TSTATE_RUNNING_LOOP,
	AD_TSTATE_RUNNING_TASK,
	AD_TSTATE_TASKS_HEAD,
	AD__COUNT
};

/* Of each task, for reading the others. */
struct side {
	uint64_t inner; /* its innermost coroutine's frame (3.11+), 0 if none */
	/* A pure-Python task (its attributes read): what it waits on
	 * (_fut_waiter), which a C task's layout gives */
	bool py;
	uint64_t waiter;
};

struct ctx {
	struct pyobj_rd r;
	const struct pyproc *pp;
	const struct py_layout *l;
	struct rt_tasks *out;
	size_t cap;
	struct side *side; /* by task: what the list does not keep */
	/* addr -> index + 1 in out->v, open addressing; a power of two */
	uint64_t *keys;
	uint32_t *idx;
	size_t hcap;
	/* what a frame's state says, per version */
	uint64_t mask;	   /* of tagged pointers (3.14+: _PyStackRef) */
	int yf_state;	   /* suspended in an await (or yield from) */
	int cleared;	   /* the frame is gone */
	bool resume;	   /* 3.11/3.12: the next instruction says whether it awaits */
	unsigned int peek; /* the awaited object is stackpointer[-peek] */
	int32_t hdr;	   /* sizeof(PyObject): where a subclass's first field is */
	uint64_t ad[AD__COUNT];
	const struct py_async_layout *al; /* before 3.14 */
	uint64_t task_types[8];		  /* types known to be tasks */
};

static int rd64(struct ctx *c, uint64_t addr, uint64_t *v)
{
	return pyobj_u64(&c->r, addr, v);
}

/* Whether obj is a C task (_asyncio.Task or a subclass). */
static bool is_task(struct ctx *c, uint64_t obj)
{
	uint64_t type = 0;
	if (!obj || (obj & 7) || rd64(c, obj + (uint64_t)c->l->obj_type, &type) || !type)
		return false;
	for (size_t i = 0; i < 8; i++)
		if (c->task_types[i] == type)
			return true;
	uint64_t t = type;
	for (int d = 0; d < TYPE_DEPTH && t; d++) {
		uint64_t name;
		char n[sizeof(TASK_TYPE)];
		if (rd64(c, t + (uint64_t)c->l->type_name, &name) ||
		    pyproc_read_cstr(c->pp, name, n, sizeof(n)) < 0)
			return false;
		if (!strcmp(n, TASK_TYPE)) {
			for (size_t i = 0; i < 8; i++)
				if (!c->task_types[i]) {
					c->task_types[i] = type;
					break;
				}
			return true;
		}
		if (rd64(c, t + (uint64_t)c->l->type_base, &t))
			return false;
	}
	return false;
}

/* The generator object whose frame runs for obj, if obj is a coroutine
 * (or an async generator's asend/athrow, whose generator it is); else 0. */
static uint64_t coro_like(struct ctx *c, uint64_t obj)
{
	char t[32];
	uint64_t gen;
	if (!obj || (obj & 7) || pyobj_type_name(&c->r, obj, t, sizeof(t)))
		return 0;
	if (!strcmp(t, "coroutine"))
		return obj;
	if ((!strcmp(t, "async_generator_asend") || !strcmp(t, "async_generator_athrow")) &&
	    !rd64(c, obj + (uint64_t)c->hdr, &gen))
		return gen;
	return 0;
}

/* The frame of generator g (<= 3.10: its frame object) into *f, and what
 * it awaits into *next (0: nothing, or it cannot be read). False when g
 * has no frame to show. */
static bool gen_frame(struct ctx *c, uint64_t g, struct tp_frame *f, uint64_t *next)
{
	const struct py_layout *l = c->l;
	*next = 0;
	memset(f, 0, sizeof(*f));
	if (l->gen_iframe >= 0) {
		int8_t st;
		uint64_t iframe = g + (uint64_t)l->gen_iframe, code, ip;
		if (pyobj_read(&c->r, g + (uint64_t)l->gen_frame_state, &st, 1) ||
		    st == c->cleared || rd64(c, iframe + (uint64_t)l->frame_code, &code) ||
		    !(code &= c->mask) || rd64(c, iframe + (uint64_t)l->frame_lasti, &ip))
			return false;
		f->code = code;
		f->pos = (uint32_t)(ip - code);
		f->aux = c->pp->tp.off.flags & TP_LF_TLBC ? ip : 0;
		if (st != c->yf_state)
			return true;
		if (c->resume) {
			uint8_t in[2];
			if (pyobj_read(&c->r, ip + 2, in, 2) || in[1] < 2 ||
			    (in[0] != OP_RESUME && in[0] != OP_RESUME_QUICK_311 &&
			     in[0] != OP_INSTRUMENTED_RESUME_312))
				return true;
		}
		if (l->iframe_stackpointer >= 0) {
			uint64_t sp;
			if (!rd64(c, iframe + (uint64_t)l->iframe_stackpointer, &sp) &&
			    (sp &= c->mask) && !rd64(c, sp - 8 * c->peek, next))
				*next &= c->mask;
		} else {
			int32_t top;
			if (!pyobj_read(&c->r, iframe + (uint64_t)l->iframe_stacktop, &top, 4) &&
			    top > 0 && top < 65536)
				rd64(c,
				     iframe + (uint64_t)l->frame_localsplus +
					 8 * (uint64_t)(top - 1),
				     next);
		}
		return true;
	}
	uint64_t fo, code, bytes;
	int32_t lasti;
	uint8_t op;
	if (l->gen_frame < 0 || rd64(c, g + (uint64_t)l->gen_frame, &fo) || !fo ||
	    rd64(c, fo + (uint64_t)l->frame_code, &code) || !code ||
	    pyobj_read(&c->r, fo + (uint64_t)l->frame_lasti, &lasti, 4))
		return false;
	f->code = code;
	f->pos = (uint32_t)lasti;
	if (lasti < 0 || l->code_code < 0 || rd64(c, code + (uint64_t)l->code_code, &bytes))
		return true;
	uint64_t sval = bytes + (uint64_t)l->bytes_sval;
	if (l->frame_stacktop >= 0) { /* 3.8, 3.9: f_lasti in bytes */
		uint64_t top;
		if (!rd64(c, fo + (uint64_t)l->frame_stacktop, &top) && top &&
		    !pyobj_read(&c->r, sval + (uint64_t)lasti + 2, &op, 1) && op == OP_YIELD_FROM)
			rd64(c, top - 8, next);
		return true;
	}
	int8_t fs; /* 3.10: f_lasti in code units; FRAME_SUSPENDED is -1 */
	int32_t depth;
	uint64_t stack;
	if (!pyobj_read(&c->r, fo + (uint64_t)l->frame_state, &fs, 1) && fs == -1 &&
	    !pyobj_read(&c->r, sval + ((uint64_t)lasti + 1) * 2, &op, 1) && op == OP_YIELD_FROM &&
	    !pyobj_read(&c->r, fo + (uint64_t)l->frame_stackdepth, &depth, 4) && depth > 0 &&
	    depth < 65536 && !rd64(c, fo + (uint64_t)l->frame_valuestack, &stack) && stack)
		rd64(c, stack + 8 * (uint64_t)(depth - 1), next);
	return true;
}

/* Task t's coroutine stack, from its coroutine coro, innermost first; the
 * innermost coroutine's frame into *inner (3.11+, where it is embedded). */
static int coro_stack(struct ctx *c, uint64_t coro, struct rt_task *t, uint64_t *inner)
{
	struct tp_frame f[PYTASKS_STACK_MAX];
	uint32_t n = 0;
	uint64_t g = coro_like(c, coro & c->mask), next;
	*inner = 0;
	for (; g && n < PYTASKS_STACK_MAX; g = coro_like(c, next)) {
		if (!gen_frame(c, g, &f[n], &next))
			break;
		if (c->l->gen_iframe >= 0)
			*inner = g + (uint64_t)c->l->gen_iframe;
		n++;
	}
	t->stack_cut = g && n >= PYTASKS_STACK_MAX;
	if (!n)
		return 0;
	if (!(t->frames = malloc(n * sizeof(*t->frames))))
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) /* outermost was read first */
		t->frames[i] = f[n - 1 - i];
	t->nframes = n;
	return 0;
}

/* Task t's name: a str, or (3.12+, until get_name() formats it) the int of
 * its default name "Task-N". */
static void task_name(struct ctx *c, uint64_t obj, struct rt_task *t)
{
	char type[16];
	bool cut;
	int64_t v;
	snprintf(t->name, sizeof(t->name), "0x%llx", (unsigned long long)t->addr);
	if (!obj || pyobj_type_name(&c->r, obj, type, sizeof(type)))
		return;
	if (!strcmp(type, "str")) {
		char s[sizeof(t->name)];
		if (pyobj_str(&c->r, obj, s, sizeof(s), &cut) >= 0)
			snprintf(t->name, sizeof(t->name), "%s", s);
	} else if (!strcmp(type, "int") && !pyobj_int(&c->r, obj, false, &v)) {
		snprintf(t->name, sizeof(t->name), "Task-%lld", (long long)v);
	}
}

static size_t hslot(const struct ctx *c, uint64_t addr)
{
	return (size_t)((addr >> 4) * 0x9e3779b97f4a7c15ULL) & (c->hcap - 1);
}

/* The task at addr in the list, or NULL. */
static struct rt_task *find(struct ctx *c, uint64_t addr)
{
	for (size_t i = hslot(c, addr), k = 0; k < c->hcap; i = (i + 1) & (c->hcap - 1), k++) {
		if (!c->keys[i])
			return NULL;
		if (c->keys[i] == addr)
			return &c->out->v[c->idx[i] - 1];
	}
	return NULL;
}

/* A new task at addr, or NULL: listed already, past PYTASKS_MAX (out->err
 * -E2BIG), or out of memory (*nomem). */
static struct rt_task *add(struct ctx *c, uint64_t addr, bool *nomem)
{
	if (find(c, addr))
		return NULL;
	if (c->out->n >= PYTASKS_MAX) {
		c->out->err = -E2BIG;
		return NULL;
	}
	if (c->out->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct rt_task *v = realloc(c->out->v, cap * sizeof(*v));
		if (v)
			c->out->v = v;
		struct side *in = v ? realloc(c->side, cap * sizeof(*in)) : NULL;
		if (!in) {
			*nomem = true;
			return NULL;
		}
		c->side = in;
		c->cap = cap;
	}
	if ((c->out->n + 1) * 2 > c->hcap) {
		size_t hcap = c->hcap ? c->hcap * 2 : 256;
		uint64_t *keys = calloc(hcap, sizeof(*keys));
		uint32_t *idx = calloc(hcap, sizeof(*idx));
		if (!keys || !idx) {
			free(keys);
			free(idx);
			*nomem = true;
			return NULL;
		}
		free(c->keys);
		free(c->idx);
		c->keys = keys;
		c->idx = idx;
		c->hcap = hcap;
		for (size_t i = 0; i < c->out->n; i++) {
			size_t s = hslot(c, c->out->v[i].addr);
			while (c->keys[s])
				s = (s + 1) & (hcap - 1);
			c->keys[s] = c->out->v[i].addr;
			c->idx[s] = (uint32_t)i + 1;
		}
	}
	size_t s = hslot(c, addr);
	while (c->keys[s])
		s = (s + 1) & (c->hcap - 1);
	c->keys[s] = addr;
	c->idx[s] = (uint32_t)(c->out->n + 1);
	c->side[c->out->n] = (struct side){0};
	struct rt_task *t = &c->out->v[c->out->n++];
	memset(t, 0, sizeof(*t));
	t->addr = addr;
	t->state = "pending";
	return t;
}

/* Adds parent to the tasks that await child. */
static int awaited_by(struct rt_task *child, uint64_t parent)
{
	if (child->nawaiters >= PYTASKS_AWAITERS_MAX)
		return 0;
	for (uint32_t i = 0; i < child->nawaiters; i++)
		if (child->awaiters[i] == parent)
			return 0;
	if (!child->awaiters &&
	    !(child->awaiters = malloc(PYTASKS_AWAITERS_MAX * sizeof(*child->awaiters))))
		return -ENOMEM;
	child->awaiters[child->nawaiters++] = parent;
	return 0;
}

/* Called on each live key of a set; true to stop. */
typedef bool (*key_fn)(struct ctx *c, uint64_t key, void *arg);

/* The keys of the set at set, up to SET_MAX slots. */
static int set_each(struct ctx *c, uint64_t set, key_fn fn, void *arg)
{
	const struct py_layout *l = c->l;
	uint64_t table, mask, e[2 * 64];
	if (l->set_table < 0 || l->set_mask < 0 || rd64(c, set + (uint64_t)l->set_table, &table) ||
	    rd64(c, set + (uint64_t)l->set_mask, &mask) || !table)
		return -EFAULT;
	if (mask >= SET_MAX || ((mask + 1) & mask))
		return -E2BIG;
	for (uint64_t i = 0; i <= mask; i += 64) {
		uint64_t k = mask + 1 - i < 64 ? mask + 1 - i : 64;
		if (pyobj_read(&c->r, table + i * 16, e, k * 16))
			return -EFAULT;
		for (uint64_t j = 0; j < k; j++)
			if (e[2 * j] && fn(c, e[2 * j], arg)) /* the dummy key is no task */
				return 0;
	}
	return 0;
}

/* 3.14+: the tasks that await task t (task_awaited_by: one, or a set). */
static bool awaiter_fn(struct ctx *c, uint64_t key, void *arg)
{
	struct rt_task *t = arg;
	if (is_task(c, key & c->mask) && awaited_by(t, key & c->mask))
		return true;
	return false;
}

static int add_task_314(struct ctx *c, uint64_t addr, uint32_t tid, bool running)
{
	bool nomem = false;
	struct rt_task *t = add(c, addr, &nomem);
	if (!t)
		return nomem ? -ENOMEM : 0;
	uint64_t name = 0, coro = 0, ab = 0;
	uint8_t is_set = 0;
	t->tid = tid;
	t->running = running;
	rd64(c, addr + c->ad[AD_TASK_NAME], &name);
	task_name(c, name & c->mask, t);
	if (!rd64(c, addr + c->ad[AD_TASK_CORO], &coro) && (t->coro = coro & c->mask) &&
	    coro_stack(c, coro, t, &c->side[t - c->out->v].inner))
		return -ENOMEM;
	if (rd64(c, addr + c->ad[AD_TASK_AWAITED_BY], &ab) || !(ab &= c->mask) ||
	    pyobj_read(&c->r, addr + c->ad[AD_TASK_AWAITED_BY_IS_SET], &is_set, 1))
		return 0;
	if (!is_set)
		return is_task(c, ab) ? awaited_by(t, ab) : 0;
	if (set_each(c, ab, awaiter_fn, t) == -ENOMEM)
		return -ENOMEM;
	return 0;
}

/* The tasks of one list (a circular llist through task_node, with its
 * head in a thread state or the interpreter). */
static int list_tasks(struct ctx *c, uint64_t head, uint32_t tid, uint64_t running)
{
	uint64_t node;
	if (rd64(c, head, &node))
		return 0;
	while (node && node != head) {
		if (c->out->n >= PYTASKS_MAX) {
			c->out->err = -E2BIG;
			return 0;
		}
		uint64_t task = node - c->ad[AD_TASK_NODE];
		size_t before = c->out->n;
		int ret = add_task_314(c, task, tid, task == running);
		if (ret)
			return ret;
		if (c->out->n == before) /* seen already: the list loops */
			return 0;
		if (rd64(c, node, &node))
			return 0;
	}
	return 0;
}

/* The .AsyncioDebug section of the file behind mapping me, into c->ad. */
static bool read_section(struct ctx *c, const struct map_entry *me)
{
	struct elf_file *ef = NULL;
	const void *data;
	size_t len;
	int fd = mapfile_open(c->pp->pid, me);
	if (fd < 0 || elf_file_open_fd(fd, &ef))
		return false;
	bool ok = !elf_file_section_bytes(ef, ".AsyncioDebug", &data, &len) && len >= sizeof(c->ad);
	if (ok)
		memcpy(c->ad, data, sizeof(c->ad));
	elf_file_close(ef);
	return ok;
}

/* 3.14+: the offsets asyncio exports, in its extension (3.14) or in the
 * interpreter's file (3.15, where _asyncio is built in). */
static int find_asyncio_debug(struct ctx *c, char *msg, size_t msglen)
{
	struct proc_maps m = {0};
	int ret = procmaps_read(c->pp->pid, &m);
	if (ret) {
		snprintf(msg, msglen, "pid %d: cannot read its mappings: %s", c->pp->pid,
			 strerror(-ret));
		return ret;
	}
	bool found = false;
	for (int pass = 0; pass < 2 && !found; pass++)
		for (size_t i = 0; i < m.n && !found; i++) {
			const char *base = strrchr(m.v[i].path, '/');
			if (!base || m.v[i].offset)
				continue;
			bool want = pass == 0 ? !strncmp(base + 1, "_asyncio", 8)
					      : !strcmp(m.v[i].path, c->pp->binary);
			found = want && read_section(c, &m.v[i]);
		}
	procmaps_free(&m);
	if (!found) {
		snprintf(msg, msglen,
			 "pid %d: Python %s: no .AsyncioDebug section in its _asyncio or %s: the "
			 "process has not imported asyncio",
			 c->pp->pid, c->pp->version, c->pp->binary);
		return -ENOENT;
	}
	if (c->ad[AD_TASK_NODE] >= 4096 || c->ad[AD_TASK_NAME] >= 4096 ||
	    c->ad[AD_TASK_CORO] >= 4096 || c->ad[AD_TASK_AWAITED_BY] >= 4096 ||
	    c->ad[AD_TSTATE_TASKS_HEAD] >= (1u << 20) ||
	    c->ad[AD_INTERP_TASKS_HEAD] >= (1u << 20)) {
		snprintf(msg, msglen,
			 "pid %d: Python %s: its .AsyncioDebug offsets cannot be right", c->pp->pid,
			 c->pp->version);
		return -EPROTO;
	}
	return 0;
}

static int py_tasks_314(struct ctx *c);

static int read_314(struct ctx *c, char *msg, size_t msglen)
{
	const struct py_layout *l = c->l;
	int ret = find_asyncio_debug(c, msg, msglen);
	if (ret)
		return ret;
	snprintf(c->out->source, sizeof(c->out->source),
		 "each thread's and the interpreter's list of tasks (.AsyncioDebug)");
	uint64_t interp;
	if (rd64(c, c->pp->tp.interp_head_addr, &interp))
		return c->r.gone ? c->r.gone : -EFAULT;
	for (int i = 0; i < INTERPS_MAX && interp; i++) {
		uint64_t ts;
		if (rd64(c, interp + (uint64_t)l->interp_tstate_head, &ts))
			break;
		for (int k = 0; k < TSTATES_MAX && ts; k++) {
			uint64_t tid = 0, running = 0;
			if (l->ts_native_thread_id >= 0)
				rd64(c, ts + (uint64_t)l->ts_native_thread_id, &tid);
			rd64(c, ts + c->ad[AD_TSTATE_RUNNING_TASK], &running);
			if ((ret = list_tasks(c, ts + c->ad[AD_TSTATE_TASKS_HEAD], (uint32_t)tid,
					      running & c->mask)))
				return ret;
			if (rd64(c, ts + (uint64_t)l->ts_next, &ts))
				break;
		}
		/* The tasks of threads that exited. */
		if ((ret = list_tasks(c, interp + c->ad[AD_INTERP_TASKS_HEAD], 0, 0)))
			return ret;
		if (rd64(c, interp + (uint64_t)l->interp_next, &interp))
			break;
	}
	return c->r.gone ? c->r.gone : py_tasks_314(c);
}

/* The attributes of a pure-Python task that tell it: _state is the
 * class's (pending) until the task ends. */
struct py_task {
	uint64_t coro, state, name, waiter;
	bool has_waiter;
};

static bool py_attr_fn(struct pyobj_rd *r, uint64_t key, uint64_t value, void *arg)
{
	static const char *const coro[] = {"_coro", NULL}, *const state[] = {"_state", NULL},
				 *const name[] = {"_name", NULL},
				 *const waiter[] = {"_fut_waiter", NULL};
	struct py_task *p = arg;
	if (pyobj_str_is(r, key, coro))
		p->coro = value;
	else if (pyobj_str_is(r, key, state))
		p->state = value;
	else if (pyobj_str_is(r, key, name))
		p->name = value;
	else if (pyobj_str_is(r, key, waiter))
		p->waiter = value, p->has_waiter = true;
	return false;
}

/* A pure-Python task (asyncio.tasks._PyTask or a subclass, which a loop's
 * task factory may make), read through its attributes: whether obj is one
 * that is pending, with its list entry added; *err on a failure that ends
 * the read. */
static bool py_task(struct ctx *c, uint64_t obj, int *err)
{
	static const char *const pending[] = {"PENDING", NULL};
	struct py_task p = {0};
	bool nomem = false;
	if (!obj || (obj & 7) || pyobj_attrs_each(&c->r, obj, py_attr_fn, &p) || !p.coro ||
	    !p.has_waiter || (p.state && !pyobj_str_is(&c->r, p.state, pending)))
		return false;
	struct rt_task *t = add(c, obj, &nomem);
	if (nomem)
		*err = -ENOMEM;
	if (!t)
		return true;
	struct side *sd = &c->side[t - c->out->v];
	sd->py = true;
	sd->waiter = p.waiter;
	task_name(c, p.name, t);
	t->coro = p.coro;
	if (coro_stack(c, p.coro, t, &sd->inner))
		*err = -ENOMEM;
	return true;
}

/* Before 3.14: one task of the registry. */
static bool reg_fn(struct ctx *c, uint64_t task, void *arg)
{
	int *err = arg;
	bool nomem = false;
	int32_t state;
	if (!is_task(c, task)) {
		py_task(c, task, err);
		return *err || c->out->err;
	}
	if (pyobj_read(&c->r, task + (uint64_t)c->al->task_state, &state, 4) || state != 0)
		return false; /* done tasks stay in the registry until collected */
	struct rt_task *t = add(c, task, &nomem);
	if (nomem)
		*err = -ENOMEM;
	if (!t)
		return nomem || c->out->err;
	uint64_t name = 0, coro = 0;
	rd64(c, task + (uint64_t)c->al->task_name, &name);
	task_name(c, name, t);
	if (!rd64(c, task + (uint64_t)c->al->task_coro, &coro) && (t->coro = coro) &&
	    coro_stack(c, coro, t, &c->side[t - c->out->v].inner)) {
		*err = -ENOMEM;
		return true;
	}
	return false;
}

/* A WeakSet's member: the object its weak reference holds. */
static bool weak_fn(struct ctx *c, uint64_t ref, void *arg)
{
	uint64_t obj;
	if (rd64(c, ref + (uint64_t)c->l->weakref_object, &obj))
		return false;
	return reg_fn(c, obj, arg);
}

/* Each running task (the values of _current_tasks, {loop: task}). */
static bool current_fn(struct pyobj_rd *r, uint64_t loop, uint64_t task, void *arg)
{
	struct ctx *c = arg;
	(void)r;
	(void)loop;
	struct rt_task *t = find(c, task);
	if (t)
		t->running = true;
	return false;
}

/* Each task of a TaskGroup's _tasks awaited by parent. */
struct group {
	uint64_t parent;
	int err;
};

static bool group_fn(struct ctx *c, uint64_t key, void *arg)
{
	struct group *g = arg;
	struct rt_task *child = find(c, key);
	if (child && awaited_by(child, g->parent)) {
		g->err = -ENOMEM;
		return true;
	}
	return false;
}

/* 3.11-3.13: parent waits on w in a TaskGroup's __aexit__ when its
 * innermost coroutine's frame (at frame) is that method's, whose self is a
 * TaskGroup whose _on_completed_fut is w: it awaits the group's tasks. */
static int group_edges(struct ctx *c, uint64_t parent, uint64_t frame, uint64_t w)
{
	static const char *const fut[] = {"_on_completed_fut", NULL}, *const tasks[] = {"_tasks",
											NULL};
	uint64_t self, set;
	char type[16];
	if (!frame || rd64(c, frame + (uint64_t)c->l->frame_localsplus, &self) || !self ||
	    pyobj_type_name(&c->r, self, type, sizeof(type)) || strcmp(type, "TaskGroup") ||
	    pyobj_attr_get(&c->r, self, fut) != w || !(set = pyobj_attr_get(&c->r, self, tasks)))
		return 0;
	struct group g = {.parent = parent};
	set_each(c, set, group_fn, &g);
	return g.err;
}

/* Before 3.14: who awaits whom, from what each task waits on: another
 * task, a gather (_GatheringFuture) of tasks, or a TaskGroup's future. */
static int edges(struct ctx *c)
{
	static const char *const children[] = {"_children", NULL};
	for (size_t i = 0; i < c->out->n; i++) {
		uint64_t parent = c->out->v[i].addr, w = c->side[i].waiter, list, items;
		int64_t n;
		char type[24];
		if (!c->side[i].py &&
		    (!c->al || rd64(c, parent + (uint64_t)c->al->task_fut_waiter, &w)))
			continue; /* 3.14+: a C task's awaiters were read with it */
		if (!w)
			continue;
		struct rt_task *child = find(c, w);
		if (child) {
			if (awaited_by(child, parent))
				return -ENOMEM;
			continue;
		}
		if (pyobj_type_name(&c->r, w, type, sizeof(type)))
			continue;
		if (strcmp(type, "_GatheringFuture")) {
			if (group_edges(c, parent, c->side[i].inner, w))
				return -ENOMEM;
			continue;
		}
		if (!(list = pyobj_attr_get(&c->r, w, children)) ||
		    pyobj_read(&c->r, list + (uint64_t)c->l->var_size, &n, 8) || n < 0 ||
		    rd64(c, list + (uint64_t)c->l->list_item, &items))
			continue;
		for (int64_t k = 0; k < n && k < PYTASKS_AWAITERS_MAX * 16; k++) {
			uint64_t item;
			if (rd64(c, items + 8 * (uint64_t)k, &item))
				break;
			if ((child = find(c, item)) && awaited_by(child, parent))
				return -ENOMEM;
		}
	}
	return 0;
}

/* The dict of module asyncio.tasks into *md: 0, -ENOENT when it was not
 * imported, or another negative errno. */
static int tasks_module(struct ctx *c, uint64_t *md)
{
	static const char *const mod_name[] = {"asyncio.tasks", NULL};
	const struct py_layout *l = c->l;
	uint64_t interp, modules, mod;
	if (rd64(c, c->pp->tp.interp_head_addr, &interp) ||
	    rd64(c, interp + (uint64_t)l->interp_modules, &modules))
		return c->r.gone ? c->r.gone : -EFAULT;
	if (!(mod = pyobj_dict_get(&c->r, modules, mod_name)) ||
	    rd64(c, mod + (uint64_t)l->module_dict, md))
		return c->r.gone ? c->r.gone : -ENOENT;
	return 0;
}

/* 3.14+: a member of _scheduled_tasks, where the tasks that are not C
 * tasks are (the C ones are in the lists). */
static bool py_weak_fn(struct ctx *c, uint64_t ref, void *arg)
{
	int *err = arg;
	uint64_t obj;
	if (rd64(c, ref + (uint64_t)c->l->weakref_object, &obj) || is_task(c, obj))
		return false;
	py_task(c, obj, err);
	return *err || c->out->err;
}

/* 3.14+: the pure-Python tasks, which register in asyncio.tasks's own
 * _scheduled_tasks and run in its _current_tasks ({loop: task}), as every
 * task did before. */
static int py_tasks_314(struct ctx *c)
{
	static const char *const sched[] = {"_scheduled_tasks", NULL},
				 *const data[] = {"data", NULL},
				 *const current[] = {"_current_tasks", NULL};
	uint64_t md, ws, set, cur;
	int err = 0;
	size_t before = c->out->n;
	if (tasks_module(c, &md) || !(ws = pyobj_dict_get(&c->r, md, sched)) ||
	    !(set = pyobj_attr_get(&c->r, ws, data)))
		return c->r.gone ? c->r.gone : 0;
	set_each(c, set, py_weak_fn, &err);
	if (err || c->out->n == before)
		return err;
	if ((cur = pyobj_dict_get(&c->r, md, current)))
		pyobj_dict_each(&c->r, cur, current_fn, c);
	return edges(c);
}

static int read_registry(struct ctx *c, char *msg, size_t msglen)
{
	static const char *const all[] = {"_all_tasks", "_scheduled_tasks", NULL},
				 *const eager[] = {"_eager_tasks", NULL},
				 *const current[] = {"_current_tasks", NULL},
				 *const data[] = {"data", NULL};
	uint64_t md, ws, set;
	int found = tasks_module(c, &md);
	if (found == -ENOENT)
		snprintf(msg, msglen, "pid %d: Python %s: the process has not imported asyncio",
			 c->pp->pid, c->pp->version);
	if (found)
		return found;
	snprintf(c->out->source, sizeof(c->out->source), "asyncio.tasks's registry of tasks (%s)",
		 c->pp->minor >= 12 ? "_scheduled_tasks, _eager_tasks" : "_all_tasks");
	int err = 0;
	if (!(ws = pyobj_dict_get(&c->r, md, all)) || !(set = pyobj_attr_get(&c->r, ws, data))) {
		snprintf(msg, msglen, "pid %d: Python %s: asyncio.tasks has no registry of tasks",
			 c->pp->pid, c->pp->version);
		return c->r.gone ? c->r.gone : -EFAULT;
	}
	int ret = set_each(c, set, weak_fn, &err);
	uint64_t es = pyobj_dict_get(&c->r, md, eager), cur;
	if (!ret && !err && es) /* 3.12+: a plain set of the tasks */
		ret = set_each(c, es, reg_fn, &err);
	if (err)
		return err;
	if (ret == -E2BIG)
		c->out->err = -E2BIG;
	else if (ret)
		c->out->err = ret;
	if ((cur = pyobj_dict_get(&c->r, md, current)))
		pyobj_dict_each(&c->r, cur, current_fn, c);
	return edges(c);
}

int pytasks_read(const struct pyproc *pp, struct rt_tasks *out, char *msg, size_t msglen)
{
	struct ctx c = {
	    .r = {.pp = pp, .l = &pp->layout, .budget = PYTASKS_READS},
	    .pp = pp,
	    .l = &pp->layout,
	    .out = out,
	    .mask = pp->tp.off.flags & TP_LF_STACKREF ? ~3ULL : ~0ULL,
	    .yf_state = -1,
	    .cleared = 4,
	    .peek = 1,
	    .hdr = pp->layout.obj_type + 8,
	};
	memset(out, 0, sizeof(*out));
	msg[0] = 0;
	const struct py_layout *l = c.l;
	unsigned int minor = pp->major == 3 ? pp->minor : 0;
	if (minor < 8 || minor > 15) {
		snprintf(msg, msglen,
			 "pid %d: Python %s: dump --tasks reads the asyncio of 3.8 to 3.15",
			 pp->pid, pp->version);
		return -ENOTSUP;
	}
	/* What a generator's frame state says (Include/internal/pycore_frame.h). */
	if (minor == 11 || minor == 12)
		c.resume = true; /* FRAME_SUSPENDED -1, then the next instruction */
	if (minor >= 15) {
		c.yf_state = 2; /* FRAME_SUSPENDED_YIELD_FROM; stackpointer[-2] */
		c.cleared = 5;
		c.peek = 2;
	}
	if (l->obj_type < 0 || l->type_name < 0 || l->type_base < 0 || l->set_table < 0 ||
	    l->weakref_object < 0 || (l->gen_iframe < 0 && l->gen_frame < 0)) {
		snprintf(msg, msglen, "pid %d: Python %s: the layout lacks what dump --tasks reads",
			 pp->pid, pp->version);
		return -ENOTSUP;
	}
	if (pp->free_threaded && minor < 14) {
		/* Its TaskObj has a larger object header than the table's. */
		snprintf(msg, msglen,
			 "pid %d: Python %s: dump --tasks reads a free-threaded build's tasks from "
			 "3.14 on",
			 pp->pid, pp->version);
		return -ENOTSUP;
	}
	int ret;
	if (minor >= 14) {
		ret = read_314(&c, msg, msglen);
	} else {
		for (unsigned int i = 0; i < py_async_table_len; i++)
			if (((py_async_table[i].hexversion >> 16) & 0xff) == minor)
				c.al = &py_async_table[i];
		if (!c.al) {
			snprintf(msg, msglen, "pid %d: Python %s: no layout of _asyncio's tasks",
				 pp->pid, pp->version);
			return -ENOTSUP;
		}
		ret = read_registry(&c, msg, msglen);
	}
	free(c.keys);
	free(c.idx);
	free(c.side);
	if (!ret && !c.r.budget)
		out->err = -E2BIG;
	if (ret && !msg[0])
		snprintf(msg, msglen, "pid %d: cannot read its asyncio tasks: %s", pp->pid,
			 strerror(-ret));
	return ret;
}

void pytasks_free(struct rt_tasks *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].frames);
		free(t->v[i].awaiters);
	}
	free(t->v);
	memset(t, 0, sizeof(*t));
}
