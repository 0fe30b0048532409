"""A loop over three kinds of C under Python, each for a slice of wall time
in turn: re's matcher, json's encoder, and libc's qsort through ctypes with
a Python comparator (Python -> ctypes, libffi -> qsort -> the ffi closure
-> Python). Prints 'ready', then loops until killed."""
import ctypes
import ctypes.util
import json
import re
import sys
import time

SLICE = 0.05
libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
PATTERN = re.compile(r"(a|b)*c{3}x")
TEXT = "ab" * 200
DOC = {"k%d" % i: [i, str(i), {"x": i * 0.5, "y": [True, None]}] for i in range(300)}


def compare(a, b):
    return a[0] - b[0]  # LINE:compare


cmp = CMP(compare)


def sort_once():
    arr = (ctypes.c_int * 200)(*range(200, 0, -1))
    t = time.time()
    while time.time() - t < SLICE:
        libc.qsort(arr, 200, ctypes.sizeof(ctypes.c_int), cmp)  # LINE:qsort


def regex():
    t = time.time()
    while time.time() - t < SLICE:
        PATTERN.search(TEXT)  # LINE:regex


def encode():
    t = time.time()
    while time.time() - t < SLICE:
        json.dumps(DOC)  # LINE:encode


sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    sort_once()
    regex()
    encode()
