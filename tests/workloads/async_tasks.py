# async_tasks.py - named asyncio tasks that sleep, await each other and
# gather others, for dump --tasks (tests/functional/test_tasks.py): a chain
# of coroutines in one task, a task awaiting another, a gather of two, a
# method, and on 3.11+ a TaskGroup of two. Once every task waits, a thread
# (the loop's own stays idle) prints the tree the process itself sees, as
# 'tree JSON': each pending task by name, with its coroutines' frames
# innermost first ("qualname file:line"; co_name before 3.11) and the names
# of the tasks that await it, a task awaiting another when its _fut_waiter
# is that task, a gather of it, or the future of the TaskGroup it is in
# (the parent waiting in the group's __aexit__). Then 'ready', and it waits
# until killed.
# async_tasks.py py: the same graph of pure-Python tasks
# (asyncio.tasks._PyTask, from the loop's task factory), but the main one;
# the tree is of the tasks the factory made and those all_tasks() gives
# (which on 3.14+ lists the C tasks only).
import asyncio
import json
import sys
import threading
import time

LONG = 3600
PY = sys.argv[1:] == ["py"]
MADE = []


class PyTask(asyncio.tasks._PyTask):
    def set_name(self, value):
        # 3.13's create_task names a factory's task afterwards, None
        # included (as "None").
        if value is not None:
            super().set_name(value)


def py_task(loop, coro, **kw):
    # Named apart from the C tasks' default names (gather's children).
    kw["name"] = kw.get("name") or "py-%d" % len(MADE)
    t = PyTask(coro, loop=loop, **kw)
    MADE.append(t)
    return t


def pending(loop):
    return [t for t in set(asyncio.all_tasks(loop)) | set(MADE) if not t.done()]


async def leaf():
    await asyncio.sleep(LONG)


async def worker():
    await leaf()


async def child():
    await asyncio.sleep(LONG)


async def awaiter():
    await asyncio.get_running_loop().create_task(child(), name="awaited-child")


async def gathered():
    await asyncio.sleep(LONG)


async def gather_parent():
    await asyncio.gather(gathered(), gathered())


class Svc:
    async def method(self):
        await asyncio.sleep(LONG)


async def group():
    async with asyncio.TaskGroup() as tg:
        tg.create_task(worker(), name="tg-worker-1")
        tg.create_task(worker(), name="tg-worker-2")


def frames(task):
    """The frames of task's chain of coroutines, innermost first."""
    out, c = [], task.get_coro()
    while c is not None and type(c).__name__ == "coroutine" and c.cr_frame is not None:
        code = c.cr_code
        name = getattr(code, "co_qualname", code.co_name)
        out.append("%s %s:%d" % (name, code.co_filename, c.cr_frame.f_lineno))
        c = c.cr_await
    return out[::-1]


def group_tasks(task, w):
    """The tasks of the TaskGroup in whose __aexit__ task waits on w."""
    c = task.get_coro()
    while c is not None and type(c).__name__ == "coroutine" and \
            type(c.cr_await).__name__ == "coroutine":
        c = c.cr_await
    f = getattr(c, "cr_frame", None)
    tg = f.f_locals.get("self") if f is not None else None
    if type(tg).__name__ == "TaskGroup" and tg._on_completed_fut is w:
        return list(tg._tasks)
    return []


def report(loop, main):
    # Once the main task waits too, nothing runs on the loop.
    while main._fut_waiter is None:
        time.sleep(0.001)
    tasks = pending(loop)
    tree = {t.get_name(): {"stack": frames(t), "awaited_by": []} for t in tasks}
    for t in tasks:
        w = t._fut_waiter
        kids = [w] if w in tasks else list(getattr(w, "_children", ())) \
            if type(w).__name__ == "_GatheringFuture" else group_tasks(t, w)
        for k in kids:
            if k in tasks:
                tree[k.get_name()]["awaited_by"].append(t.get_name())
    print("tree " + json.dumps(tree))
    print("ready")
    sys.stdout.flush()


async def main():
    loop = asyncio.get_running_loop()
    if PY:
        loop.set_task_factory(py_task)
    mine = [loop.create_task(worker(), name="worker"),
            loop.create_task(awaiter(), name="awaiter"),
            loop.create_task(gather_parent(), name="gather-parent"),
            loop.create_task(Svc().method(), name="svc-method")]
    if sys.version_info >= (3, 11):
        mine.append(loop.create_task(group(), name="group"))
    # Every task of the graph started and waiting: each one that waits
    # on a future (the others wait on tasks or a gather).
    while len([t for t in pending(loop) if t._fut_waiter is not None]) < len(pending(loop)) - 1:
        await asyncio.sleep(0)
    threading.Thread(target=report, args=(loop, asyncio.current_task()), daemon=True).start()
    await asyncio.sleep(LONG)


asyncio.run(main())
