"""A Python function that runs inside a signal handler while C code is
interrupted: sigspin.so's loop spins in C (ctypes, the GIL released), and
every 20 ms SIGALRM's C handler calls back into Python, which spins 10 ms.
The stack of a sample in the callback runs: <module> -> ctypes -> the C loop
-> the kernel's signal frame (__restore_rt) -> the C handler -> libffi's
closure -> on_alarm. argv[1]: the directory of sigspin.so. Prints 'ready',
then runs until killed."""
import ctypes
import os
import signal
import sys
import time

lib = ctypes.CDLL(os.path.join(sys.argv[1], "sigspin.so"))
HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)


def on_alarm(sig):
    t = time.time()
    while time.time() - t < 0.01:  # LINE:on_alarm
        pass


handler = HANDLER(on_alarm)
lib.sigspin_install(handler)
signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
sys.stdout.write("ready\n")
sys.stdout.flush()
lib.sigspin_loop()  # LINE:loop
