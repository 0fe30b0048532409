# short.py - a short-lived process: busy in short_lived_work for SECONDS of CPU
# time, then exits. CPU time, not wall time: on a loaded machine each process
# still runs as long on a CPU, so a test sees as many of its samples.
import sys
import time


def short_lived_work(budget):
    n = 0
    end = time.process_time() + budget
    while time.process_time() < end:
        n += 1
    return n


short_lived_work(float(sys.argv[1]))
