# wall_wait.py - a thread that waits in a known function: pipe_reader blocks
# reading a pipe that the main thread writes a byte to every 0.2 s; disk_sync
# writes a file in DIR and fsyncs it, again and again (the disk's wait is
# uninterruptible); idle_threads starts N threads that sleep 50 ms at a time;
# life sleeps in nap from the start, and measures the process's lifetime.
# Runs for SECONDS, then prints "result JSON" (for idle: each thread's tid and
# the seconds from its start to its end; for life, the seconds since the
# process's fork, to 10 ms).
# asleep N starts N threads that wait in wait_event or long_nap and one that
# naps 0.5 s at a time in short_naps, prints "tids JSON" and "ready", and
# waits in main_wait until its stdin ends.
# Usage: python wall_wait.py pipe SECONDS | disk SECONDS DIR | idle SECONDS N
#        | life SECONDS | asleep 0 N
import json
import os
import sys
import threading
import time

# The profiler's clock (CLOCK_MONOTONIC): the wall clock, time.time(), may be
# stepped or slewed while the workload runs (by 1% in this VM).
clock = time.monotonic


def pipe_reader(fd, n):
    for _ in range(n):
        os.read(fd, 1)


def pipe_test(seconds):
    r, w = os.pipe()
    n = max(1, int(seconds / 0.2))
    t = threading.Thread(target=pipe_reader, args=(r, n), name="reader")
    t.start()
    for _ in range(n):
        time.sleep(0.2)
        os.write(w, b"x")
    t.join()
    return {"tid": t.native_id}


def disk_sync(path, deadline):
    block = b"\0" * (1 << 20)
    with open(path, "wb") as f:
        while clock() < deadline:
            f.seek(0)
            f.write(block)
            f.flush()
            os.fsync(f.fileno())


def disk_test(seconds, where):
    path = os.path.join(where, "wall_wait.%d" % os.getpid())
    try:
        disk_sync(path, clock() + seconds)
    finally:
        os.unlink(path)
    return {"tid": threading.current_thread().native_id}


def idle_thread(deadline, lives, i):
    t0 = clock()
    while clock() < deadline:
        time.sleep(0.05)
    lives[i] = (threading.current_thread().native_id, t0, clock())


def idle_test(seconds, n):
    lives = [None] * n
    deadline = clock() + seconds
    threads = [threading.Thread(target=idle_thread, args=(deadline, lives, i)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"threads": {str(tid): end - start for tid, start, end in lives}}


def nap(seconds):
    time.sleep(seconds)


def life_test(seconds):
    nap(seconds)
    # The process's start, in clock ticks since boot (proc(5)), and now.
    with open("/proc/self/stat") as f:
        start = int(f.read().rsplit(")", 1)[1].split()[19]) / float(os.sysconf("SC_CLK_TCK"))
    return {"life": time.clock_gettime(time.CLOCK_BOOTTIME) - start}


def wait_event(ev):
    ev.wait()


def long_nap(ev):
    while not ev.is_set():
        time.sleep(3600)


def short_naps(ev):
    while not ev.is_set():
        time.sleep(0.5)


def main_wait():
    return sys.stdin.read()


def asleep_test(n):
    ev = threading.Event()
    threads = [threading.Thread(target=wait_event if i % 2 == 0 else long_nap, args=(ev,), daemon=True)
               for i in range(n)]
    napper = threading.Thread(target=short_naps, args=(ev,), daemon=True)
    for t in threads + [napper]:
        t.start()
    print("tids " + json.dumps({"main": threading.current_thread().native_id, "napper": napper.native_id,
                                "waiting": [t.native_id for t in threads]}))
    print("ready")
    sys.stdout.flush()
    main_wait()
    ev.set()
    return {}


def main():
    what, seconds = sys.argv[1], float(sys.argv[2])
    if what == "pipe":
        res = pipe_test(seconds)
    elif what == "disk":
        res = disk_test(seconds, sys.argv[3])
    elif what == "life":
        res = life_test(seconds)
    elif what == "asleep":
        res = asleep_test(int(sys.argv[3]))
    else:
        res = idle_test(seconds, int(sys.argv[3]))
    print("result " + json.dumps(res))
    sys.stdout.flush()


main()
