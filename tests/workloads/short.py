# short.py - a short-lived process: busy in short_lived_work for SECONDS, then exits.
import sys
import time


def short_lived_work(deadline):
    n = 0
    while time.time() < deadline:
        n += 1
    return n


short_lived_work(time.time() + float(sys.argv[1]))
