#!/usr/bin/env python3
"""bench/torch_import.py - does the reader keep up while a process maps
hundreds of new files?

With stress-ng loading every CPU, `taipan record --stats -- sh -c ...` at --rate
while Debian's python3.11 imports torch and numpy (about 310 files mapped,
whose unwind tables taipan builds as they appear) --imports times, one
after another. Prints the samples taken, those lost with the ring full,
and the tables built.

Needs root, stress-ng, Debian's python3-torch. Prints figures; asserts
nothing.
"""
import argparse
import os
import re
import subprocess
import tempfile
import time

CODE = "import torch, numpy; x = torch.randn(64, 64); (x @ x).sum()"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--taipan", required=True)
    ap.add_argument("--python", default="/usr/bin/python3.11")
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--imports", type=int, default=3)
    args = ap.parse_args()
    ncpu = os.cpu_count()
    out = tempfile.mktemp(suffix=".folded")
    stress = subprocess.Popen(["stress-ng", "--cpu", str(ncpu), "--timeout", "600"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        script = "; ".join(["%s -c '%s'" % (args.python, CODE)] * args.imports)
        t0 = time.perf_counter()
        res = subprocess.run([args.taipan, "record", "-q", "--stats", "-r", str(args.rate), "-o", out,
                              "--", "sh", "-c", script], stderr=subprocess.PIPE, text=True)
        took = time.perf_counter() - t0
    finally:
        stress.kill()
        stress.wait()
        if os.path.exists(out):
            os.unlink(out)
    err = res.stderr
    samples = re.search(r"(\d+) perf samples in targets", err)
    lost = re.search(r"(\d+) lost \(ring full\)", err)
    tables = re.search(r"unwind tables of (\d+) files \(([\d.]+) MiB, built in (\d+) ms; (\d+) rules", err)
    print("%d CPUs busy (stress-ng), record -- sh -c at %d Hz, %d imports of torch and numpy in %.1f s:"
          % (ncpu, args.rate, args.imports, took))
    print("  samples in targets: %s; lost with the ring full: %s" % (samples and samples.group(1),
                                                                     lost and lost.group(1)))
    if tables:
        print("  unwind tables: %s files, %s MiB, built in %s ms; %s rules shared" % tables.groups())


if __name__ == "__main__":
    main()
