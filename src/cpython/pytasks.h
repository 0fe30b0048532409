/* pytasks.h - the asyncio tasks of a live Python process, read from its
 * memory with nothing stopped and nothing called: what `taipan dump
 * --tasks` prints (doc/design/python-stacks.md, "asyncio tasks").
 *
 * Where the tasks are:
 *   3.14+     each thread state's list of tasks and the interpreter's (for
 *             threads that exited), as the _asyncio module's .AsyncioDebug
 *             section lays them out; a task says which tasks await it;
 *   3.8-3.13  the registry asyncio.tasks keeps (_all_tasks, a WeakSet;
 *             3.12+: _scheduled_tasks and _eager_tasks), found through
 *             sys.modules; which task awaits which is read from what each
 *             one waits on (its _fut_waiter: a task, a gather of tasks, or
 *             the future of a TaskGroup whose __aexit__ it runs),
 *             with TaskObj's layout generated from each minor's _asyncio
 *             DWARF (src/cpython/gen/pyasync_table.c).
 * A task's coroutine stack is its coroutine, then what each coroutine
 * awaits, as cr_await does (Objects/genobject.c, _PyGen_yf).
 */
#ifndef TAIPAN_CPYTHON_PYTASKS_H
#define TAIPAN_CPYTHON_PYTASKS_H

#include <stddef.h>
#include <stdint.h>

#include "core/runtime.h"
#include "cpython/pyproc.h"

/* The fields of _asyncio's TaskObj that are read before 3.14, per minor
 * version (generated). */
struct py_async_layout {
	uint32_t hexversion;
	const char *source;
	int32_t task_loop, task_state, task_fut_waiter, task_coro, task_name;
};
extern const struct py_async_layout py_async_table[];
extern const unsigned int py_async_table_len;

/* Bounds: a hostile or huge graph is cut and says so, never a hang. */
#define PYTASKS_MAX 65536	/* tasks listed */
#define PYTASKS_STACK_MAX 64	/* coroutines followed from a task */
#define PYTASKS_AWAITERS_MAX 64 /* tasks that await one task */
#define PYTASKS_READS (1u << 22)

/* The tasks of pp's process into *out (free with pytasks_free in every
 * case): 0 (out->err says whether the list was cut); -ENOENT when the
 * process runs no asyncio (never imported it) and msg says so; -ENOTSUP
 * for a version whose tasks are not read; -ESRCH; -ENOMEM; -EFAULT when
 * the registry cannot be read. */
int pytasks_read(const struct pyproc *pp, struct rt_tasks *out, char *msg, size_t msglen);
void pytasks_free(struct rt_tasks *t);

#endif /* TAIPAN_CPYTHON_PYTASKS_H */
