# ft_churn.py - waves of 64 threads that start together, each busy for a
# moment in one of eight functions (churn_0 ... churn_7, by its index) and
# gone, for SECONDS and at least WAVES waves (a loaded machine may need
# longer for them). Prints "ready" first, then at the end one line
# "result JSON": each thread's native id and the function it ran, and the
# CPU time the process used.
# Usage: python ft_churn.py SECONDS [WAVES]
import json
import sys
import threading
import time

seconds = float(sys.argv[1])
min_waves = int(sys.argv[2]) if len(sys.argv) > 2 else 3
ran = {}
lock = threading.Lock()


def busy(k):
    n = 0
    for _ in range(20000 + 500 * k):
        n += 1
    return n


def churn_0(): return busy(0)
def churn_1(): return busy(1)
def churn_2(): return busy(2)
def churn_3(): return busy(3)
def churn_4(): return busy(4)
def churn_5(): return busy(5)
def churn_6(): return busy(6)
def churn_7(): return busy(7)


FUNCS = [churn_0, churn_1, churn_2, churn_3, churn_4, churn_5, churn_6, churn_7]


def worker(barrier, fn):
    barrier.wait()
    with lock:
        ran[threading.get_native_id()] = fn.__name__
    fn()


def wave():
    barrier = threading.Barrier(64)
    threads = [threading.Thread(target=worker, args=(barrier, FUNCS[i % 8])) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main():
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    deadline = time.time() + seconds
    waves = 0
    while time.time() < deadline or waves < min_waves:
        wave()
        waves += 1
    sys.stdout.write("result %s\n" % json.dumps({"waves": waves, "ran": ran, "cpu": time.process_time()}))
    sys.stdout.flush()


main()
