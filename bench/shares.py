# shares.py - three functions at about 60/30/10% of the CPU, with the truth
# measured by the workload itself. Usage: python shares.py SECONDS.
# Prints {"f60": share, "f30": share, "f10": share, "seconds": wall} as JSON.
import json
import sys
import time


def chunk(n):
    x = 0
    for i in range(n):
        x += i * i % 7
    return x


def f60(n):
    return chunk(n)


def f30(n):
    return chunk(n)


def f10(n):
    return chunk(n)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    spent = {"f60": 0.0, "f30": 0.0, "f10": 0.0}
    plan = [("f60", f60)] * 6 + [("f30", f30)] * 3 + [("f10", f10)]
    n = 2000  # about 0.2 ms a call
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for name, fn in plan:
            a = time.perf_counter()
            fn(n)
            spent[name] += time.perf_counter() - a
    wall = time.perf_counter() - t0
    total = sum(spent.values())
    out = {k: v / total for k, v in spent.items()}
    out["seconds"] = wall
    sys.stdout.write(json.dumps(out) + "\n")


main()
