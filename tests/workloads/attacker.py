# attacker.py - what an unprivileged local user can do to a root profiler
# that reads her processes and files (test_attacks.py). Each mode prints
# "ready" once the attack is in place, then keeps it up for SECONDS.
#
#   truncate FILE NSYMS SECONDS   an ELF of NSYMS symbols, mapped and run; each
#                                 time another process opens it, it is cut to
#                                 its first page 50 ms later, and restored
#   files DIR N SECONDS           N copies of a small library, each mapped
#                                 executable (its descriptors closed)
#   linetable NFUNCS KIB SECONDS  NFUNCS functions whose code objects share one
#                                 line table of KIB KiB, each run in turn
#   spin FILE... SECONDS          maps each ELF and spins in each, a thread each
#   threads N SECONDS             a thread that computes (hidden_work), then N
#                                 idle ones: CPython lists threads newest
#                                 first, so the busy one is the (N+1)th
import ctypes
import mmap
import os
import select
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import elfgen  # noqa: E402

IN_OPEN = 0x20
libc = ctypes.CDLL(None, use_errno=True)
maps = []


def ready():
    sys.stdout.write("ready\n")
    sys.stdout.flush()


def map_exec(path):
    """Maps all of path read+execute; the mapping stays, the descriptor goes."""
    fd = os.open(path, os.O_RDONLY)
    try:
        m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC)
    finally:
        os.close(fd)
    maps.append(m)
    return m


class Mapped:
    """An ELF of elfgen's, mapped."""

    def __init__(self, path):
        self.path = path
        self.m = map_exec(path)

    def spin(self):
        """A thread that runs its spinning code (elfgen.CODE)."""
        addr = None
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and parts[5] == self.path and "x" in parts[1]:
                    addr = int(parts[0].split("-")[0], 16)
        assert addr is not None, "mapping of %s not found" % self.path
        fn = ctypes.CFUNCTYPE(None)(addr + elfgen.CODE_OFF)
        threading.Thread(target=fn, daemon=True).start()


def truncate(path, nsyms, seconds):
    elfgen.write(path, nsyms)
    with open(path, "rb") as f:
        whole = f.read()
    Mapped(path).spin()
    ino = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert ino >= 0

    def watch():
        assert libc.inotify_add_watch(ino, path.encode(), IN_OPEN) >= 0

    watch()
    ready()
    deadline = time.time() + seconds
    cuts = 0
    while time.time() < deadline:
        r, _, _ = select.select([ino], [], [], 0.2)
        if not r:
            continue
        os.read(ino, 4096)
        time.sleep(0.05)
        # Cut to the first page (the code stays), then, after a while,
        # the whole file again for the next open; the watch is off while
        # she writes, so that her own opens do not count.
        os.truncate(path, elfgen.PAGE)
        cuts += 1
        time.sleep(0.3)
        os.close(ino)
        with open(path, "r+b") as f:
            f.write(whole)
        ino = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        watch()
        sys.stderr.write("cut %d\n" % cuts)
        sys.stderr.flush()


def files(d, n, seconds):
    src = "/usr/lib/x86_64-linux-gnu/libdl.so.2"
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        p = os.path.join(d, "lib%05d.so" % i)
        shutil.copyfile(src, p)
        map_exec(p)
    ready()
    time.sleep(seconds)


def linetable(nfuncs, kib, seconds):
    def body(deadline):
        n = 0
        while time.time() < deadline:
            n += 1
        return n

    code = body.__code__
    # A line table is a sequence of self-delimiting entries: repeated, it
    # stays one, only longer than the code it describes.
    unit = code.co_linetable
    big = unit * (kib * 1024 // len(unit))
    funcs = []
    for i in range(nfuncs):
        c = code.replace(co_name="shared_%d" % i, co_linetable=big)
        if hasattr(c, "co_qualname"):
            c = c.replace(co_qualname="shared_%d" % i)
        funcs.append(type(body)(c, globals()))
    assert all(f.__code__.co_linetable is big for f in funcs)
    ready()
    deadline = time.time() + seconds
    while time.time() < deadline:
        for f in funcs:
            f(time.time() + 0.003)


def spin(paths, seconds):
    for p in paths:
        Mapped(p).spin()
    ready()
    time.sleep(seconds)


def hidden_work(deadline):
    n = 0
    while time.time() < deadline:
        n += 1
    return n


def threads(n, seconds):
    deadline = time.time() + seconds
    threading.Thread(target=hidden_work, args=(deadline,), name="hidden", daemon=True).start()
    stop = threading.Event()
    for i in range(n):
        threading.Thread(target=stop.wait, name="idle-%d" % i, daemon=True).start()
    ready()
    time.sleep(seconds)


def main():
    mode = sys.argv[1]
    if mode == "truncate":
        truncate(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif mode == "files":
        files(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif mode == "linetable":
        linetable(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    elif mode == "threads":
        threads(int(sys.argv[2]), float(sys.argv[3]))
    elif mode == "spin":
        spin(sys.argv[2:-1], float(sys.argv[-1]))
    else:
        sys.exit("unknown mode " + mode)


main()
