#!/usr/bin/env python3
"""bench/overhead.py - what profiling costs, measured side by side.

1. Per-sample BPF cost: with kernel.bpf_stats_enabled, run_time_ns / run_cnt of
   the perf_event program (tail calls are charged to the program that made
   them) while taipan samples a workload at Python depth 20 and 1,000.
2. Slowdown: one copy of a fixed CPU-bound workload per core, with no
   profiler, taipan at 100 Hz and taipan at 1 kHz, in alternating rounds;
   medians and min-max of the work's own timing, as ratios to no profiler.

Needs root. Prints figures; asserts nothing about them.
"""
import argparse
import resource
import json
import os
import re
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sh(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def bpf_ids(pid, kind):
    """The ids of the BPF programs (kind "prog_id") or maps ("map_id") that
    process pid holds, from its fds: another taipan may be running too."""
    ids = set()
    d = "/proc/%d/fdinfo" % pid
    try:
        for fd in os.listdir(d):
            try:
                for line in open(os.path.join(d, fd)):
                    if line.startswith(kind + ":"):
                        ids.add(int(line.split()[1]))
            except OSError:
                pass
    except OSError:
        pass
    return ids


def prog_stats(name, pid):
    """(run_time_ns, run_cnt) of pid's BPF program called name, or name_loop
    (its build for kernels with bpf_loop)."""
    for i in bpf_ids(pid, "prog_id"):
        p = json.loads(sh(["bpftool", "prog", "show", "id", str(i), "-j"]).stdout or "{}")
        if p.get("name") in (name, name + "_loop"):
            return p.get("run_time_ns", 0), p.get("run_cnt", 0)
    return None


# Keys of taipan's per-CPU stats map (enum tp_stat in src/taipan_abi.h).
STAT_SAMPLES, STAT_SENT, STAT_NOT_PYTHON = 0, 1, 4


def target_samples(pid, stat=STAT_SAMPLES):
    """A counter of taipan's per-CPU stats map, summed over CPUs; by default
    TP_STAT_SAMPLES, the perf samples that landed in a profiled process."""
    out = "[]"
    for i in bpf_ids(pid, "map_id"):
        info = json.loads(sh(["bpftool", "map", "show", "id", str(i), "-j"]).stdout or "{}")
        if info.get("name") == "stats":
            out = sh(["bpftool", "map", "dump", "id", str(i), "-j"]).stdout
    for e in json.loads(out or "[]"):
        key = e.get("key")
        k = int.from_bytes(bytes(int(b, 16) for b in key), "little") if isinstance(key, list) else key
        if k == stat:
            vals = e.get("values", [])
            return sum(v["value"] if isinstance(v["value"], int)
                       else int.from_bytes(bytes(int(b, 16) for b in v["value"]), "little") for v in vals)
    return None


def record_cost(taipan, work, seconds, extra=()):
    """What `record --no-kernel -r 1000 -p` of process work (a Popen, killed
    at the end) with extra costs: (BPF run time of the perf program, its
    tail calls charged to it, per sample; taipan's own CPU time, user and
    system, per sample it kept), each None when nothing was measured."""
    out = tempfile.mktemp(suffix=".folded")
    rec = subprocess.Popen([taipan, "record", "-q", "--no-kernel", "-r", "1000", "-p", str(work.pid),
                            "-d", str(seconds + 2), "-o", out] + list(extra))
    try:
        time.sleep(1)  # loaded and attached
        first, t1 = prog_stats("on_sample", rec.pid), target_samples(rec.pid)
        time.sleep(seconds)
        last, t2 = prog_stats("on_sample", rec.pid), target_samples(rec.pid)
        _, _, ru = os.wait4(rec.pid, 0)
    finally:
        work.kill()
        work.wait()
    kept = 0
    if os.path.exists(out):
        with open(out) as f:
            kept = sum(int(line.rsplit(" ", 1)[1]) for line in f if line.strip())
        os.unlink(out)
    bpf = (last[0] - first[0]) / (t2 - t1) if first and last and t1 is not None and t2 != t1 else None
    cpu = (ru.ru_utime + ru.ru_stime) * 1e9 / kept if kept else None
    return bpf, cpu


def cost_per_sample(taipan, work, seconds, extra=()):
    """BPF run time of the perf program per sample (record_cost())."""
    return record_cost(taipan, work, seconds, extra)[0]


def sample_cost(taipan, python, depth, seconds, rate, extra=(), distinct=False):
    """ns per sample of the whole BPF walk at this depth (distinct: of as
    many different functions, else of one recursive function)."""
    env = dict(os.environ, WORK_DISTINCT="1" if distinct else "0")
    work = subprocess.Popen([python, os.path.join(HERE, "work.py"), str(depth), "400000000"],
                            stdout=subprocess.DEVNULL, env=env)
    time.sleep(0.5)
    out = tempfile.mktemp(suffix=".folded")
    rec = subprocess.Popen([taipan, "record", "-q", "--no-kernel", "-r", str(rate), "-p", str(work.pid),
                            "-d", str(seconds + 2), "-o", out] + list(extra))
    time.sleep(1)  # loaded and attached
    first, t1 = prog_stats("on_sample", rec.pid), target_samples(rec.pid)
    time.sleep(seconds)
    last, t2 = prog_stats("on_sample", rec.pid), target_samples(rec.pid)
    rec.wait()
    work.kill()
    work.wait()
    frames = 0
    if os.path.exists(out):
        with open(out) as f:
            line = f.readline()
            frames = line.count(";") + 1 if line else 0
        os.unlink(out)
    if not first or not last or last[1] == first[1] or t1 is None or t2 == t1:
        return None, None, 0, 0, frames
    ns, runs, py = last[0] - first[0], last[1] - first[1], t2 - t1
    # Per Python sample, all run time is charged to the Python samples: the
    # other CPU's samples (idle, or other processes) return after a lookup.
    return ns / runs, ns / py, runs, py, frames


def non_python_cost(taipan, seconds, rate):
    """ns per program run under record -a while every CPU runs a busy
    non-Python process: after its first sample, one map lookup each."""
    ncpu = os.cpu_count()
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(ncpu)]
    out = tempfile.mktemp(suffix=".folded")
    rec = subprocess.Popen([taipan, "record", "-q", "-a", "-r", str(rate), "-d", str(seconds + 2), "-o", out])
    try:
        time.sleep(1.5)
        first = prog_stats("on_sample", rec.pid)
        time.sleep(seconds)
        last = prog_stats("on_sample", rec.pid)
        rec.wait()
    finally:
        for b in busy:
            b.kill()
            b.wait()
        if os.path.exists(out):
            os.unlink(out)
    if not first or not last or last[1] == first[1]:
        return None, 0
    return (last[0] - first[0]) / (last[1] - first[1]), last[1] - first[1]


