"""A thread that blocks, over and over, in time.sleep and select.select, and
polls with select between: each call enters the kernel through a libc
wrapper. Prints 'ready', then loops until killed."""
import select
import sys
import threading
import time


def sleeper():
    while True:
        time.sleep(0.0001)  # LINE:sleep
        select.select([], [], [], 0.0001)  # LINE:select
        # Calls that return at once: time on a CPU in the kernel, which a
        # cpu-clock sample can see even when the machine is loaded.
        for _ in range(20):
            select.select([], [], [], 0)  # LINE:poll


t = threading.Thread(target=sleeper)
t.daemon = True
t.start()
sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    time.sleep(1)
