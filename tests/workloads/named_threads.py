# named_threads.py - threads with Python names, each busy in its own function:
# "hasher" in hash_loop, "sorter" in sort_loop, one started as "early" and
# renamed "renamed" before it reaches rename_loop, one started with
# _thread.start_new_thread (no Thread object, so no Python name) in raw_loop,
# and the main thread ("MainThread") in main_loop.
# Usage: python named_threads.py SECONDS. Prints "ready" when all are busy.
import sys
import threading
import time

try:
    import _thread
except ImportError:  # 2.7
    import thread as _thread

DEADLINE = time.time() + (float(sys.argv[1]) if len(sys.argv) > 1 else 5.0)
go = threading.Event()
busy = []
lock = threading.Lock()


def started():
    with lock:
        busy.append(1)


def hash_loop():
    started()
    n = 0
    while time.time() < DEADLINE:
        n = hash((n, 1))


def sort_loop():
    started()
    while time.time() < DEADLINE:
        sorted(range(50, 0, -1))


def rename_loop():
    go.wait()
    started()
    n = 0
    while time.time() < DEADLINE:
        n += 1


def raw_loop():
    started()
    n = 0
    while time.time() < DEADLINE:
        n += 1


def main_loop():
    # Ready from here: a dump right after sees the main thread in main_loop.
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    n = 0
    while time.time() < DEADLINE:
        n += 1


threads = [threading.Thread(target=hash_loop, name="hasher"),
           threading.Thread(target=sort_loop, name="sorter"),
           threading.Thread(target=rename_loop, name="early")]
for t in threads:
    t.daemon = True
    t.start()
threads[2].name = "renamed"
go.set()
_thread.start_new_thread(raw_loop, ())
while len(busy) < 4:
    time.sleep(0.01)
main_loop()
