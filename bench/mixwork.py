# mixwork.py - a fixed amount of Python + C work: a 30-deep Python chain
# that calls into re, json and a keyed sort (C code of the standard library
# calling back into Python). Usage: python mixwork.py ROUNDS. Prints the
# seconds the work took.
import json
import re
import sys
import time

PATTERN = re.compile(r"(\w+)@(\w+)\.com")
TEXT = "contact: alice@example.com, bob@example.org; " * 20
DOC = {"a": list(range(50)), "b": {"c": "d" * 40, "e": [1.5, 2.5, None, True]}}
ITEMS = list(range(300, 0, -1))


def leaf():
    PATTERN.search(TEXT)
    json.dumps(DOC)
    sorted(ITEMS, key=lambda x: -x)


def chain(depth):
    if depth <= 1:
        return leaf()
    return chain(depth - 1)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    t0 = time.perf_counter()
    for _ in range(rounds):
        chain(30)
    sys.stdout.write("%.4f\n" % (time.perf_counter() - t0))


if __name__ == "__main__":
    main()
