"""Calls FUNCTION(N) of the shared library LIB through ctypes, over and over.
Usage: call_lib.py LIB FUNCTION N. Prints 'ready' after the first call, then
runs until killed."""
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
fn = getattr(lib, sys.argv[2])
fn.argtypes = [ctypes.c_ulong]
n = int(sys.argv[3])


def call():
    fn(n)  # LINE:call


call()
sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    call()
