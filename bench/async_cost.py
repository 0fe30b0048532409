#!/usr/bin/env python3
"""bench/async_cost.py - what record --async costs per sample, side by side
with the same recording without it, in alternating rounds.

The workload is tests/workloads/async_compute.py (tasks computing in
coroutines on one thread). For each round, `record -r 1000` of it for a few
seconds, with and without --async: taipan's own CPU time (user + system, of
the record process) per sample it kept, and the BPF run time per sample of
the perf program (kernel.bpf_stats_enabled; the same program either way:
--async adds no BPF read). Needs root. Prints figures; asserts nothing.
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from overhead import record_cost  # noqa: E402

WORK = os.path.join(ROOT, "tests", "workloads", "async_compute.py")


def one(taipan, python, seconds, extra):
    """(taipan's CPU ns per kept sample, BPF ns per sample) of one recording."""
    work = subprocess.Popen([python, WORK], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    work.stdout.readline()  # ready
    bpf, cpu = record_cost(taipan, work, seconds, extra)
    return cpu, bpf


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--taipan", required=True)
    ap.add_argument("--python", default="/root/.pyenv/versions/3.12.1/bin/python3.12")
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    got = {"plain": [], "async": []}
    try:
        for _ in range(args.rounds):
            for name, extra in (("plain", []), ("async", ["--async"])):
                got[name].append(one(args.taipan, args.python, args.seconds, extra))
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(was)
    med = {k: (statistics.median(c for c, _ in v if c), statistics.median(b for _, b in v if b))
           for k, v in got.items()}
    for k, (cpu, bpf) in med.items():
        print("%-6s taipan CPU %7.0f ns per kept sample, BPF %6.0f ns per sample" % (k, cpu, bpf))
    print("--async / plain: taipan CPU %.3f, BPF %.3f" % (med["async"][0] / med["plain"][0],
                                                       med["async"][1] / med["plain"][1]))


if __name__ == "__main__":
    main()
