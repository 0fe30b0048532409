# threads.py - four busy threads in distinct functions and one sleeping thread.
# Usage: python threads.py SECONDS. Prints "ready" when all threads run.
import sys
import threading
import time

DEADLINE = time.time() + (float(sys.argv[1]) if len(sys.argv) > 1 else 5.0)


def spin_a():
    n = 0
    while time.time() < DEADLINE:
        n += 1


def spin_b():
    n = 0
    while time.time() < DEADLINE:
        n += 1


def spin_c():
    n = 0
    while time.time() < DEADLINE:
        n += 1


def spin_d():
    n = 0
    while time.time() < DEADLINE:
        n += 1


def sleeper():
    while time.time() < DEADLINE:
        time.sleep(0.05)


threads = [threading.Thread(target=f, name=f.__name__) for f in (spin_a, spin_b, spin_c, spin_d, sleeper)]
for t in threads:
    t.start()
sys.stdout.write("ready\n")
sys.stdout.flush()
for t in threads:
    t.join()
