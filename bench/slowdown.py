#!/usr/bin/env python3
"""bench/slowdown.py - what sampling costs the profiled work, with its floor.

One copy per CPU of a fixed amount of Python + C work (bench/mixwork.py: a
30-deep chain calling into re, json and a keyed sort), run under each of:
- nothing;
- the floor: `taipan record -a` whose perf_event program returns at once
  (TAIPAN_BENCH_EMPTY_SAMPLE=1), what any BPF sampler pays per interrupt;
- `taipan record -a --native none`;
- `taipan record -a` (the default: native frames, filtered view);
at --rates, in alternating rounds. Prints each run's slowdown (the work's
own seconds, the mean over the copies, over the unprofiled run's of the
same round): median and min-max.

Needs root. Prints figures; asserts nothing.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import signal
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from overhead import prog_stats  # noqa: E402


def run_round(taipan, python, rate, mode, rounds, ncpu):
    """Seconds of work per copy (the mean over the copies) under mode."""
    script = " & ".join("%s %s %d" % (python, os.path.join(HERE, "mixwork.py"), rounds)
                        for _ in range(ncpu)) + " & wait"
    if mode == "none":
        return work_seconds(script, ncpu)
    out = tempfile.mktemp(suffix=".folded")
    env = dict(os.environ)
    extra = []
    if mode == "floor":
        env["TAIPAN_BENCH_EMPTY_SAMPLE"] = "1"
    elif mode == "native-none":
        extra = ["--native", "none"]
    rec = subprocess.Popen([taipan, "record", "-q", "-a", "-r", str(rate), "-o", out] + extra, env=env)
    try:
        deadline = time.time() + 30
        while (prog_stats("on_sample", rec.pid) or (0, 0))[1] == 0:  # attached: it has run
            if time.time() > deadline or rec.poll() is not None:
                raise RuntimeError("taipan did not start")
            time.sleep(0.1)
        return work_seconds(script, ncpu)
    finally:
        rec.send_signal(signal.SIGINT)
        rec.wait()
        if os.path.exists(out):
            os.unlink(out)


def work_seconds(script, ncpu):
    stdout = subprocess.run(["sh", "-c", script], stdout=subprocess.PIPE, text=True).stdout
    times = [float(t) for t in stdout.split()]
    if len(times) != ncpu:
        raise RuntimeError("work output: %r" % stdout)
    return statistics.mean(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--taipan", required=True)
    ap.add_argument("--python", default="/root/.pyenv/versions/3.12.1/bin/python3.12")
    ap.add_argument("--rates", default="1000,10000")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    ap.add_argument("--work", type=int, default=100000, help="chain calls per copy (about 3 s)")
    args = ap.parse_args()
    ncpu = os.cpu_count()
    modes = ["floor", "native-none", "default"]
    print("machine: %d CPUs; work: %d copies of mixwork.py %d; %d alternating rounds"
          % (ncpu, ncpu, args.work, args.rounds))
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")  # run counts: when taipan's program has started running
    try:
        measure(args, ncpu, modes)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(was)


def measure(args, ncpu, modes):
    for rate in [int(r) for r in args.rates.split(",")]:
        ratios = {m: [] for m in modes}
        for i in range(args.rounds):
            base = run_round(args.taipan, args.python, rate, "none", args.work, ncpu)
            for m in modes:
                t = run_round(args.taipan, args.python, rate, m, args.work, ncpu)
                ratios[m].append(t / base)
            sys.stderr.write("  %d Hz: round %d/%d\n" % (rate, i + 1, args.rounds))
        print("\n%d Hz, record -a: slowdown of the work (median, min-max)" % rate)
        for m in modes:
            v = ratios[m]
            print("  %-12s %.3f  (%.3f-%.3f)" % (m, statistics.median(v), min(v), max(v)))


if __name__ == "__main__":
    main()
