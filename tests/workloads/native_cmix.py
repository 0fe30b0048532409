"""Python and C in turn: py_a -> cmix.c_b -> py_c -> cmix.c_d, which spins
in C. argv: the directory holding the built cmix extension, and how many
seconds to run pure Python before importing it (0: at once). Prints
'ready' before that wait, then calls py_a until killed."""
import sys
import time

sys.path.insert(0, sys.argv[1])
delay = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0

sys.stdout.write("ready\n")
sys.stdout.flush()


def wait():
    x = 0
    t0 = time.time()
    while time.time() - t0 < delay:
        for i in range(1000):  # LINE:wait
            x += i
    return x


wait()
import cmix  # noqa: E402


def py_c():
    cmix.c_d(300000)  # LINE:py_c


def py_a():
    cmix.c_b(py_c)  # LINE:py_a


while True:
    py_a()
