"""C code whose unwinding needs the CFI rules of realigned stacks and of
stack-clash probes (realign.c): Python calls realign_call(), whose stack GCC
realigns, and which calls back into Python; then probe_spin(), which spends
its time in big_frame()'s probe loop. argv[1]: the directory of realign.so.
Prints 'ready', then runs until killed."""
import ctypes
import os
import sys
import time

lib = ctypes.CDLL(os.path.join(sys.argv[1], "realign.so"))
CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int)


def in_realigned(n):
    t = time.time()
    while time.time() - t < 0.01:  # LINE:callback
        pass


callback = CALLBACK(in_realigned)
sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    lib.realign_call(100, callback)
    lib.probe_spin(10)  # LINE:probe
