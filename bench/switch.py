#!/usr/bin/env python3
"""bench/switch.py - what --mode wall costs a host that switches threads a lot.

--mode wall attaches a program to sched_switch, which runs at every context
switch of every CPU: for a thread of no target it must cost a map lookup or
two and nothing more. Three workloads, each run under four conditions in
alternating rounds (medians):
1. `stress-ng --switch`: two processes ping-pong a pipe, no Python (the
   worst case for threads that are not targets). Not `perf bench sched
   pipe`: Debian's perf links libpython, so `record -a` takes it for a
   Python process, a target whose every switch is walked. A new stress-ng
   each run, measured by itself over its whole life: young processes,
   which taipan looks at again for 3 s (a Python's loader may not have
   mapped libpython yet) and whose time away it keeps meanwhile;
2. the same, steady: one stress-ng started before the rounds, so old that
   taipan knows it for no Python from its start; its switches counted over
   2 s (/proc/PID/status) under each condition;
3. pingpong: two Python threads of one process hand a byte back and forth
   through two pipes: every switch is a target's, so each one walks its
   stack (the worst case for targets).
Conditions: no taipan; `taipan record -a` (cpu mode); the floor, `record -a
--mode wall` with TAIPAN_BENCH_EMPTY_SWITCH=1, whose sched_switch program
returns at once (what the tracepoint itself costs a switch); `taipan record
-a --mode wall`; for pingpong, also `--mode wall` with --native none (Python
and kernel frames only).

Both ends of each workload run on CPU 0 and taipan on CPU 1 (taskset): the
switches are then local ones, which cost the same run after run, where a
wakeup across CPUs in a VM costs whatever the hypervisor makes it, and the
figure is the BPF programs' cost on CPU 0, not taipan's reading of samples.

Prints operations per second and the slowdown against no taipan, and for
the --mode wall conditions the sched_switch program's own time a run, as the
kernel counts it with kernel.bpf_stats_enabled (measured apart, once: the
counting costs two clock reads a run, some 50 ns in this VM, which the
empty program's figure shows). Needs root, stress-ng, bpftool and two CPUs.
Asserts nothing.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

PINGPONG = r"""
import os, sys, threading, time
n = int(sys.argv[1])
a, b = os.pipe()
c, d = os.pipe()
def pong():
    for _ in range(n):
        os.read(a, 1)
        os.write(d, b"x")
t = threading.Thread(target=pong)
t.start()
t0 = time.perf_counter()
for _ in range(n):
    os.write(b, b"x")
    os.read(c, 1)
