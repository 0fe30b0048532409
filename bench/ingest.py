#!/usr/bin/env python3
"""bench/ingest.py - user-space CPU per sample, the reader fed at full speed.

Starts one copy of bench/mixwork.py per CPU (a 30-deep Python chain calling
into re, json and a keyed sort), then runs build/bench/ingest (bench/ingest.c)
on them for each --native mode: it records 2 s with BPF, then feeds the
session those samples again from memory, 20 times, and prints the CPU a
sample took once the session's caches were warm. Goal (issue 30): at most
2 us a sample.

Needs root. Prints figures; asserts nothing.
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ingest", required=True, help="build/bench/ingest")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rate", type=int, default=999)
    ap.add_argument("--copies", type=int, default=os.cpu_count())
    args = ap.parse_args()
    work = [subprocess.Popen([args.python, os.path.join(HERE, "mixwork.py"), "100000000"],
                             stdout=subprocess.DEVNULL) for _ in range(args.copies)]
    try:
        pids = sum((["-p", str(w.pid)] for w in work), [])
        print("%d copies of mixwork.py (%s), %d Hz:" % (args.copies, args.python, args.rate))
        print("  %-9s %8s %10s %12s %12s" % ("native", "samples", "bytes each", "first pass", "later"))
        for mode in ("none", "filtered", "all"):
            out = subprocess.run([args.ingest, "-s", "2", "-r", str(args.rate), "--native", mode] + pids,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
            rec = re.search(r"recorded: (\d+) samples .*?, (\d+) bytes each", out)
            first = re.search(r"first pass: ([\d.]+) us CPU", out)
            later = re.search(r"later passes: ([\d.]+) us CPU", out)
            if not (rec and first and later):
                print("  %-9s failed: %s" % (mode, out.strip()))
                continue
            print("  %-9s %8s %10s %9s us %9s us" % (mode, rec.group(1), rec.group(2), first.group(1),
                                                     later.group(1)))
    finally:
        for w in work:
            w.kill()
            w.wait()


if __name__ == "__main__":
    main()
