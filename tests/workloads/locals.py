# locals.py - frames with known variables of every kind dump --locals shows:
# outer() holds an int, a str, a float, a negative int, an int past 64
# bits, a bool, None, bytes, a list, a dict, a tuple, an instance and two
# cells (n and count, which inner uses); inner() holds a str and an int of
# its own and the two as free variables. Prints 'ready' from inner, then
# sleeps there until killed. Runs on 2.7 as on 3.x.
import sys
import time


class Thing(object):
    pass


def outer(n, label):
    count = 42
    ratio = 2.5
    neg = -7
    big = 2 ** 70
    flag = True
    nothing = None
    raw = b"ab\x00'"
    words = ["a", "b", "c"]
    table = {"x": 1, "y": 2}
    pair = (1, 2)
    thing = Thing()

    def inner(extra):
        here = count + n
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        while True:
            time.sleep(1)  # LINE:sleep

    inner("more")


outer(7, "hello")
