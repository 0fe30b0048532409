# wall_mix.py - one thread that computes 30% and sleeps 70% of the time, in
# known functions (compute_phase, sleep_phase), for SECONDS; each phase's
# wall-clock time is measured here, around the call. At the end one line
# "result JSON": the tid, the seconds spent in each phase, the thread's CPU
# seconds in each, and the number of rounds (each sleeps SLEEP_MS at least).
# Usage: python wall_mix.py SECONDS [COMPUTE_MS SLEEP_MS [PAUSE_MS]]
import json
import sys
import threading
import time

# The profiler's clock (CLOCK_MONOTONIC): the wall clock, time.time(), may be
# stepped or slewed while the workload runs (by 1% in this VM).
clock = time.monotonic


def compute_phase(t):
    end = clock() + t
    n = 0
    while clock() < end:
        for _ in range(200):
            n += 1
    return n


def sleep_phase(t):
    time.sleep(t)


def main():
    seconds = float(sys.argv[1])
    c = float(sys.argv[2]) / 1000 if len(sys.argv) > 2 else 0.03
    s = float(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 0.07
    spent = {"compute_phase": 0.0, "sleep_phase": 0.0}
    cpu = {"compute_phase": 0.0, "sleep_phase": 0.0}
    # Measured from here, after a pause in which a profiler recognises the
    # process: time before that is no function's (taipan has it under
    # "[before taipan recognised the process]", without stacks), and a
    # loaded host takes longer.
    time.sleep(float(sys.argv[4]) / 1000 if len(sys.argv) > 4 else 0.5)
    deadline = clock() + seconds
    rounds = 0
    while clock() < deadline:
        rounds += 1
        for fn, arg in ((compute_phase, c), (sleep_phase, s)):
            # Each clock reads only the call between them: thread_time is
            # a system call, where a loaded host preempts the thread (for
            # 9 ms in one run), and that wait is main's, not the phase's.
            c0 = time.thread_time()
            t0 = clock()
            fn(arg)
            t1 = clock()
            spent[fn.__name__] += t1 - t0
            cpu[fn.__name__] += time.thread_time() - c0
    tid = threading.current_thread().native_id if hasattr(threading.current_thread(), "native_id") else 0
    print("result " + json.dumps({"tid": tid, "spent": spent, "cpu": cpu, "rounds": rounds}))
    sys.stdout.flush()


main()
