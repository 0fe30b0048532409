/* dump_tasks.c - `taipan dump --tasks`: every asyncio task of a process, as
 * the tree `python3.14 -m asyncio pstree` draws (Lib/asyncio/tools.py:
 * each task under the innermost coroutine of each task that awaits it), or
 * as JSON. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/dump.h"
#include "profile/profile.h"
#include "util/log.h"

/* Levels of the tree drawn at most: deeper is cut, and says so. */
#define TREE_DEPTH 512

/* A node of the tree: a task, or a coroutine frame under a task (or under
 * another frame). */
struct node {
	int task;	   /* the task's index, or -1 for a coroutine frame */
	const char *label; /* a frame's: "qualname file:line" */
	int *kids;
	size_t nkids, cap;
	bool child; /* under another node */
};

struct tree {
	struct node *v;
	size_t n, cap;
};

/* A task's frames as labels, innermost first. */
struct labels {
	char **v;
	uint32_t n;
};

static int node_new(struct tree *t, int task, const char *label)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct node *v = realloc(t->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	t->v[t->n] = (struct node){.task = task, .label = label};
	return (int)t->n++;
}

static int kid_add(struct tree *t, int parent, int kid)
{
	/* Never twice: a task's awaiters are distinct, and a frame is looked
	 * up before it is made. */
	struct node *p = &t->v[parent];
	if (p->nkids == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 4;
		int *k = realloc(p->kids, cap * sizeof(*k));
		if (!k)
			return -ENOMEM;
		p->kids = k;
		p->cap = cap;
	}
	p->kids[p->nkids++] = kid;
	t->v[kid].child = true;
	return 0;
}

/* The coroutine node labelled label under parent, made when missing. */
static int cor_node(struct tree *t, int parent, const char *label)
{
	for (size_t i = 0; i < t->v[parent].nkids; i++) {
		int k = t->v[parent].kids[i];
		if (t->v[k].task < 0 && !strcmp(t->v[k].label, label))
			return k;
	}
	int k = node_new(t, -1, label);
	if (k < 0 || kid_add(t, parent, k))
		return -ENOMEM;
	return k;
}

/* Frame f of the task's stack as "qualname file:line", as the tool
 * writes it. */
static char *frame_label(const struct runtime_ops *rt, struct rt_proc *rp, const struct tp_frame *f)
{
	struct prof_frame pf;
	char *s = NULL;
	int ret = rt->frame(rp, f, &pf);
	if (ret == RT_FRAME_SKIP || (ret && ret != -ESTALE && !pf.name))
		pf = (struct prof_frame){.name = "[unknown]"};
	if (pf.file && pf.line > 0)
		ret = asprintf(&s, "%s %s:%d", pf.name, pf.file, pf.line);
	else if (pf.file)
		ret = asprintf(&s, "%s %s", pf.name, pf.file);
	else
		ret = asprintf(&s, "%s", pf.name ? pf.name : "[unknown]");
	return ret < 0 ? NULL : s;
}

struct ctx {
	const struct rt_tasks *ts;
	struct labels *lb;
	struct tree t;
	/* addr -> index + 1, open addressing (a power of two) */
	uint64_t *keys;
	uint32_t *idx;
	size_t hcap;
	/* the tasks each task awaits: awaits[off[i] .. off[i + 1]) */
	int *awaits;
	size_t *off;
	/* cycles, as task index paths ending where they started */
	int **cycles;
	size_t *cycle_len, ncycles;
};

static size_t hslot(const struct ctx *c, uint64_t addr)
{
	return (size_t)((addr >> 4) * 0x9e3779b97f4a7c15ULL) & (c->hcap - 1);
}

/* The index of the task at addr, or -1 (a Future, or a task not listed). */
static int task_index(const struct ctx *c, uint64_t addr)
{
	for (size_t i = hslot(c, addr), k = 0; k < c->hcap; i = (i + 1) & (c->hcap - 1), k++) {
		if (!c->keys[i])
			return -1;
		if (c->keys[i] == addr)
			return (int)c->idx[i] - 1;
	}
	return -1;
}

/* The index of the tasks by address, and each one's list of the tasks it
 * awaits. */
