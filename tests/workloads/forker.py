# forker.py - a parent that forks short children one after another, each
# busy in child_work for SECONDS, the way a task runner forks per job.
# Usage: python forker.py CHILDREN SECONDS. Prints "child PID" for each child.
import os
import sys
import time


def child_work(deadline):
    n = 0
    while time.time() < deadline:
        n += 1
    return n


def main():
    children, seconds = int(sys.argv[1]), float(sys.argv[2])
    # Busy first, so that a profiler started with it sees the parent run
    # and recognises it before the first fork: a child forked before that
    # is a process it has not recognised yet either (on a loaded host the
    # first child or two were, 2% of the children's samples).
    child_work(time.time() + 0.5)
    for _ in range(children):
        pid = os.fork()
        if pid == 0:
            child_work(time.time() + seconds)
            os._exit(0)
        sys.stdout.write("child %d\n" % pid)
        sys.stdout.flush()
        os.waitpid(pid, 0)


main()
