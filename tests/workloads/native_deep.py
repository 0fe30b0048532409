"""A Python caller of a C++ chain deep_spin(400, ...) frames deep
(deep.cc), through ctypes. argv[1]: the directory of deep.so; argv[2]: the
depth. Prints 'ready', then runs until killed."""
import ctypes
import os
import sys

lib = ctypes.CDLL(os.path.join(sys.argv[1], "deep.so"))
lib.deep_spin.argtypes = [ctypes.c_int, ctypes.c_double]
lib.deep_spin.restype = ctypes.c_ulong
depth = int(sys.argv[2])


def descend():
    lib.deep_spin(depth, 50.0)  # LINE:call


sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    descend()
