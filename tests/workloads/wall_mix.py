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


def compute_phase(t):
    end = time.time() + t
    n = 0
    while time.time() < end:
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
    # process: time before that is no function's (taipan's samples of it
    # are "[before taipan recognised the process]", and its time off the
    # CPU is not in the profile), and a loaded host takes longer.
    time.sleep(float(sys.argv[4]) / 1000 if len(sys.argv) > 4 else 0.5)
    deadline = time.time() + seconds
    rounds = 0
    while time.time() < deadline:
        rounds += 1
        t0, c0 = time.time(), time.thread_time()
        compute_phase(c)
        t1, c1 = time.time(), time.thread_time()
        sleep_phase(s)
        t2, c2 = time.time(), time.thread_time()
        spent["compute_phase"] += t1 - t0
        spent["sleep_phase"] += t2 - t1
        cpu["compute_phase"] += c1 - c0
        cpu["sleep_phase"] += c2 - c1
    tid = threading.current_thread().native_id if hasattr(threading.current_thread(), "native_id") else 0
    print("result " + json.dumps({"tid": tid, "spent": spent, "cpu": cpu, "rounds": rounds}))
    sys.stdout.flush()


main()
