# otlp_hostile.py - a busy function and thread whose names a profile's
# reader must not take as text: control characters, a byte that is not
# UTF-8 (a lone surrogate, as os.fsdecode makes of one), and a megabyte of
# name. The function runs in a thread named so, in a file named so.
# Usage: python otlp_hostile.py SECONDS (3.11+: co_qualname). Prints "ready".
import sys
import threading
import time

DEADLINE = time.time() + (float(sys.argv[1]) if len(sys.argv) > 1 else 5.0)
MB = 1 << 20
NAME = "\x1b[31mred\x07\x00\udcff\n" + "n" * MB
FILE = "/tmp/\x1b]0;title\x07\udcfe.py" + "f" * MB
THREAD = "\x1b[2J\udcfdthread\x7f" + "t" * MB
go = threading.Event()


def spin():
    go.set()
    n = 0
    while time.time() < DEADLINE:
        n = hash((n, 1))


code = spin.__code__
spin.__code__ = code.replace(co_name=NAME, co_qualname=NAME, co_filename=FILE)
t = threading.Thread(target=spin, name=THREAD)
t.start()
go.wait()
print("ready", flush=True)
t.join()
