# gens.py - a stack whose frames live in three places: the thread's data
# stack, a generator object on the heap, and (3.12+) shim frames on the C
# stack where C code calls back into Python:
#   <module> -> main -> via_c -> (map, C) -> <lambda> -> (next, C) -> gen -> leaf
# Usage: python gens.py SECONDS. Prints "ready" once the busy loop runs.
import sys
import time


def leaf(deadline):
    n = 0
    while time.time() < deadline:  # LINE:loop
        n += 1  # LINE:body
    return n


def gen(deadline):
    while True:
        yield leaf(deadline)  # LINE:call-leaf


def via_c(seconds):
    g = gen(time.time() + seconds)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    return list(map(lambda _: next(g), range(1)))  # LINE:call-map


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    via_c(seconds)  # LINE:call-via-c


main()  # LINE:call-main
