#!/usr/bin/env python3
"""bench/compare.py - taipan against Austin and CPython's own sampler, side by side.

Profilers, each against the interpreter it ships with:
  - Austin (Debian trixie's `austin`) on trixie's python3.13;
  - `python3.15 -m profiling.sampling` (Tachyon) on sid's python3.15;
  - taipan on both, and no profiler on both.
All run in the Debian roots of scripts/make-roots.sh --bench, each command
in a private mount namespace with the root's own /proc (the same wrapper for
every variant, the baseline included).

1. Cost: one copy of bench/work.py per CPU, at 100 Hz, 1 kHz and 10 kHz,
   runs alternating (none, taipan, other, none, ...), medians and min-max of
   the work's own time as ratios to no profiler; each profiler's own CPU
   seconds (the command tree's CPU less the workloads' own).
2. Accuracy: bench/shares.py calibrates its own truth (three functions at
   about 60/30/10%); each profiler's sampled shares against it, and the
   sample rate it achieved against the rate asked for.
3. Depth: taipan's per-sample BPF cost at Python depths 10, 100, 1000
   (run_time_ns / samples in the workload), and whether each profiler
   returns every frame.
4. Scale: taipan record -a with 50 and 200 idle Python processes and one
   busy one: taipan's CPU and peak RSS.

Prints a table and writes it, with the machine, to bench/results/. Asserts nothing.
"""
import argparse
import datetime
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import overhead  # noqa: E402  (per-sample cost helpers)

ROOTS = os.environ.get("TAIPAN_ROOTS", "/var/cache/taipan-test")
INSIDE = "/tmp/taipan-bench"
OUT = "/tmp/taipan-bench/out"


def in_root(root, script):
    """argv running shell script inside root, with the root's own /proc."""
    inner = 'mount -t proc proc "$0/proc" && exec chroot "$0" sh -c "$1"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner, root, script]


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Target:
    def __init__(self, name, root, python):
        self.name, self.root, self.python = name, os.path.join(ROOTS, root), python
        os.makedirs(self.root + OUT, exist_ok=True)
        for f in ("work.py", "shares.py"):
            with open(os.path.join(HERE, f)) as src, open(self.root + INSIDE + "/" + f, "w") as dst:
                dst.write(src.read())

    def copies(self, script, args, n, pin=False):
        """Shell running n copies of script at once; with pin, copy i on CPU i."""
        one = "%s %s/%s %s" % (self.python, INSIDE, script, args)
        return " & ".join(one + (" %d" % i if pin else "") for i in range(n)) + " & wait"


def profiler_cmd(kind, target, rate, inner_script, out_name):
    """(argv, output path on the host) for one profiler around inner_script."""
    out_in = "%s/%s" % (OUT, out_name)
    host_out = target.root + out_in
    if kind == "none":
        return in_root(target.root, inner_script), None
    if kind == "taipan":
        return [ARGS.taipan, "record", "-q", "-r", str(rate), "-o", host_out + ".folded",
                "--"] + in_root(target.root, inner_script), host_out + ".folded"
    if kind in ("austin", "tachyon"):
        # One sampler per workload process: profiling.sampling samples one
        # process, and Austin attached through a shell found the Python
        # children late; each launches its python directly.
        parts = [p.strip() for p in inner_script.replace("& wait", "").split("&") if p.strip()]
        runs = []
        for i, p in enumerate(parts):
            if kind == "austin":
                runs.append("austin -i %d -o %s.%d %s" % (max(1, int(1e6 / rate)), out_in, i, p))
            else:
                py, rest = p.split(" ", 1)
                runs.append("%s -m profiling.sampling run -r %d --collapsed -o %s.%d %s" % (
                    py, rate, out_in, i, rest))
        return in_root(target.root, " & ".join(runs) + " & wait"), host_out
    raise ValueError(kind)


def run_cost(kind, target, rate, ncpu, iters):
    inner = target.copies("work.py", "20 %d" % iters, ncpu, pin=True)
    argv, _ = profiler_cmd(kind, target, rate, inner, "cost")
    c0 = children_cpu()
    res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tree_cpu = children_cpu() - c0
    rows = [l.split() for l in res.stdout.splitlines() if re.match(r"^\d+\.\d+ \d+\.\d+$", l.strip())]
    if len(rows) != ncpu:
        raise RuntimeError("%s %s: %r %s" % (kind, target.name, res.stdout[-300:], res.stderr[-500:]))
    wall = statistics.mean(float(r[0]) for r in rows)
    own = tree_cpu - sum(float(r[1]) for r in rows)
    return wall, own


FAILED = []


def retried(what, fn, *args):
    """fn(*args), tried up to 3 times: a profiler that fails to start once
    (it happens to each of them now and then) does not end the bench. Each
    failure is kept and printed at the end."""
    for attempt in range(3):
        try:
            return fn(*args)
        except RuntimeError as e:
            FAILED.append("%s, attempt %d: %s" % (what, attempt + 1, str(e).strip()[:300]))
    raise RuntimeError("%s failed 3 times: %s" % (what, FAILED[-1]))


