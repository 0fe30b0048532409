"""A Python callback called from code that loses the native walk (lost.c,
built by the tests): argv[1] is the directory of lost.so, argv[2] the
function ("lost_nowhere" or "lost_nofp"). The callback spins and never
returns. Prints 'ready', then runs until killed."""
import ctypes
import os
import sys

lib = ctypes.CDLL(os.path.join(sys.argv[1], "lost.so"))
CALLBACK = ctypes.CFUNCTYPE(None)


def spin():
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    t = 0
    while True:
        t += 1  # LINE:spin


callback = CALLBACK(spin)
getattr(lib, sys.argv[2])(callback)
