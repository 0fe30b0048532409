# blocked.py - N threads (default 50), each blocked in its own function on a
# lock it never gets: blocked_00 to blocked_NN, at a known line. Each thread
# names itself blk-NN (in /proc/PID/task/TID/comm), so a tool can check that
# it matched every Python thread with the right OS thread.
# Usage: python blocked.py SECONDS [N]. Prints "ready" once every thread waits.
import os
import sys
import threading
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
N = int(sys.argv[2]) if len(sys.argv) > 2 else 50
GEN_FILE = "<blocked>"

# Distinct functions, so that each thread's stack is its own. Line 3*i+3 of
# GEN_FILE is where blocked_i waits.
SRC = "".join("def blocked_%02d(lock, started, name_self):\n"
              "    name_self('blk-%02d'); started.release()\n"
              "    lock.acquire()\n" % (i, i) for i in range(N))
env = {}
exec(compile(SRC, GEN_FILE, "exec"), env)


def name_self(name):
    """Names the calling OS thread. prctl needs no /proc, which a chroot may lack."""
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        if libc.prctl(15, ctypes.c_char_p(name.encode()), 0, 0, 0) == 0:  # PR_SET_NAME
            return
    except Exception:
        pass
    tid = threading.get_native_id() if hasattr(threading, "get_native_id") else None
    if tid:
        with open("/proc/self/task/%d/comm" % tid, "w") as f:
            f.write(name)


lock = threading.Lock()
lock.acquire()
started = threading.Semaphore(0)
threads = []
for i in range(N):
    t = threading.Thread(target=env["blocked_%02d" % i], args=(lock, started, name_self))
    t.daemon = True
    t.start()
    threads.append(t)
for _ in range(N):
    started.acquire()
time.sleep(0.2)  # from release() to acquire() in each thread
sys.stdout.write("ready\n")
sys.stdout.flush()
time.sleep(SECONDS)
os._exit(0)
