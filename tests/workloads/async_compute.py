# async_compute.py - asyncio tasks that compute in a coroutine, for record
# --async (tests/functional/test_tasks.py): "alpha" awaits its child task
# "alpha-child", which computes in spin(); "beta" computes in spin() itself,
# half as long a slice on average (of random length). Each task adds
# up its own CPU time between awaits
# (time.thread_time_ns around each slice). Prints 'ready'; then, for each
# line on its standard input, 'cpu JSON' ({task name: ns}).
# async_compute.py py: the tasks are pure-Python ones (asyncio.tasks._PyTask,
# from the loop's task factory).
import asyncio
import json
import random
import sys
import threading
import time

CPU = {}


def spin(n):
    x = 0
    for i in range(n):  # LINE:spin
        x += i * i
    return x


async def compute(name, weight):
    rng = random.Random(name)
    while True:
        # Slices of random length, memoryless: the tasks' turns would
        # otherwise follow a pattern that aliases with the sampling clock.
        # Drawn before the clock starts, so that the time measured is
        # spin's alone, as the samples counted are.
        n = 1 + int(rng.expovariate(1 / weight))
        t0 = time.thread_time_ns()
        spin(n)
        CPU[name] = CPU.get(name, 0) + time.thread_time_ns() - t0
        await asyncio.sleep(0)


async def alpha():
    await asyncio.get_running_loop().create_task(compute("alpha-child", 20000), name="alpha-child")


def answer():
    print("ready")
    sys.stdout.flush()
    for _ in sys.stdin:
        print("cpu " + json.dumps(CPU))
        sys.stdout.flush()


async def main():
    loop = asyncio.get_running_loop()
    if sys.argv[1:] == ["py"]:
        loop.set_task_factory(lambda loop, coro, **kw: asyncio.tasks._PyTask(coro, loop=loop, **kw))
    loop.create_task(alpha(), name="alpha")
    loop.create_task(compute("beta", 10000), name="beta")
    threading.Thread(target=answer, daemon=True).start()
    await asyncio.sleep(3600)


asyncio.run(main())
