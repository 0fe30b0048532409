# otlp_phases.py - one thread that spins in first_phase, sleeps in
# nap_phase, then spins in second_phase, each for SECONDS, and exits. For
# each phase it prints "phase NAME START END": the wall-clock time
# (time.time_ns(), what OTLP's timestamps are) when it began and ended.
# Usage: python otlp_phases.py [SECONDS] [PAUSE_S]
import sys
import time


def spin(t):
    end = time.monotonic() + t
    n = 0
    while time.monotonic() < end:
        for _ in range(200):
            n += 1
    return n


def first_phase(t):
    spin(t)


def nap_phase(t):
    time.sleep(t)


def second_phase(t):
    spin(t)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 0.6
    # A pause in which the profiler recognises the process.
    time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0.5)
    for fn in (first_phase, nap_phase, second_phase):
        t0 = time.time_ns()
        fn(seconds)
        print("phase", fn.__name__, t0, time.time_ns(), flush=True)


main()
