"""CPython's perf trampolines (3.12+, as -X perf turns them on): every call
of the eval loop from C goes through a trampoline in anonymous executable
memory, which the process names in /tmp/perf-PID.map (py::qualname:file).
Here sorted() calls keyfunc from C, so keyfunc's frames run behind one.
Prints 'ready', then loops until killed."""
import sys

sys.activate_stack_trampoline("perf")


def keyfunc(x):
    t = 0
    for i in range(300):  # LINE:keyfunc
        t += i
    return -x


def work():
    return sorted(range(50), key=keyfunc)  # LINE:sorted


sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    work()
