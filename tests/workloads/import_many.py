"""Writes N modules (argv[1], default 500) into a new directory, imports each
once, and exits. Each module's body spins for 2 ms of CPU, so samples land in
its <module> frame, whose code object is freed as soon as the import is over.
"""
import os
import shutil
import sys
import tempfile
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 500
sys.dont_write_bytecode = True
BODY = ("import time\n"
        "_cpu = getattr(time, 'process_time', None) or time.clock\n"
        "_end = _cpu() + 0.002\n"
        "while _cpu() < _end:\n"
        "    pass\n\n\n"
        "def f_%d(x):\n"
        "    return x + %d\n")
d = tempfile.mkdtemp(prefix="taipan-imports-")
try:
    for i in range(N):
        with open(os.path.join(d, "gen_mod_%03d.py" % i), "w") as f:
            f.write(BODY % (i, i))
    sys.path.insert(0, d)
    for i in range(N):
        __import__("gen_mod_%03d" % i)
finally:
    shutil.rmtree(d)
