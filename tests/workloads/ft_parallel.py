# ft_parallel.py - four threads, each in a function of its own (spin_w,
# spin_x, spin_y, spin_z), busy at the same time for SECONDS of wall-clock
# time; on a free-threaded build they run in parallel. Prints "ready" when
# they start, and at the end one line "result JSON": for each function the
# native id of its thread and the CPU time that thread used.
# Usage: python ft_parallel.py SECONDS
import json
import sys
import threading
import time

seconds = float(sys.argv[1])
results = {}
start = threading.Barrier(5)


def spin(name, deadline):
    n = 0
    while time.time() < deadline:
        for _ in range(2000):
            n += 1
    return n


def spin_w(deadline):
    return spin("w", deadline)


def spin_x(deadline):
    return spin("x", deadline)


def spin_y(deadline):
    return spin("y", deadline)


def spin_z(deadline):
    return spin("z", deadline)


def run(fn):
    start.wait()
    fn(time.time() + seconds)
    results[fn.__name__] = {"tid": threading.get_native_id(), "cpu": time.thread_time()}


def main():
    threads = [threading.Thread(target=run, args=(fn,)) for fn in (spin_w, spin_x, spin_y, spin_z)]
    for t in threads:
        t.start()
    t0 = time.time()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    start.wait()
    for t in threads:
        t.join()
    results["wall"] = time.time() - t0
    sys.stdout.write("result %s\n" % json.dumps(results))
    sys.stdout.flush()


main()
