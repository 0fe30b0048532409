"""Creates instances of a class whose __init__ spins, over and over: on 3.13+
CPython runs each __init__ under a shim frame of its own. Prints 'ready',
then loops until killed."""
import sys


class Widget(object):
    def __init__(self):
        n = 0
        for i in range(300):  # LINE:init
            n += i
        self.n = n


def build():
    while True:
        Widget()  # LINE:call


sys.stdout.write("ready\n")
sys.stdout.flush()
build()