static int index_tasks(struct ctx *c)
{
	const struct rt_tasks *ts = c->ts;
	size_t edges = 0;
	for (c->hcap = 64; c->hcap < ts->n * 2; c->hcap *= 2)
		;
	c->keys = calloc(c->hcap, sizeof(*c->keys));
	c->idx = calloc(c->hcap, sizeof(*c->idx));
	c->off = calloc(ts->n + 1, sizeof(*c->off));
	if (!c->keys || !c->idx || !c->off)
		return -ENOMEM;
	for (size_t i = 0; i < ts->n; i++) {
		size_t s = hslot(c, ts->v[i].addr);
		while (c->keys[s] && c->keys[s] != ts->v[i].addr)
			s = (s + 1) & (c->hcap - 1);
		c->keys[s] = ts->v[i].addr;
		c->idx[s] = (uint32_t)i + 1;
		edges += ts->v[i].nawaiters;
	}
	/* Count, then place, each parent's children in the children's order. */
	for (size_t i = 0; i < ts->n; i++)
		for (uint32_t k = 0; k < ts->v[i].nawaiters; k++) {
			int p = task_index(c, ts->v[i].awaiters[k]);
			if (p >= 0)
				c->off[p + 1]++;
		}
	for (size_t i = 0; i < ts->n; i++)
		c->off[i + 1] += c->off[i];
	size_t *at = malloc((ts->n + 1) * sizeof(*at));
	c->awaits = malloc((edges ? edges : 1) * sizeof(*c->awaits));
	if (!at || !c->awaits) {
		free(at);
		return -ENOMEM;
	}
	memcpy(at, c->off, (ts->n + 1) * sizeof(*at));
	for (size_t i = 0; i < ts->n; i++)
		for (uint32_t k = 0; k < ts->v[i].nawaiters; k++) {
			int p = task_index(c, ts->v[i].awaiters[k]);
			if (p >= 0)
				c->awaits[at[p]++] = (int)i;
		}
	free(at);
	return 0;
}

/* Depth-first search for the back edges of "parent awaits child", as the
 * tool's _find_cycles: each cycle once found. */
static int dfs(struct ctx *c, int v, unsigned char *color, int *path, size_t depth)
{
	color[v] = 1;
	path[depth] = v;
	if (depth >= c->ts->n || depth >= TREE_DEPTH * 4)
		goto done; /* no deeper than the tasks there are */
	/* v's children: the tasks v awaits */
	for (size_t e = c->off[v]; e < c->off[v + 1]; e++) {
		int w = c->awaits[e];
		if (!color[w]) {
			if (dfs(c, w, color, path, depth + 1))
				return -ENOMEM;
		} else if (color[w] == 1) {
			size_t from = 0;
			while (from < depth && path[from] != w)
				from++;
			size_t len = depth - from + 2;
			int **cy = realloc(c->cycles, (c->ncycles + 1) * sizeof(*cy));
			size_t *cl = realloc(c->cycle_len, (c->ncycles + 1) * sizeof(*cl));
			if (cy)
				c->cycles = cy;
			if (cl)
				c->cycle_len = cl;
			int *p = cy && cl ? malloc(len * sizeof(*p)) : NULL;
			if (!p)
				return -ENOMEM;
			memcpy(p, path + from, (len - 1) * sizeof(*p));
			p[len - 1] = w;
			c->cycles[c->ncycles] = p;
			c->cycle_len[c->ncycles++] = len;
		}
	}
done:
	color[v] = 2;
	return 0;
}

static int find_cycles(struct ctx *c)
{
	size_t n = c->ts->n;
	unsigned char *color = calloc(n ? n : 1, 1);
	int *path = malloc((n + 1) * sizeof(*path));
	int ret = color && path ? 0 : -ENOMEM;
	for (size_t v = 0; !ret && v < n; v++)
		if (!color[v] && c->ts->v[v].nawaiters == 0)
			ret = dfs(c, (int)v, color, path, 0);
	/* Tasks that all await one another have no root to start from. */
	for (size_t v = 0; !ret && v < n; v++)
		if (!color[v])
			ret = dfs(c, (int)v, color, path, 0);
	free(color);
	free(path);
	return ret;
}

/* The tree of tools.py's _build_tree: for each task C and each task P
 * that awaits it, P's frames outermost first under P's node, then C under
 * the innermost; then each task that awaits none, its own frames. */
static int build(struct ctx *c)
{
	const struct rt_tasks *ts = c->ts;
	for (size_t i = 0; i < ts->n; i++)
		if (node_new(&c->t, (int)i, NULL) < 0)
			return -ENOMEM;
	bool *awaiting = calloc(ts->n ? ts->n : 1, sizeof(*awaiting));
	if (!awaiting)
		return -ENOMEM;
	for (size_t ci = 0; ci < ts->n; ci++)
		for (uint32_t k = 0; k < ts->v[ci].nawaiters; k++) {
			int p = task_index(c, ts->v[ci].awaiters[k]);
			if (p < 0)
				continue;
			awaiting[p] = true;
			int cur = p;
			for (uint32_t f = c->lb[p].n; f-- > 0 && cur >= 0;)
				cur = cor_node(&c->t, cur, c->lb[p].v[f]);
			if (cur < 0 || kid_add(&c->t, cur, (int)ci)) {
				free(awaiting);
				return -ENOMEM;
			}
		}
	for (size_t i = 0; i < ts->n; i++) {
		if (awaiting[i])
			continue;
		int cur = (int)i;
		for (uint32_t f = c->lb[i].n; f-- > 0 && cur >= 0;)
			cur = cor_node(&c->t, cur, c->lb[i].v[f]);
		if (cur < 0) {
			free(awaiting);
			return -ENOMEM;
		}
	}
	free(awaiting);
	return 0;
}

