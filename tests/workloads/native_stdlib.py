"""Hot C code of the standard library under known Python lines: the re
engine, zlib's deflate and hashlib's SHA-256, each for a slice of wall time
in turn, so that each gets about a third of the samples whatever the
interpreter's speed. Prints 'ready', then loops until killed."""
import hashlib
import re
import sys
import time
import zlib

SLICE = 0.05
DATA = bytes(bytearray((i * i * 7919 + (i >> 5)) & 0xFF for i in range(100000)))
BIG = DATA * 10
PATTERN = re.compile(r"(a|b)*c{3}x")
TEXT = "ab" * 200


def regex():
    t = time.time()
    while time.time() - t < SLICE:
        PATTERN.search(TEXT)  # LINE:regex


def compress():
    t = time.time()
    while time.time() - t < SLICE:
        zlib.compress(DATA, 9)  # LINE:compress


def digest():
    t = time.time()
    while time.time() - t < SLICE:
        hashlib.sha256(BIG).hexdigest()  # LINE:digest


sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    regex()
    compress()
    digest()
