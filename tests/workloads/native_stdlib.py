"""Hot C code of the standard library under known Python lines: the re
engine, zlib's deflate and hashlib's SHA-256. Prints 'ready', then loops
until killed."""
import hashlib
import re
import sys
import zlib

DATA = b"abcdefghij" * 20000
PATTERN = re.compile(r"(a|b)*c{3}x")
TEXT = "ab" * 4000


def regex():
    return PATTERN.search(TEXT)  # LINE:regex


def compress():
    return zlib.compress(DATA, 9)  # LINE:compress


def digest():
    return hashlib.sha256(DATA * 4).hexdigest()  # LINE:digest


sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    regex()
    compress()
    digest()
