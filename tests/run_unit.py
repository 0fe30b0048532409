#!/usr/bin/env python3
"""Runs every cmocka unit-test binary given on the command line and prints the totals."""
import re
import subprocess
import sys

passed = failed = skipped = 0
for binary in sys.argv[1:]:
    proc = subprocess.run([binary], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout
    sys.stdout.write(out)
    p = sum(int(n) for n in re.findall(r"^\[  PASSED  \] (\d+) test", out, re.M))
    f = sum(int(n) for n in re.findall(r"^\[  FAILED  \] (\d+) test", out, re.M))
    s = sum(int(n) for n in re.findall(r"^\[  SKIPPED \] (\d+) test", out, re.M))
    if proc.returncode != 0 and f == 0:
        f = 1  # crashed or exited badly without a cmocka summary
        print(f"{binary}: exited with status {proc.returncode}")
    passed += p
    failed += f
    skipped += s
print(f"unit: {passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed or passed == 0 else 0)
