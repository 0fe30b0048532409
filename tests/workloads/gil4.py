# gil4.py - four CPU-bound threads in functions of their own (hog_a, hog_b,
# hog_c, hog_d) for SECONDS, on one GIL: each holds it for part of the time
# and waits for it the rest. At the end one line "result JSON": for each
# function its thread's native id and CPU time (a GIL build runs Python only
# while holding the GIL, so the CPU time is the time it held it).
# Usage: python gil4.py SECONDS
import json
import sys
import threading
import time

results = {}


def spin(deadline):
    n = 0
    while time.time() < deadline:
        for _ in range(500):
            n += 1
    return n


def hog_a(deadline):
    return spin(deadline)


def hog_b(deadline):
    return spin(deadline)


def hog_c(deadline):
    return spin(deadline)


def hog_d(deadline):
    return spin(deadline)


def run(fn, deadline, start):
    start.wait()
    fn(deadline)
    results[fn.__name__] = {"tid": threading.current_thread().native_id, "cpu": time.thread_time()}


def main():
    seconds = float(sys.argv[1])
    start = threading.Barrier(4)
    deadline = time.time() + seconds
    threads = [threading.Thread(target=run, args=(fn, deadline, start)) for fn in (hog_a, hog_b, hog_c, hog_d)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("result " + json.dumps(results))
    sys.stdout.flush()


main()
