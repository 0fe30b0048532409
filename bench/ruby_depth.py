#!/usr/bin/env python3
"""bench/ruby_depth.py - what a Ruby sample costs in BPF, by depth.

A Ruby thread that recurses N calls deep and spins there
(tests/workloads/rb_depth.rb), sampled at 1 kHz for N in --depths, and in
the same rounds CPython at the same depths (bench/work.py) for a side by
side figure: with kernel.bpf_stats_enabled, the BPF run time of the
perf_event program (its tail calls charged to it) per sample of the
process. --native none isolates the interpreted walk; --native all adds
the native one. Rounds alternate the targets; medians.

Needs root, ruby3.1 and pyenv's python3.12. Prints figures; asserts nothing.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from overhead import cost_per_sample  # noqa: E402

WORKLOADS = os.path.join(ROOT, "tests", "workloads")


def cost(taipan, argv, native, seconds):
    work = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if argv[0].endswith("ruby3.1"):
        work.stdout.readline()  # "ready"
    else:
        time.sleep(0.5)
    return cost_per_sample(taipan, work, seconds, ["--native", native])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--taipan", required=True)
    ap.add_argument("--ruby", default="/usr/bin/ruby3.1")
    ap.add_argument("--python", default="/root/.pyenv/versions/3.12.1/bin/python3.12")
    ap.add_argument("--depths", default="10,50,500")
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    targets = []
    for n in depths:
        targets.append(("ruby", n, [args.ruby, os.path.join(WORKLOADS, "rb_depth.rb"), str(n)]))
        if os.path.exists(args.python):
            targets.append(("python", n, [args.python, os.path.join(HERE, "work.py"), str(n), "4000000000"]))
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    got = {}
    try:
        for r in range(args.rounds):
            for kind, n, argv in targets:
                for native in ("none", "all"):
                    c = cost(args.taipan, argv, native, args.seconds)
                    if c:
                        got.setdefault((kind, n, native), []).append(c)
            sys.stderr.write("  round %d/%d\n" % (r + 1, args.rounds))
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(was)
    med = {k: statistics.median(v) for k, v in got.items()}

    def cell(k):
        return "%.0f" % med[k] if k in med else "-"
    print("BPF cost per sample, ns, 1 kHz (median of %d rounds); depth: the interpreted frames"
          % args.rounds)
    print("  %6s %14s %14s %14s %14s" % ("depth", "ruby, no nat.", "ruby, native", "python, no nat.",
                                         "python, native"))
    for n in depths:
        print("  %6d %14s %14s %14s %14s" % (n, cell(("ruby", n, "none")), cell(("ruby", n, "all")),
                                             cell(("python", n, "none")), cell(("python", n, "all"))))
    lo, hi = min(depths), max(depths)
    if hi > lo and ("ruby", lo, "none") in med and ("ruby", hi, "none") in med:
        print("  per Ruby frame: %.1f ns (from %d to %d frames)"
              % ((med[("ruby", hi, "none")] - med[("ruby", lo, "none")]) / (hi - lo), lo, hi))


if __name__ == "__main__":
    main()
