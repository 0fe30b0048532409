#!/usr/bin/env python3
"""bench/native_depth.py - what a native frame costs in BPF.

A Python caller of a C++ chain of N frames (tests/workloads/deep.cc, through
tests/workloads/native_deep.py), sampled with `record --native all` at
1 kHz, for N in --depths: with kernel.bpf_stats_enabled, the BPF run time
of the perf_event program (tail calls charged to it) per sample of the
process. Prints ns per sample at each depth and, from the shallowest to the
deepest, the ns per native frame. Rounds alternate the depths; medians.

Needs root, g++ and pyenv's python3.12. Prints figures; asserts nothing.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from overhead import cost_per_sample  # noqa: E402

WORKLOADS = os.path.join(ROOT, "tests", "workloads")


def cost(taipan, python, lib, depth, seconds):
    work = subprocess.Popen([python, os.path.join(WORKLOADS, "native_deep.py"), lib, str(depth)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    work.stdout.readline()
    return cost_per_sample(taipan, work, seconds, ["--native", "all"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--taipan", required=True)
    ap.add_argument("--python", default="/root/.pyenv/versions/3.12.1/bin/python3.12")
    ap.add_argument("--depths", default="10,100,250,480")
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        was = f.read().strip()
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["g++", "-O2", "-fno-optimize-sibling-calls", "-fPIC", "-shared",
                        os.path.join(WORKLOADS, "deep.cc"), "-o", os.path.join(d, "deep.so")], check=True)
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        try:
            got = {n: [] for n in depths}
            for r in range(args.rounds):
                for n in depths:
                    c = cost(args.taipan, args.python, d, n, args.seconds)
                    if c:
                        got[n].append(c)
                sys.stderr.write("  round %d/%d\n" % (r + 1, args.rounds))
        finally:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write(was)
    med = {n: statistics.median(v) for n, v in got.items() if v}
    print("BPF cost per sample of a C++ chain under Python, --native all, 1 kHz (median of %d):"
          % args.rounds)
    print("  %12s %14s" % ("C++ frames", "ns per sample"))
    for n in depths:
        print("  %12d %14s" % (n, "%.0f" % med[n] if n in med else "-"))
    lo, hi = min(med), max(med)
    if hi > lo:
        print("  per native frame: %.1f ns (from %d to %d frames)" % ((med[hi] - med[lo]) / (hi - lo), lo, hi))


if __name__ == "__main__":
    main()
