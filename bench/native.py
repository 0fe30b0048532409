#!/usr/bin/env python3
"""bench/native.py - native frames across the interpreter matrix.

For each interpreter found (pyenv 2.7 and 3.6-3.13, Debian's static 3.11, the
bullseye and sid roots' builds), records tests/workloads/native_stdlib.py
(re, zlib, hashlib) and tests/workloads/native_qsort.py (ctypes and a Python
comparator called from libc) with --native all --stats, and prints:
- the share of native stacks unwound to the thread's root (_start, clone3),
- the merge failures (samples whose eval loops and Python frames disagreed),
- the unwind tables' files, size and build time.
Then, on pyenv 3.12, the native leaf functions' shares against
`perf record --call-graph dwarf` on the same process at the same time.

Needs root. Prints figures; asserts nothing about them.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "functional"))
from conftest import MATRIX, Interp, parse_folded  # noqa: E402

WORKLOADS = os.path.join(ROOT, "tests", "workloads")
NATIVE_RE = re.compile(r"native: (\d+) of (\d+) stacks unwound to the thread's root, (\d+) where the "
                       r"native and Python stacks disagreed; unwind tables of (\d+) files \(([\d.]+) MiB, "
                       r"built in (\d+) ms\)")


def installed():
    for ident, path, version, root in MATRIX:
        if path and os.path.exists((root or "") + path):
            yield Interp(ident, path, version, root)


def start(interp, script):
    p = subprocess.Popen(interp.argv(os.path.join(WORKLOADS, script)), stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    p.stdout.readline()  # ready
    return p


def record(taipan, pid, seconds, extra=()):
    out = tempfile.mktemp(suffix=".folded")
    res = subprocess.run([taipan, "record", "-q", "--stats", "--native", "all", "-r", "499",
                          "-d", str(seconds), "-p", str(pid), "-o", out] + list(extra),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return out, res.stderr


def matrix(args):
    print("%-22s %-7s %8s %9s %7s %7s %8s %8s" % ("interpreter", "work", "stacks", "to root", "share",
                                                   "merge", "tables", "MiB"))
    for it in installed():
        for script in ("native_stdlib.py", "native_qsort.py"):
            w = start(it, script)
            try:
                out, err = record(args.taipan, w.pid, args.seconds)
            finally:
                w.kill()
                w.wait()
            if os.path.exists(out):
                os.unlink(out)
            m = NATIVE_RE.search(err)
            if not m:
                print("%-22s %-7s  no figures: %s" % (it.id, script[7:13], err.strip()[-200:]))
                continue
            done, n, merge, files, mib = int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4), \
                m.group(5)
            print("%-22s %-7s %8d %9d %6.1f%% %7d %8s %8s" % (it.id, script[7:13], n, done,
                                                             100.0 * done / max(n, 1), merge, files, mib))
            sys.stdout.flush()


def perf_agreement(args):
    perf = shutil.which("perf")
    if not perf:
        print("perf not installed: no agreement figures")
        return
    it = next(i for i in installed() if i.id == "pyenv-3.12")
    w = start(it, "native_stdlib.py")
    data = tempfile.mktemp(suffix=".perf")
    try:
        p = subprocess.Popen([perf, "record", "-q", "-e", "cpu-clock", "-F", "999", "--call-graph", "dwarf",
                              "-o", data, "-p", str(w.pid), "--", "sleep", str(args.seconds + 1)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        out, _ = record(args.taipan, w.pid, args.seconds, ["--folded-threads", "-r", "999"])
        p.wait()
    finally:
        w.kill()
        w.wait()
    rep = subprocess.run([perf, "report", "-i", data, "--stdio", "--no-children", "--sort", "sym", "-q",
                          "-g", "none"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    os.unlink(data)
    theirs = {}
    for m in re.finditer(r"^\s*([\d.]+)%\s+\[\.\]\s+(\S+)", rep, re.M):
        theirs[m.group(2)] = theirs.get(m.group(2), 0) + float(m.group(1))
    stacks = parse_folded(out)
    os.unlink(out)
    n = sum(s.count for s in stacks)
    ours = {}
    for s in stacks:
        # Samples in the kernel count for their kernel function in both.
        leaf = [f for f in s.frames if f.native or f.kernel]
        if leaf and leaf[-1].native:
            # perf shows an address no symbol covers as 0x...OFFSET
            name = re.sub(r"^\S+\+0x([0-9a-f]+)$", lambda m: "0x%016x" % int(m.group(1), 16), leaf[-1].name)
            ours[name] = ours.get(name, 0) + 100.0 * s.count / n
    print("\nnative leaf functions (share of all samples), pyenv 3.12, native_stdlib.py, %d taipan "
          "samples, perf and taipan at 999 Hz at once:" % n)
    print("  %-44s %8s %8s %8s" % ("function", "perf", "taipan", "diff"))
    for f in sorted(set(theirs) | set(ours), key=lambda f: -max(theirs.get(f, 0), ours.get(f, 0))):
        a, b = theirs.get(f, 0), ours.get(f, 0)
        if max(a, b) >= 2:
            print("  %-44s %7.1f%% %7.1f%% %+7.1f" % (f[:44], a, b, b - a))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--taipan", default=os.path.join(ROOT, "build", "taipan"))
    ap.add_argument("--seconds", type=float, default=4)
    args = ap.parse_args()
    matrix(args)
    perf_agreement(args)


if __name__ == "__main__":
    main()
