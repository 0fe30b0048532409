#!/usr/bin/env python3
"""bench/startup.py - what taipan costs before its first sample.

Two figures, medians of alternating runs:
1. `taipan record -- true`: the whole of taipan's own CPU (user + system,
   from the kernel's accounting of the finished child) for a command that
   runs no Python: loading and verifying the BPF programs, attaching,
   writing an empty profile.
2. CPU before the first sample: `taipan record -v -- PYTHON -c 'while 1:
   pass'` says, when it takes its first sample, how much CPU it has used
   since it started (getrusage, every thread). With default options, with
   --no-kernel (no kernel symbols to read), and with --native none too (no
   unwind tables to build).

With --vs OTHER, the same for another build, run alternately; a build that
does not print the first-sample line shows "-".

Needs root. Prints figures; asserts nothing about them.
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

VARIANTS = [("defaults", []), ("--no-kernel", ["--no-kernel"]),
            ("--no-kernel --native none", ["--no-kernel", "--native", "none"])]


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def whole_true(taipan, env):
    out = tempfile.mktemp(suffix=".folded")
    c0 = children_cpu()
    subprocess.run([taipan, "record", "-q", "-o", out, "--", "true"], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=env)
    cpu = children_cpu() - c0
    if os.path.exists(out):
        os.unlink(out)
    return cpu * 1e3


def first_sample(taipan, python, extra, env):
    out = tempfile.mktemp(suffix=".folded")
    res = subprocess.run([taipan, "record", "-v", "-r", "1000", "-d", "0.5", "-o", out] + extra +
                         ["--", python, "-c", "while 1: pass"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env)
    if os.path.exists(out):
        os.unlink(out)
    m = re.search(r"first sample: ([\d.]+) ms of CPU", res.stderr)
    return float(m.group(1)) if m else None


def med(vals):
    vals = [v for v in vals if v is not None]
    return "%8.1f" % statistics.median(vals) if vals else "%8s" % "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--taipan", default=os.path.join(ROOT, "build", "taipan"))
    ap.add_argument("--vs", help="another taipan build, run alternately")
    ap.add_argument("--python", default=None, help="the busy target's interpreter")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    python = args.python or next((p for p in (os.path.expanduser("~/.pyenv/versions/%s/bin/python3" % v)
                                              for v in sorted(os.listdir(os.path.expanduser("~/.pyenv/versions")))
                                              if v.startswith("3.12")) if os.path.exists(p)), sys.executable)
    builds = [("this", args.taipan)] + ([("other", args.vs)] if args.vs else [])
    env = dict(os.environ)
    whole = {b: [] for b, _ in builds}
    first = {(b, v): [] for b, _ in builds for v, _ in VARIANTS}
    print("machine: %d CPUs, kernel %s, target %s" % (os.cpu_count(), os.uname().release, python))
    for r in range(args.rounds):
        print("  round %d/%d" % (r + 1, args.rounds), flush=True)
        for b, path in builds:
            whole[b].append(whole_true(path, env))
            for v, extra in VARIANTS:
                first[(b, v)].append(first_sample(path, python, extra, env))
    print("\nstart-up CPU in ms, median of %d alternating rounds" % args.rounds)
    for b, path in builds:
        print("  %s: %s" % (b, path))
    print("  %-44s" % "" + "".join("%9s" % b for b, _ in builds))
    print("  %-44s" % "record -- true, whole run" + "".join(" " + med(whole[b]) for b, _ in builds))
    for v, _ in VARIANTS:
        print("  %-44s" % ("to the first sample, " + v) + "".join(" " + med(first[(b, v)]) for b, _ in builds))


if __name__ == "__main__":
    main()
