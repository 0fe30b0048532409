# hostile.py - a Python process that corrupts its own interpreter state through
# ctypes, as a hostile or broken target would, and keeps running.
#
# Usage: python hostile.py MODE SECONDS [NAME=OFFSET ...]
#
#   frame-loop        spin_looped()'s frame is its own caller (f_back / previous)
#   frame-garbage     spin_cut()'s caller is a garbage pointer
#   frame-skip        spin_skip(), run from C by map(), skips its caller: its
#                     caller link leads past runner() (and 3.12+'s shim) to
#                     main(), a real frame, so the Python stack is whole to
#                     look at but holds one eval loop's frames fewer than the
#                     native stack has eval loops
#   bad-name          victim()'s code object has a garbage co_name (and co_qualname)
#   random-linetable  victim()'s line table is replaced by random bytes
#   thread-cut        three threads; the newest thread state's `next` is garbage,
#                     so the older ones (main included) are cut off the list
#   churn             threads start, run a few ms and stop, as fast as they can
#   evil-names        victim() is renamed (co_name, co_qualname, co_filename) and
#                     the process (its comm) too, to terminal control sequences:
#                     a window title, a cleared screen, a forged traceback line,
#                     a clipboard write (OSC 52), a C1 CSI (3.8+)
#   evil-everywhere   every name a profile carries (victim()'s name and file,
#                     the thread's Python and OS names, the process's comm)
#                     holds control sequences and invisible characters that
#                     reorder or hide text (EVIL_ALL; 3.8+)
#   exec-chain        runs briefly, then execs /bin/sh, which execs this script
#                     again, SECONDS times (SECONDS is a count here)
#
# NAME=OFFSET are the version's row of src/cpython/gen/pyoffsets_table.c (the test reads
# them from there). Prints "ready" once the state is corrupted and the busy
# loop runs. Runs under 2.7 and 3.x. Ends with os._exit(): returning through
# a frame it broke would crash the interpreter, which is not what is tested.
import ctypes
import os
import random
import sys
import threading
import time

MODE = sys.argv[1]
SECONDS = float(sys.argv[2])
OFF = dict((a.split("=")[0], int(a.split("=")[1])) for a in sys.argv[3:])
DEADLINE = time.time() + SECONDS
# Never mapped in these processes: far below where x86-64 Linux puts the
# heap, libraries and stacks, and above a non-PIE binary.
GARBAGE = 0xDEAD0000

ctypes.pythonapi.PyThreadState_Get.restype = ctypes.c_void_p
ctypes.pythonapi.PyInterpreterState_Head.restype = ctypes.c_void_p


def peek(addr):
    return ctypes.c_void_p.from_address(addr).value or 0


def poke(addr, value):
    ctypes.c_void_p.from_address(addr).value = value


def ready():
    sys.stdout.write("ready\n")
    sys.stdout.flush()


def busy():
    n = 0
    while time.time() < DEADLINE:
        n += 1
    return n


def caller_frame():
    """The address of the calling function's frame: its PyFrameObject (<= 3.10)
    or its _PyInterpreterFrame (3.11+), the `previous` of this call's.
    Calls no Python function on the way: each would be the current frame."""
    if sys.version_info < (3, 11):
        return id(sys._getframe(1))
    word = ctypes.c_void_p.from_address
    ts = ctypes.pythonapi.PyThreadState_Get()
    if OFF.get("ts_cframe", -1) >= 0:
        me = word(word(ts + OFF["ts_cframe"]).value + OFF["cframe_current_frame"]).value
    else:
        me = word(ts + OFF["ts_current_frame"]).value
    return word(me + OFF["frame_back"]).value


def spin_looped():
    f = caller_frame()
    poke(f + OFF["frame_back"], f)
    ready()
    busy()
    os._exit(0)


def spin_cut():
    f = caller_frame()
    poke(f + OFF["frame_back"], GARBAGE)
    ready()
    busy()
    os._exit(0)


def runner(_):
    spin_skip()


def spin_skip():
    f = caller_frame()
    up = peek(peek(f + OFF["frame_back"]) + OFF["frame_back"])
    # 3.12+: the shim of the eval loop that map() entered lies below runner.
    if sys.version_info >= (3, 12) and ctypes.c_ubyte.from_address(up + OFF["frame_owner"]).value >= 3:
        up = peek(up + OFF["frame_back"])
    poke(f + OFF["frame_back"], up)
    ready()
    busy()
    os._exit(0)


def victim():
    ready()
    busy()
    os._exit(0)


# What evil-names names things: each piece acts on a terminal that prints it
# raw. The newline and the forged line imitate `taipan dump`'s frames.
EVIL_NAME = (u"\x1b]0;PWNED-TITLE\x07\x1b[2J\x1b[H\n"
             u"  File \"/etc/shadow\", line 1, in forged\n"
             u"\x1b]52;c;cHduZWQ=\x07\x9b31mred")
