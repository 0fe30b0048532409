"""libc's qsort, called through ctypes, with a Python comparator: the stack
runs Python -> ctypes and libffi -> qsort (libc) -> the ffi closure ->
Python. Prints 'ready', then sorts until killed."""
import ctypes
import ctypes.util
import sys

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))


def compare(a, b):
    x = 0
    for i in range(3000):  # LINE:compare
        x += i
    return a[0] - b[0]


cmp = CMP(compare)


def sort_once():
    arr = (ctypes.c_int * 64)(*range(64, 0, -1))
    libc.qsort(arr, 64, ctypes.sizeof(ctypes.c_int), cmp)  # LINE:qsort


sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    sort_once()