def startup_cpu(target, rate):
    """taipan's own CPU for a command that does nothing: loading and
    verifying the BPF programs, attaching, writing an empty profile."""
    argv, _ = profiler_cmd("taipan", target, rate, "true", "startup")
    vals = []
    for _ in range(3):
        c0 = children_cpu()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        vals.append(children_cpu() - c0)
    return statistics.median(vals)


def leaf_counts(path_glob_prefix, names):
    """Samples whose leaf frame names one of names, from folded-like files."""
    counts = dict.fromkeys(names, 0)
    total = 0
    files = [p for p in os.listdir(os.path.dirname(path_glob_prefix))
             if p.startswith(os.path.basename(path_glob_prefix))]
    for f in files:
        with open(os.path.join(os.path.dirname(path_glob_prefix), f), errors="replace") as fh:
            for line in fh:
                line = line.rstrip("\n")
                if line.startswith("#"):  # Austin's metadata, e.g. "# duration: N"
                    continue
                m = re.match(r"^(.*) (\d+)$", line)
                if not m:
                    continue
                stack, n = m.group(1), int(m.group(2))
                frames = stack.split(";")
                total += n
                for name in names:
                    if any(re.search(r"\b%s\b" % name, fr) for fr in frames[-2:]):
                        counts[name] += n
                        break
    return counts, total


def run_accuracy(kind, target, rate, seconds):
    inner = target.copies("shares.py", "%d" % seconds, 1)
    out_name = "acc-%s-%d" % (kind, rate)
    for f in os.listdir(target.root + OUT):
        if f.startswith(out_name):
            os.unlink(os.path.join(target.root + OUT, f))
    argv, host_out = profiler_cmd(kind, target, rate, inner, out_name)
    res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    found = [l for l in res.stdout.splitlines() if l.startswith("{")]
    if not found:
        raise RuntimeError("%s %s: no result from shares.py: %s" % (kind, target.name, res.stderr[-300:]))
    truth = json.loads(found[-1])
    counts, total = leaf_counts(target.root + OUT + "/" + out_name, ["f60", "f30", "f10"])
    if kind == "austin":
        total /= 1e6 / rate  # Austin's metric is microseconds of wall time, not samples
    named = sum(counts.values()) or 1
    shares = {k: counts[k] / named for k in counts}
    err = max(abs(shares[k] - truth[k]) for k in counts) * 100
    return truth, shares, err, total / truth["seconds"]


def run_depth_frames(kind, target, depth):
    """Most frames in one stack of work.py at this depth (every frame: depth + 3)."""
    inner = target.copies("work.py", "%d 3000000" % depth, 1)
    out_name = "depth-%s-%d" % (kind, depth)
    for f in os.listdir(target.root + OUT):
        if f.startswith(out_name):
            os.unlink(os.path.join(target.root + OUT, f))
    argv, _ = profiler_cmd(kind, target, 200, inner, out_name)
    subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    most = 0
    d = target.root + OUT
    for f in os.listdir(d):
        if f.startswith(out_name):
            for line in open(os.path.join(d, f), errors="replace"):
                most = max(most, sum(1 for fr in line.split(";") if "descend" in fr))
    return most