dt = time.perf_counter() - t0
t.join()
print("ops/sec %.0f" % (n / dt))
"""


def switch_bench(loops):
    """Round trips a second of stress-ng's pipe switch test (two switches
    each)."""
    out = subprocess.run(["taskset", "-c", "0", "stress-ng", "--switch", "1", "--switch-ops", str(2 * loops),
                          "--metrics-brief"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    m = re.search(r"([\d.]+) nanosecs per context switch", out)
    return 1e9 / (2 * float(m.group(1))) if m else None


def switches(pids):
    """Context switches so far of the processes pids, all their threads."""
    n = 0
    for pid in pids:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                n += sum(int(line.split()[1]) for line in f if "ctxt_switches:" in line)
    return n


class SteadySwitch:
    """One `stress-ng --switch` for the whole run, stopped (SIGSTOP) between
    its measurements; each measures its processes' context switches a
    second over a window."""

    def __init__(self, warm):
        self.proc = subprocess.Popen(["taskset", "-c", "0", "stress-ng", "--switch", "1", "--timeout", "3h"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + 30
        while time.time() < deadline and len(self.pids()) < 3:
            time.sleep(0.05)
        time.sleep(warm)  # older than taipan's 3 s of second looks
        self.stop()

    def pids(self):
        out = subprocess.run(["pgrep", "-g", str(self.proc.pid)], stdout=subprocess.PIPE, text=True).stdout
        return [int(p) for p in out.split()] if self.proc.poll() is None else []

    def stop(self):
        for pid in self.pids():
            os.kill(pid, signal.SIGSTOP)

    def measure(self, window=2.0):
        pids = self.pids()
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.2)
        n0, t0 = switches(pids), time.monotonic()
        time.sleep(window)
        n1, t1 = switches(pids), time.monotonic()
        self.stop()
        return (n1 - n0) / (t1 - t0)

    def close(self):
        for pid in self.pids():
            os.kill(pid, signal.SIGCONT)
        self.proc.terminate()
        self.proc.wait()


def pingpong(python, loops):
    out = subprocess.run(["taskset", "-c", "0", python, "-c", PINGPONG, str(loops)], stdout=subprocess.PIPE,
                         text=True).stdout
    m = re.search(r"ops/sec (\d+)", out)
    return float(m.group(1)) if m else None


def program_ns():
    """The sched_switch program's own time a run, as the kernel counts it
    (kernel.bpf_stats_enabled), or None."""
    out = subprocess.run(["bpftool", "prog", "show", "name", "on_switch"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    m = re.search(r"run_time_ns (\d+) run_cnt (\d+)", out)
    return int(m.group(1)) / float(m.group(2)) if m and int(m.group(2)) else None


def under(taipan, extra, fn, probe=None):
    """fn() while `taipan record -a EXTRA` runs (None: without taipan); a
    first word "EMPTY" asks for the empty sched_switch program. With probe,
    probe() is called too before taipan stops, and both results returned."""
    if extra is None:
        return fn()
    env = dict(os.environ)
    if extra and extra[0] == "EMPTY":
        env["TAIPAN_BENCH_EMPTY_SWITCH"] = "1"
        extra = extra[1:]
    out = tempfile.mktemp(suffix=".pb.gz")
    log = tempfile.NamedTemporaryFile(suffix=".log")
    rec = subprocess.Popen(["taskset", "-c", "1", taipan, "record", "-a", "-v", "-r", "100", "-o", out] + extra,
                           stdout=subprocess.DEVNULL, stderr=log, env=env)
    # -v says when sampling has started; then a second for the start-up's
    # own work (every process on the host classified) to settle: this
    # measures the steady state.
    deadline = time.time() + 60
    while time.time() < deadline and rec.poll() is None:
        with open(log.name, errors="replace") as f:
            if "sampling at" in f.read():
                break
        time.sleep(0.05)
    time.sleep(1)
    try:
        return (fn(), probe()) if probe else fn()
    finally:
        rec.send_signal(signal.SIGINT)
        rec.wait(timeout=60)
        log.close()
        if os.path.exists(out):
            os.unlink(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--taipan", default=os.path.join(ROOT, "build", "taipan"))
    ap.add_argument("--python", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--loops", type=int, default=50000)
    args = ap.parse_args()
    pyenv = os.path.expanduser("~/.pyenv/versions")
    python = args.python or next((os.path.join(pyenv, v, "bin", "python3") for v in sorted(os.listdir(pyenv))
                                  if v.startswith("3.12")), sys.executable)
    conds = [("no taipan", None), ("record -a", []),
             ("floor: an empty program", ["EMPTY", "--mode", "wall"]),
             ("record -a --mode wall", ["--mode", "wall"]),
             ("... --native none", ["--mode", "wall", "--native", "none"])]
    steady = SteadySwitch(warm=3.5)
    works = [("stress-ng --switch, no Python, young (a new one each run; round trips)",
              lambda: switch_bench(args.loops), conds[:4]),
             ("stress-ng --switch, no Python, steady (known as no Python; context switches)", steady.measure,
              conds[:4]),
             ("pingpong, 2 Python threads (round trips)", lambda: pingpong(python, args.loops), conds)]
    res = {(w, c): [] for w, _, cs in works for c, _ in cs}
    print("machine: %d CPUs, kernel %s, python %s, %d round trips a run" % (
        os.cpu_count(), os.uname().release, python, args.loops))
    cost = {}
    try:
        for r in range(args.rounds):
            print("  round %d/%d" % (r + 1, args.rounds), flush=True)
            for w, fn, cs in works:
                for c, extra in cs:
                    res[(w, c)].append(under(args.taipan, extra, fn))
        # The program's own time a switch, once each, apart: the kernel's
        # count of it costs two clock reads a run, which the rounds above
        # must not pay.
        with open("/proc/sys/kernel/bpf_stats_enabled") as f:
            stats_were = f.read().strip()
        try:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write("1")
            for w, fn, cs in works:
                for c, extra in cs:
                    if extra and "wall" in extra:
                        cost[(w, c)] = under(args.taipan, extra, fn, probe=program_ns)[1]
        finally:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write(stats_were)
    finally:
        steady.close()
    print("\nper second, median of %d alternating rounds (slowdown against no taipan)"
          % args.rounds)
    for w, _, cs in works:
        base = statistics.median([v for v in res[(w, "no taipan")] if v])
        print("  %s" % w)
        for c, _ in cs:
            vals = [v for v in res[(w, c)] if v]
            m = statistics.median(vals) if vals else 0
            ns = cost.get((w, c))
            print("    %-28s %10.0f   %5.1f%%%s" % (c, m, 100.0 * (base - m) / base if base else 0,
                                                    "   program: %.0f ns a switch" % ns if ns else ""))


if __name__ == "__main__":
    main()