/* on_path: 1 for the tasks above this node, 2 for those printed already. */
static void render(struct ctx *c, int node, char *prefix, size_t plen, bool last,
		   unsigned char *on_path, unsigned int depth)
{
	const struct node *nd = &c->t.v[node];
	fputs(prefix, stdout);
	fputs(last ? "└── " : "├── ", stdout);
	if (nd->task >= 0) {
		fputs("(T) ", stdout);
		dump_put_esc(c->ts->v[nd->task].name);
	} else {
		putchar(' '); /* the tool's "{flag} {label}" with no flag for a frame */
		dump_put_esc(nd->label);
	}
	if (nd->task >= 0 && on_path[nd->task] == 1) {
		fputs(" [awaits itself: an await cycle]\n", stdout);
		return;
	}
	putchar('\n');
	if (depth >= TREE_DEPTH) {
		if (nd->nkids)
			printf("%s    [deeper than %d levels: not shown]\n", prefix, TREE_DEPTH);
		return;
	}
	const char *ext = last ? "    " : "│   ";
	size_t elen = strlen(ext);
	memcpy(prefix + plen, ext, elen + 1);
	if (nd->task >= 0)
		on_path[nd->task] = 1;
	for (size_t i = 0; i < nd->nkids; i++)
		render(c, nd->kids[i], prefix, plen + elen, i + 1 == nd->nkids, on_path, depth + 1);
	if (nd->task >= 0)
		on_path[nd->task] = 2;
	prefix[plen] = 0;
}

static void print_text(struct ctx *c, const struct runtime_ops *rt, const struct rt_facts *rf,
		       pid_t pid)
{
	const struct rt_tasks *ts = c->ts;
	printf("Process %d (", pid);
	dump_put_esc(rf->comm);
	printf("): %s %s, %zu task%s\n", rt->title, rf->version, ts->n, ts->n == 1 ? "" : "s");
	if (ts->err == -E2BIG)
		printf("[task list cut: more than %d tasks, or a list that loops]\n", 65536);
	else if (ts->err)
		printf("[task list cut short: %s]\n", strerror(-ts->err));
	for (size_t k = 0; k < c->ncycles; k++) {
		printf("[await cycle: ");
		for (size_t i = 0; i < c->cycle_len[k]; i++) {
			if (i)
				fputs(" → ", stdout);
			dump_put_esc(ts->v[c->cycles[k][i]].name);
		}
		printf("]\n");
	}
	unsigned char *on_path = calloc(ts->n ? ts->n : 1, 1);
	char *prefix = malloc((size_t)(TREE_DEPTH + 2) * 8);
	if (!on_path || !prefix) {
		free(on_path);
		free(prefix);
		log_error("out of memory");
		return;
	}
	for (size_t i = 0; i < ts->n; i++) {
		if (c->t.v[i].child)
			continue;
		prefix[0] = 0;
		render(c, (int)i, prefix, 0, true, on_path, 0);
	}
	/* The tasks of a cycle are all awaited, so no root leads to them. */
	for (size_t i = 0; c->ncycles && i < ts->n; i++) {
		if (on_path[i])
			continue;
		prefix[0] = 0;
		render(c, (int)i, prefix, 0, true, on_path, 0);
	}
	free(on_path);
	free(prefix);
}

