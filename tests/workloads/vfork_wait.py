# vfork_wait.py - a process with a thread stuck in the kernel where ptrace
# cannot stop it, for as long as the test needs: the thread vforks (through
# LIB, a C helper the test compiles: Python cannot vfork safely) and the child
# sleeps instead of exec'ing, so the thread waits for it in the kernel
# (wait_for_vfork_done, state D) and a PTRACE_INTERRUPT stays pending.
#
# Usage: python vfork_wait.py LIB SECONDS
#
# Prints "ready" once the thread is in state D; the main thread then sleeps
# in main_waits() until SECONDS have passed. The child dies with its parent
# thread (PR_SET_PDEATHSIG).
import ctypes
import os
import sys
import threading
import time

LIB = ctypes.CDLL(sys.argv[1])
SECONDS = float(sys.argv[2])
DEADLINE = time.time() + SECONDS
tids = []


def vforker():
    tids.append(threading.get_native_id())
    LIB.vfork_and_sleep(ctypes.c_uint(int(SECONDS) + 1))


def state(tid):
    with open("/proc/self/task/%d/stat" % tid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def main_waits():
    threading.Thread(target=vforker, name="vforker", daemon=True).start()
    while not tids or state(tids[0]) != "D":
        time.sleep(0.01)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while time.time() < DEADLINE:
        time.sleep(0.05)
    os._exit(0)


main_waits()
