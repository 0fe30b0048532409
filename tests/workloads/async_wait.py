# async_wait.py [NAP] - asyncio tasks that wait, for record --mode wall
# --async (tests/functional/test_tasks.py): "napper" awaits a sleep of NAP
# seconds (default 2) each time a line comes on its standard input, and
# answers 'nap SECONDS idle SECONDS', the time that await took by its own
# clock, and the time it awaited that line (on a queue) before it. "spinner" computes in
# short slices meanwhile, so that the loop's thread runs and a task runs
# now and then. Prints 'ready' first.
import asyncio
import sys
import threading
import time

NAP = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0


def spin(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


async def spinner():
    while True:
        spin(20000)
        await asyncio.sleep(0.005)


async def napper(lines):
    while True:
        t0 = time.monotonic()
        await lines.get()  # LINE:idle
        t1 = time.monotonic()
        await asyncio.sleep(NAP)  # LINE:nap
        print("nap %.6f idle %.6f" % (time.monotonic() - t1, t1 - t0))
        sys.stdout.flush()


async def main():
    loop = asyncio.get_running_loop()
    lines = asyncio.Queue()

    def reader():
        for _ in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, 1)
    threading.Thread(target=reader, daemon=True).start()
    loop.create_task(napper(lines), name="napper")
    loop.create_task(spinner(), name="spinner")
    print("ready")
    sys.stdout.flush()
    await asyncio.sleep(3600)


asyncio.run(main())
