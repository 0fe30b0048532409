# reuse.py - creates, runs and frees one function after another, so that a new
# code object often lands at a freed one's address. Prints "ready", then
# "gen I ADDRESS" for each generation before running it, until killed.
#
# Each generation runs for CPU_MS of CPU time, not of wall time, so that on a
# loaded machine it is still on a CPU long enough to be sampled.
import gc
import sys
import time

SRC = ("def f_%d(cpu, budget):\n    n = 0\n    end = cpu() + budget\n"
       "    while cpu() < end:\n        n += 1\n")
CPU = getattr(time, "process_time", None) or time.clock  # 2.7: time.clock is CPU time
CPU_MS = float(sys.argv[1]) if len(sys.argv) > 1 else 50


def make(i):
    ns = {}
    exec(compile(SRC % i, "<gen-%d>" % i, "exec"), ns)
    return ns["f_%d" % i], ns


def main():
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    i = 0
    while True:
        f, ns = make(i)
        sys.stdout.write("gen %d %d\n" % (i, id(f.__code__)))
        sys.stdout.flush()
        f(CPU, CPU_MS / 1000.0)
        # f and its globals refer to each other: break the cycle and
        # collect, so the code object is freed now.
        ns.clear()
        del f, ns
        gc.collect()
        i += 1


main()