static int print_json(struct ctx *c, const struct runtime_ops *rt, const struct rt_facts *rf,
		      pid_t pid)
{
	const struct rt_tasks *ts = c->ts;
	json_t *root = NULL, *tasks = json_array(), *cycles = json_array();
	int ret = -ENOMEM;
	if (!tasks || !cycles)
		goto out;
	for (size_t i = 0; i < ts->n; i++) {
		const struct rt_task *t = &ts->v[i];
		char id[24];
		json_t *stack = json_array(), *by = json_array(), *awaits = json_array();
		if (!stack || !by || !awaits) {
			json_decref(stack);
			json_decref(by);
			json_decref(awaits);
			goto out;
		}
		for (uint32_t f = 0; f < c->lb[i].n; f++)
			json_array_append_new(stack, dump_jstr(c->lb[i].v[f]));
		for (uint32_t k = 0; k < t->nawaiters; k++) {
			snprintf(id, sizeof(id), "0x%llx", (unsigned long long)t->awaiters[k]);
			json_array_append_new(by, json_string(id));
		}
		for (size_t e = c->off[i]; e < c->off[i + 1]; e++) {
			snprintf(id, sizeof(id), "0x%llx",
				 (unsigned long long)ts->v[c->awaits[e]].addr);
			json_array_append_new(awaits, json_string(id));
		}
		snprintf(id, sizeof(id), "0x%llx", (unsigned long long)t->addr);
		json_t *jt = json_pack("{s:s, s:o, s:s, s:o, s:b, s:b, s:o, s:o, s:o}", "id", id,
				       "name", dump_jstr(t->name), "state", t->state, "thread",
				       t->tid ? json_integer(t->tid) : json_null(), "running",
				       t->running, "stack_cut", t->stack_cut, "stack", stack,
				       "awaits", awaits, "awaited_by", by);
		if (!jt || json_array_append_new(tasks, jt))
			goto out;
	}
	for (size_t k = 0; k < c->ncycles; k++) {
		json_t *cy = json_array();
		if (!cy || json_array_append_new(cycles, cy))
			goto out;
		for (size_t i = 0; i < c->cycle_len[k]; i++) {
			char id[24];
			snprintf(id, sizeof(id), "0x%llx",
				 (unsigned long long)ts->v[c->cycles[k][i]].addr);
			json_array_append_new(cy, json_string(id));
		}
	}
	root = json_pack("{s:i, s:o, s:s, s:s, s:o, s:o, s:o}", "pid", (int)pid, "comm",
			 dump_jstr(rf->comm), "runtime", rt->name, "runtime_version", rf->version,
			 "tasks_error",
			 ts->err == -E2BIG ? json_string("cut")
			 : ts->err	   ? json_string(strerror(-ts->err))
					   : json_null(),
			 "cycles", cycles, "tasks", tasks);
	tasks = cycles = NULL;
	if (!root)
		goto out;
	ret = json_dumpf(root, stdout, JSON_INDENT(2)) || fputc('\n', stdout) == EOF ? -EIO : 0;
out:
	json_decref(tasks);
	json_decref(cycles);
	json_decref(root);
	return ret;
}

int dump_tasks(const struct runtime_ops *rt, struct rt_proc *rp, const struct rt_facts *rf,
	       pid_t pid, bool json)
{
	struct rt_tasks ts = {0};
	struct ctx c = {.ts = &ts};
	char msg[512];
	int status = 1;
	if (!rt->tasks) {
		log_error("pid %d: %s: dump --tasks reads Python's asyncio tasks; %s has none it "
			  "reads",
			  pid, rt->title, rt->title);
		return 1;
	}
	int ret = rt->tasks(rp, &ts, msg, sizeof(msg));
	if (ret) {
		log_error("%s", ret == -ENOMEM	? "out of memory"
				: ret == -ESRCH ? "no such process (it exited)"
						: msg);
		goto out;
	}
	if (!(c.lb = calloc(ts.n ? ts.n : 1, sizeof(*c.lb))))
		goto nomem;
	for (size_t i = 0; i < ts.n; i++) {
		const struct rt_task *t = &ts.v[i];
		if (t->nframes && !(c.lb[i].v = calloc(t->nframes, sizeof(char *))))
			goto nomem;
		for (uint32_t f = 0; f < t->nframes; f++)
			if (!(c.lb[i].v[c.lb[i].n++] = frame_label(rt, rp, &t->frames[f])))
				goto nomem;
	}
	if (index_tasks(&c) || find_cycles(&c) || build(&c))
		goto nomem;
	if (json) {
		if ((ret = print_json(&c, rt, rf, pid))) {
			log_error("cannot write JSON: %s", strerror(-ret));
			goto out;
		}
	} else {
		print_text(&c, rt, rf, pid);
	}
	if (fflush(stdout) == EOF) {
		log_error("cannot write the output: %s", strerror(errno));
		goto out;
	}
	log_debug("%zu tasks from %s", ts.n, ts.source);
	status = 0;
	goto out;
nomem:
	log_error("out of memory");
out:
	for (size_t i = 0; c.lb && i < ts.n; i++) {
		for (uint32_t f = 0; f < c.lb[i].n; f++)
			free(c.lb[i].v[f]);
		free(c.lb[i].v);
	}
	free(c.lb);
	for (size_t i = 0; i < c.t.n; i++)
		free(c.t.v[i].kids);
	free(c.t.v);
	for (size_t k = 0; k < c.ncycles; k++)
		free(c.cycles[k]);
	free(c.cycles);
	free(c.cycle_len);
	free(c.keys);
	free(c.idx);
	free(c.off);
	free(c.awaits);
	if (rt->tasks_free)
		rt->tasks_free(&ts);
	return status;
}
