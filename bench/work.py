# work.py - a fixed amount of pure-Python CPU work at a given stack depth.
# Usage: python work.py DEPTH ITERATIONS [CPU]. Prints the seconds the work
# took. With CPU, the process runs on that CPU only. With WORK_DISTINCT=1 in
# the environment the stack holds DEPTH different functions (each frame its
# own code object, as in real programs) rather than one recursive function.
import os
import sys
import time


def busy(n):
    x = 0
    for i in range(n):
        x += i * i % 7
    return x


def descend(depth, n):
    if depth <= 1:
        return busy(n)
    return descend(depth - 1, n)


def distinct(depth):
    """A chain of depth functions d_<depth-1> -> ... -> d_1 -> busy."""
    ns = {"busy": busy}
    src = ["def d_1(n):\n    return busy(n)\n"]
    src += ["def d_%d(n):\n    return d_%d(n)\n" % (i, i - 1) for i in range(2, depth)]
    exec(compile("".join(src), "distinct", "exec"), ns)
    return ns["d_%d" % (depth - 1)] if depth > 1 else busy


def main():
    sys.setrecursionlimit(100000)
    depth = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000000
    if len(sys.argv) > 3:
        os.sched_setaffinity(0, {int(sys.argv[3])})
    top = distinct(depth) if os.environ.get("WORK_DISTINCT") == "1" else None
    t0, c0 = time.perf_counter(), time.process_time()
    if top:
        top(n)
    else:
        descend(depth, n)
    # wall seconds of the work, and this process's CPU seconds
    sys.stdout.write("%.6f %.6f\n" % (time.perf_counter() - t0, time.process_time() - c0))


main()
