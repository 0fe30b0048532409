# prefork.py - a prefork server: the parent forks WORKERS workers, each busy
# in worker_spin for LIFE seconds, and replaces each one that ends, for
# SECONDS; the parent itself is busy in parent_loop meanwhile.
# Usage: python prefork.py SECONDS WORKERS LIFE. Prints "worker PID" for
# each worker it forks, and "ready" once the first ones run.
import os
import sys
import time


def worker_spin(deadline):
    n = 0
    while time.time() < deadline:
        n += 1
    return n


def fork_worker(life):
    pid = os.fork()
    if pid == 0:
        worker_spin(time.time() + life)
        os._exit(0)
    sys.stdout.write("worker %d\n" % pid)
    sys.stdout.flush()
    return pid


def parent_loop(deadline, workers, life):
    live = set(fork_worker(life) for _ in range(workers))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    n = 0
    while time.time() < deadline:
        n += 1
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if pid in live:
            live.discard(pid)
            live.add(fork_worker(life))
    return n


def main():
    seconds, workers, life = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    parent_loop(time.time() + seconds, workers, life)


main()
