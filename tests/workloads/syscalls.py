# syscalls.py - spends most of its time in the kernel, reading /dev/urandom.
# Usage: python syscalls.py SECONDS. Prints "ready" when busy.
import sys
import time


def read_urandom(f, deadline):
    while time.time() < deadline:
        f.read(1 << 16)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    with open("/dev/urandom", "rb", 0) as f:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        read_urandom(f, time.time() + seconds)


main()