EVIL_FILE = u"/tmp/\x1b]2;PWNED-FILE\x07evil.py"
EVIL_COMM = b"\x1b]0;PWN\x07\x1b[2J"  # 12 bytes: comm holds 15


def evil_names():
    code = victim.__code__
    names = dict(co_name=EVIL_NAME, co_filename=EVIL_FILE)
    if sys.version_info >= (3, 11):
        names["co_qualname"] = EVIL_NAME
    victim.__code__ = code.replace(**names)
    libc = ctypes.CDLL(None)
    libc.prctl(15, ctypes.c_char_p(EVIL_COMM), 0, 0, 0)  # PR_SET_NAME
    victim()


# What evil-everywhere puts in every name: a window title, a cleared screen,
# a C1 CSI, a right-to-left override, the Arabic letter mark, a zero-width
# space.
EVIL_ALL = u"\x1b]0;pwned\x07\x1b[2J\x9b1m\u202e\u061c\u200b"
# The comm holds 15 bytes: ESC [2J, U+009B, U+202E, U+061C, "p".
EVIL_ALL_COMM = b"\x1b[2J\xc2\x9b\xe2\x80\xae\xd8\x9cp"


def evil_everywhere():
    code = victim.__code__
    names = dict(co_name=u"fn" + EVIL_ALL, co_filename=u"/tmp/file" + EVIL_ALL + u".py")
    if sys.version_info >= (3, 11):
        names["co_qualname"] = names["co_name"]
    victim.__code__ = code.replace(**names)
    libc = ctypes.CDLL(None)
    libc.prctl(15, ctypes.c_char_p(EVIL_ALL_COMM), 0, 0, 0)  # PR_SET_NAME

    def run():
        libc.prctl(15, ctypes.c_char_p(b"t\x1b]0;x\x07\xe2\x80\x8b"), 0, 0, 0)
        victim()

    threading.Thread(target=run, name=u"thread" + EVIL_ALL).start()
    while True:
        time.sleep(1)


def thread_cut():
    tstates = []
    go = threading.Event()

    def worker():
        tstates.append(ctypes.pythonapi.PyThreadState_Get())
        go.wait()
        busy()
        # A thread that ends unlinks its state from the list, through the
        # garbage pointer: end the process first.
        os._exit(0)

    for i in range(3):
        threading.Thread(target=worker).start()
        while len(tstates) <= i:  # one at a time: the list order is known
            time.sleep(0.01)
    # New thread states go to the head of the list: the newest is first, and
    # everything after it (older workers, then the main thread) is cut off.
    head = peek(ctypes.pythonapi.PyInterpreterState_Head() + OFF["interp_tstate_head"])
    assert head == tstates[-1], (head, tstates)
    poke(head + OFF["ts_next"], GARBAGE)
    go.set()
    ready()
    busy()
    os._exit(0)


def churn():
    def short():
        end = time.time() + 0.002
        while time.time() < end:
            pass

    ready()
    while time.time() < DEADLINE:
        ts = [threading.Thread(target=short) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    os._exit(0)


def exec_chain():
    if "HOSTILE_CHAINED" not in os.environ:
        ready()
    os.environ["HOSTILE_CHAINED"] = "1"
    end = time.time() + 0.05
    while time.time() < end:
        pass
    left = int(SECONDS)
    if left <= 0:
        os._exit(0)
    # Through a shell, so that the process is not Python for a while.
    cmd = 'exec "$0" "$1" exec-chain %d' % (left - 1)
    os.execv("/bin/sh", ["sh", "-c", cmd, sys.executable, os.path.abspath(__file__)])


def main():
    if MODE == "frame-loop":
        spin_looped()
    elif MODE == "frame-garbage":
        spin_cut()
    elif MODE == "frame-skip":
        list(map(runner, [0]))
    elif MODE == "bad-name":
        code = victim.__code__
        poke(id(code) + OFF["code_name"], GARBAGE)
        if OFF.get("code_qualname", -1) >= 0:
            poke(id(code) + OFF["code_qualname"], GARBAGE)
        victim()
    elif MODE == "random-linetable":
        code = victim.__code__
        rng = random.Random(4242)
        table = bytes(bytearray(rng.getrandbits(8) for _ in range(4096)))
        globals()["KEEP"] = table  # alive for as long as the code points at it
        poke(id(code) + OFF["code_linetable"], id(table))
        victim()
    elif MODE == "thread-cut":
        thread_cut()
    elif MODE == "churn":
        churn()
    elif MODE == "evil-names":
        evil_names()
    elif MODE == "evil-everywhere":
        evil_everywhere()
    elif MODE == "exec-chain":
        exec_chain()
    else:
        sys.stderr.write("hostile.py: unknown mode %s\n" % MODE)
        os._exit(2)


main()
