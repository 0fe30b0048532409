# reuse.py - creates, runs and frees one function after another, so that a new
# code object often lands at a freed one's address. Prints "ready", then
# "gen I ADDRESS" for each generation before running it.
import gc
import sys
import time

SRC = "def f_%d(deadline):\n    n = 0\n    while time.time() < deadline:\n        n += 1\n"


def make(i):
    ns = {"time": time}
    exec(compile(SRC % i, "<gen-%d>" % i, "exec"), ns)
    return ns["f_%d" % i], ns


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    time.sleep(0.5)  # the profiler attaches now
    for i in range(count):
        f, ns = make(i)
        sys.stdout.write("gen %d %d\n" % (i, id(f.__code__)))
        sys.stdout.flush()
        f(time.time() + 0.08)
        # f and its globals refer to each other: break the cycle and
        # collect, so the code object is freed now.
        ns.clear()
        del f, ns
        gc.collect()


main()
