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
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from overhead import prog_stats, target_samples  # noqa: E402

WORK = os.path.join(ROOT, "tests", "workloads", "async_compute.py")


def one(taipan, python, seconds, extra):
    """(taipan's CPU ns per kept sample, BPF ns per sample) of one recording."""
    work = subprocess.Popen([python, WORK], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    work.stdout.readline()  # ready
    out = tempfile.mktemp(suffix=".folded")
    rec = subprocess.Popen([taipan, "record", "-q", "--no-kernel", "-r", "1000", "-p", str(work.pid),
                            "-d", str(seconds + 2), "-o", out] + list(extra))
    try:
        time.sleep(1)  # loaded and attached
        first, t1 = prog_stats("on_sample", rec.pid), target_samples(rec.pid)
        time.sleep(seconds)
        last, t2 = prog_stats("on_sample", rec.pid), target_samples(rec.pid)
        _, status, ru = os.wait4(rec.pid, 0)
    finally:
        work.kill()
        work.wait()
    kept = 0
    if os.path.exists(out):
        kept = sum(int(line.rsplit(" ", 1)[1]) for line in open(out))
        os.unlink(out)
    cpu = (ru.ru_utime + ru.ru_stime) * 1e9 / kept if kept else None
    bpf = (last[0] - first[0]) / (t2 - t1) if first and last and t2 and t2 != t1 else None
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
