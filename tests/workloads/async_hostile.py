# async_hostile.py MODE - asyncio graphs that a reader of tasks must bound:
#   cycle  two tasks, cycle-a and cycle-b, each awaiting the other;
#   many   100,000 tasks (many-N), each asleep;
#   none   no asyncio at all (it is never imported);
#   gen    1,000 tasks asleep, and a thread that computes inside a plain
#          generator, no task's: every sample of it has a generator's frame
#          outermost.
# Prints 'ready' once they wait, then waits until killed.
import sys
import threading
import time

MODE = sys.argv[1]
if MODE == "none":
    print("ready")
    sys.stdout.flush()
    time.sleep(3600)
    sys.exit(0)

import asyncio  # noqa: E402

TASKS = {}


def churn():
    while True:
        n = 0
        for i in range(10000):
            n += i * i
        yield n


def drive():
    for _ in churn():
        pass


async def sleeper():
    await asyncio.sleep(3600)


async def await_other(name):
    while name not in TASKS:
        await asyncio.sleep(0)
    await TASKS[name]


async def main():
    loop = asyncio.get_running_loop()
    if MODE == "cycle":
        TASKS["cycle-b"] = loop.create_task(await_other("cycle-a"), name="cycle-b")
        TASKS["cycle-a"] = loop.create_task(await_other("cycle-b"), name="cycle-a")
    else:
        for i in range(1000 if MODE == "gen" else 100000):
            TASKS[i] = loop.create_task(sleeper(), name="many-%d" % i)
    # Every task waits on a future of its own (a sleep, or the other task).
    while any(t._fut_waiter is None for t in TASKS.values()):
        await asyncio.sleep(0)
    if MODE == "gen":
        threading.Thread(target=drive, daemon=True).start()
    print("ready")
    sys.stdout.flush()
    await asyncio.sleep(3600)


asyncio.run(main())