def timed_round(taipan, python, rate, ncpu, depth, iters):
    """Seconds of work per copy, with taipan at rate Hz (0: no profiler)."""
    cmd = [python, os.path.join(HERE, "work.py"), str(depth), str(iters)]
    script = " & ".join(" ".join(cmd) for _ in range(ncpu)) + " & wait"
    if rate:
        out = tempfile.mktemp(suffix=".folded")
        res = sh([taipan, "record", "-q", "-r", str(rate), "-o", out, "--", "sh", "-c", script])
        if os.path.exists(out):
            os.unlink(out)
    else:
        res = sh(["sh", "-c", script])
    times = [float(line.split()[0]) for line in res.stdout.splitlines() if line.strip()]
    if len(times) != ncpu:
        raise RuntimeError("workload output: %r %s" % (res.stdout, res.stderr))
    return statistics.mean(times)


def dump_cost(taipan, python, threads=50, runs=7):
    """Wall and CPU time of `taipan dump` of a process with threads+1
    threads blocked in known functions (tests/workloads/blocked.py): the
    median and best of runs, in ms. The target is 100 ms."""
    w = subprocess.Popen([python, os.path.join(ROOT, "tests", "workloads", "blocked.py"), "60",
                          str(threads)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        w.stdout.readline()  # it says when every thread is blocked
        walls, cpus = [], []
        for _ in range(runs):
            r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            subprocess.run([taipan, "dump", "-p", str(w.pid)], stdout=subprocess.DEVNULL, check=True)
            walls.append(1e3 * (time.perf_counter() - t0))
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(1e3 * (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime))
        return statistics.median(walls), min(walls), statistics.median(cpus)
    finally:
        w.kill()
        w.wait()


def alternating_costs(args, cases):
    """Median per-sample BPF cost (ns per Python sample) at each of --depths
    for each case (label, taipan, python), over --rounds rounds that
    alternate the cases, so that all meet the same machine."""
    depths = [int(d) for d in args.depths.split(",")]
    got = {(c[0], d): [] for c in cases for d in depths}
    for i in range(args.rounds):
        for d in depths:
            for label, taipan, python in cases:
                _, per_py, _, _, _ = sample_cost(taipan, python, d, args.seconds, 1000,
                                                 ["--native", "none"] if args.python_only else (),
                                                 distinct=args.distinct)
                got[(label, d)].append(per_py or 0)
        sys.stderr.write("  round %d/%d\n" % (i + 1, args.rounds))
    return depths, {k: statistics.median(v) for k, v in got.items()}


def print_pair(args, depths, med, a, b, what):
    """Prints the two cases a and b side by side, with b / a."""
    print("\nper-sample BPF cost at 1 kHz, median of %d alternating runs (ns per Python sample):"
          % args.rounds)
    print("%s\n  stacks of %s" % (what, "different functions" if args.distinct else "one recursive function"))
    print("  %6s %10s %10s %12s" % ("depth", a, b, "%s/%s" % (b, a)))
    for d in depths:
        x, y = med[(a, d)], med[(b, d)]
        print("  %6d %10.0f %10.0f %12.3f" % (d, x, y, y / x if x else float("nan")))


def compare_builds(args):
    """Per-sample BPF cost of two builds at each depth."""
    depths, med = alternating_costs(args, [("this", args.taipan, args.python), ("other", args.vs, args.python)])
    print_pair(args, depths, med, "this", "other", "  this:  %s\n  other: %s" % (args.taipan, args.vs))


def compare_pythons(args):
    """Per-sample BPF cost of one build on two interpreters at each depth
    (a GIL build and a free-threaded one, say)."""
    depths, med = alternating_costs(args, [("python", args.taipan, args.python),
                                           ("other", args.taipan, args.vs_python)])
    print_pair(args, depths, med, "python", "other", "  %s\n  python: %s\n  other:  %s" % (
        args.taipan, args.python, args.vs_python))


def native_cost(args):
    """Per-sample BPF cost of one build with native unwinding off and on, at
    each Python depth, alternating runs; prints medians, their difference
    and the native frames per sample."""
    depths = [int(d) for d in args.depths.split(",")]
    modes = [("python", ["--native", "none"]), ("+native", ["--native", "all"])]
    got = {(m, d): [] for m, _ in modes for d in depths}
    for i in range(args.rounds):
        for d in depths:
            for m, extra in modes:
                _, per_py, _, _, _ = sample_cost(args.taipan, args.python, d, args.seconds, 1000, extra)
                got[(m, d)].append(per_py or 0)
        sys.stderr.write("  round %d/%d\n" % (i + 1, args.rounds))
    print("\nper-sample BPF cost at 1 kHz, Python only and Python plus native (--native all),")
    print("median of %d alternating runs (ns per Python sample), %s:" % (args.rounds, args.taipan))
    print("  %6s %10s %10s %10s" % ("depth", "python", "+native", "native"))
    for d in depths:
        a = statistics.median(got[("python", d)])
        b = statistics.median(got[("+native", d)])
        print("  %6d %10.0f %10.0f %10.0f" % (d, a, b, b - a))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--taipan", default=os.path.join(ROOT, "build", "taipan"))
    ap.add_argument("--python", default="/root/.pyenv/versions/3.12.1/bin/python3.12")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--iters", type=int, default=15000000)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--vs", metavar="TAIPAN",
                    help="another taipan build: per-sample costs of both, alternating, "
                         "as a ratio (this build / the other), then stop")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds with --vs or --native")
    ap.add_argument("--native", action="store_true",
                    help="only the per-sample cost with native unwinding off and on, at --depths")
    ap.add_argument("--depths", default="10,50,1000", help="Python depths with --vs")
    ap.add_argument("--vs-python", metavar="PYTHON",
                    help="the per-sample cost on --python and on this interpreter (an executable, or a "
                    "script that execs one), alternating, at --depths")
    ap.add_argument("--python-only", action="store_true",
                    help="with --vs or --vs-python: the Python walk alone (--native none)")
    ap.add_argument("--distinct", action="store_true",
                    help="with --vs: stacks of as many different functions as frames")
    args = ap.parse_args()
    ncpu = os.cpu_count()

    print("machine: %s, %d CPUs, kernel %s, python %s" % (platform.node(), ncpu, platform.release(), args.python))
    old = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        if args.vs:
            return compare_builds(args)
        if args.vs_python:
            return compare_pythons(args)
        if args.native:
            return native_cost(args)
        print("\nper-sample BPF cost: run_time_ns of on_sample (tail calls included) over the samples that\n"
              "landed in the workload, and over all runs of the program (every CPU), at 1 kHz:")
        for depth, distinct in ((20, False), (50, False), (50, True), (1000, False)):
            per_run, per_py, runs, py, frames = sample_cost(args.taipan, args.python, depth, args.seconds, 1000,
                                                            distinct=distinct)
            print("  depth %5d%s: %8.0f ns per Python sample (%d samples), %6.0f ns per program run (%d runs); "
                  "%d frames in the folded stack" % (depth, " (50 functions)" if distinct else "",
                                                    per_py or 0, py, per_run or 0, runs, frames))
        wall, best, cpu = dump_cost(args.taipan, args.python)
        print("  dump of 51 threads: %.1f ms wall (median; best %.1f), %.1f ms CPU; target 100 ms"
              % (wall, best, cpu))
        ns, runs = non_python_cost(args.taipan, args.seconds, 1000)
        print("  record -a, every CPU busy in a non-Python process: %6.0f ns per program run (%d runs)"
              % (ns or 0, runs))
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)

    print("\nslowdown: %d copies (one per CPU) of work.py at depth 20, %d rounds, alternating" % (ncpu, args.runs))
    rates = [0, 100, 1000]
    results = {r: [] for r in rates}
    for i in range(args.runs):
        for r in rates:
            results[r].append(timed_round(args.taipan, args.python, r, ncpu, 20, args.iters))
        sys.stderr.write("  round %d/%d\n" % (i + 1, args.runs))
    base = statistics.median(results[0])
    print("  %-12s %10s %10s %18s" % ("profiler", "median s", "ratio", "min-max ratio"))
    for r in rates:
        med = statistics.median(results[r])
        name = "none" if r == 0 else "taipan %d Hz" % r
        print("  %-12s %10.3f %10.4f %8.4f-%-8.4f" % (name, med, med / base, min(results[r]) / base,
                                                     max(results[r]) / base))


if __name__ == "__main__":
    main()
