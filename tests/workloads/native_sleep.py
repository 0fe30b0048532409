"""A thread that blocks, over and over, in time.sleep and select.select:
each call enters the kernel through a libc wrapper. Prints 'ready', then
loops until killed."""
import select
import sys
import threading
import time


def sleeper():
    while True:
        time.sleep(0.0001)  # LINE:sleep
        select.select([], [], [], 0.0001)  # LINE:select


t = threading.Thread(target=sleeper)
t.daemon = True
t.start()
sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    time.sleep(1)
