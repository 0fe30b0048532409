# callmix.py - a call-heavy load: many small functions made by exec() that
# call each other at random, with random.randrange() in every one. On 3.12
# a sample can land while a call is half made (issue 14, item 5).
#
# Usage: python callmix.py SECONDS [FUNCTIONS]
# Prints "ready" once the functions exist and the calls run.
import random
import sys
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 10
COUNT = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
SRC = """def f_%d(depth):
    if depth <= 0:
        return randrange(1000)
    return FUNCS[randrange(COUNT)](depth - randrange(1, 3)) + randrange(7)
"""


def main():
    ns = {"randrange": random.randrange, "COUNT": COUNT}
    funcs = []
    for i in range(COUNT):
        exec(compile(SRC % i, "<callmix-%d>" % i, "exec"), ns)
        funcs.append(ns["f_%d" % i])
    ns["FUNCS"] = funcs
    deadline = time.time() + SECONDS
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    n = 0
    while time.time() < deadline:
        for _ in range(100):
            n += funcs[random.randrange(COUNT)](random.randrange(5, 40))
    return n


main()