def scale(taipan, python, idle):
    sleepers = [subprocess.Popen([python, "-c", "import time; time.sleep(600)"]) for _ in range(idle)]
    busy = subprocess.Popen([python, os.path.join(HERE, "work.py"), "20", "400000000"], stdout=subprocess.DEVNULL)
    time.sleep(2)
    out = tempfile.mktemp(suffix=".pb.gz")
    rec = subprocess.Popen([taipan, "record", "-q", "-a", "-r", "1000", "-d", "12", "-o", out])
    peak, cpu, marks = 0, 0.0, []
    t0 = time.time()
    while True:
        if len(marks) < 2 and time.time() - t0 > (2, 10)[len(marks)]:
            marks.append((overhead.prog_stats("on_sample", rec.pid),
                          overhead.target_samples(rec.pid, overhead.STAT_SENT)))
        try:
            for line in open("/proc/%d/status" % rec.pid):
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        pid, _, ru = os.wait4(rec.pid, os.WNOHANG)
        if pid:
            cpu = ru.ru_utime + ru.ru_stime  # taipan's own, not the workloads'
            break
        time.sleep(0.5)
    for p in sleepers + [busy]:
        p.kill()
        p.wait()
    if os.path.exists(out):
        os.unlink(out)
    per_py = None
    if len(marks) == 2 and all(m[0] and m[1] is not None for m in marks) and marks[1][1] > marks[0][1]:
        # All of the program's run time (idle CPUs, sleepers) charged to
        # the Python samples written: an upper bound on their cost.
        per_py = (marks[1][0][0] - marks[0][0][0]) / (marks[1][1] - marks[0][1])
    return peak, cpu, per_py


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--taipan", default=os.path.join(ROOT, "build", "taipan"))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--iters", type=int, default=80000000, help="work per copy (about 5 s)")
    ap.add_argument("--acc-runs", type=int, default=3)
    ap.add_argument("--rates", default="100,1000,10000")
    ap.add_argument("--quick", action="store_true", help="one run, fewer rates: to try the script")
    ARGS = args = ap.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    if args.quick:
        args.runs, args.acc_runs, args.iters, rates = 1, 1, 8000000, [1000]
    ncpu = os.cpu_count()
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    say("taipan bench/compare.py, %s" % datetime.datetime.now().isoformat(timespec="seconds"))
    say("machine: %s, %d CPUs, %s, kernel %s" % (platform.node(), ncpu, platform.processor() or "x86_64",
                                                 platform.release()))
    targets = [(Target("trixie python3.13", "trixie", "/usr/bin/python3.13"), "austin"),
               (Target("sid python3.15", "sid", "/usr/bin/python3.15"), "tachyon")]

    say("\n1. cost: %d copies of work.py (depth 20, each pinned to its CPU) at once, %d alternating runs each;"
        % (ncpu, args.runs))
    say("   the work's wall time as a ratio to no profiler; own CPU: the profiler's, start-up included")
    say("%-18s %-9s %6s %10s %16s %12s" % ("target", "profiler", "Hz", "median", "min-max", "own CPU s"))
    for target, other in targets:
        for rate in rates:
            res = {k: [] for k in ("none", "taipan", other)}
            for _ in range(args.runs):
                for kind in res:
                    res[kind].append(retried("cost %s %s %d Hz" % (kind, target.name, rate), run_cost,
                                             kind, target, rate, ncpu, args.iters))
            base = statistics.median(w for w, _ in res["none"])
            for kind, vals in res.items():
                ws = [w / base for w, _ in vals]
                say("%-18s %-9s %6d %10.4f %7.4f-%-8.4f %12.2f" % (
                    target.name, kind, rate, statistics.median(ws), min(ws), max(ws),
                    statistics.median(o for _, o in vals)))
            say("%-18s %-9s %6d   taipan's start-up alone (record -- true): %.2f s of its own CPU" % (
                target.name, "", rate, startup_cpu(target, rate)))

    say("\n2. accuracy: shares.py (truth measured by the workload itself), 10 s, %d runs each;" % args.acc_runs)
    say("   the run with the median error, and the largest error of all runs")
    say("%-18s %-9s %6s %18s %18s %8s %8s %11s" % ("target", "profiler", "Hz", "truth f60/f30/f10",
                                                  "sampled", "err", "worst", "rate/asked"))
    for target, other in targets:
        for rate in rates:
            for kind in ("taipan", other):
                runs = sorted((retried("accuracy %s %s %d Hz" % (kind, target.name, rate), run_accuracy,
                                       kind, target, rate, 10) for _ in range(args.acc_runs)),
                              key=lambda r: r[2])
                truth, shares, err, achieved = runs[len(runs) // 2]
                say("%-18s %-9s %6d %18s %18s %6.1fpt %6.1fpt %11.2f" % (
                    target.name, kind, rate,
                    "/".join("%.1f" % (100 * truth[k]) for k in ("f60", "f30", "f10")),
                    "/".join("%.1f" % (100 * shares[k]) for k in ("f60", "f30", "f10")),
                    err, runs[-1][2], achieved / rate))

    say("\n3. depth: taipan's BPF cost per Python sample (1 kHz), and frames returned at depth 1000")
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        old = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        for depth in (10, 50, 100, 1000):
            _, per_py, _, py, _ = overhead.sample_cost(args.taipan, "/root/.pyenv/versions/3.12.1/bin/python3.12",
                                                      depth, 4, 1000)
            say("  taipan, depth %4d: %8.0f ns per Python sample (%d samples)" % (depth, per_py or 0, py))
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)
    for target, other in targets:
        for kind in ("taipan", other):
            say("  %-18s %-8s descend frames seen at depth 1000: %d of 1000" % (
                target.name, kind, run_depth_frames(kind, target, 1000)))

    say("\n4. scale: taipan record -a at 1 kHz for 12 s, idle Python processes plus one busy;")
    say("   BPF time per Python sample charges every run of the program (idle CPUs too) to them")
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        for idle in (50, 200):
            peak, cpu, per_py = scale(args.taipan, "/root/.pyenv/versions/3.12.1/bin/python3.12", idle)
            say("  %3d idle + 1 busy: taipan's own CPU %.2f s in 12 s (%.1f%% of a CPU), peak RSS %.1f MiB, "
                "BPF %.0f ns per Python sample" % (idle, cpu, 100 * cpu / 12, peak / 1024, per_py or 0))
        ns, runs = overhead.non_python_cost(args.taipan, 4, 1000)
        say("  every CPU busy in a non-Python process: BPF %.0f ns per sample (%d samples)" % (ns or 0, runs))
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)

    if FAILED:
        say("\nruns that failed and were run again:")
        for f in FAILED:
            say("  " + f)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", "compare-%s.txt" % datetime.date.today().isoformat())
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\nwritten to %s" % path)


if __name__ == "__main__":
    main()
