# deep.py - recursion DEPTH deep (default 1000), busy at the bottom.
# Usage: python deep.py SECONDS [DEPTH]. Prints "ready" at the bottom, in spin.
import sys
import time

sys.setrecursionlimit(100000)


def spin(deadline):
    # Ready from inside spin: a dump that follows finds it innermost.
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    n = 0
    while time.time() < deadline:
        n += 1
    return n


def rec(n, deadline):
    if n == 0:
        return spin(deadline)
    return rec(n - 1, deadline)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    depth = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rec(depth, time.time() + seconds)


main()
