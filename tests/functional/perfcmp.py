"""taipan's native stacks against `perf record --call-graph dwarf`, the
ground truth for native frames, on the same process at the same time.

record_both() runs both on a process; then, for each:
- the share of its samples whose stack reaches the thread's root (the
  outermost frame is the C library's _start, clone or clone3, and taipan put
  no marker in the stack);
- the share of its samples in each leaf function (the innermost frame,
  kernel or user).

Used by tests/functional/test_native_real.py and bench/native.py."""
import os
import re
import shutil
import signal
import subprocess
import time
from collections import Counter

from conftest import parse_folded

# The outermost frame of a thread whose stack was unwound whole.
ROOTS = {"_start", "__clone3", "clone3", "__clone", "clone", "__GI___clone3", "__GI___clone"}
# Anonymous code without a name (JIT code): perf's [unknown] in perf-PID.map,
# taipan's bare address.
JIT = "[unknown] JIT code"
JIT_MARKER = "[native: JIT code without a frame pointer]"
PERF_LINE = re.compile(r"^\s*([0-9a-f]+) (.*) \((.*)\)$")


def perf_path():
    return shutil.which("perf")


def perf_samples(perf, data, pid):
    """The callchains of pid's samples in data, innermost first, as lists
    of (symbol, dso)."""
    out = subprocess.run([perf, "script", "-i", data, "-F", "pid,ip,sym,dso", "--no-inline"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    samples, cur, cur_pid = [], None, None
    for line in out.splitlines():
        if not line.strip():
            if cur is not None and cur_pid == pid:
                samples.append(cur)
            cur = None
            continue
        m = PERF_LINE.match(line)
        if cur is not None and m:
            cur.append((m.group(2), os.path.basename(m.group(3))))
        elif cur is None:
            head = line.split()
            cur_pid = int(head[0]) if head and head[0].isdigit() else None
            cur = []
    if cur is not None and cur_pid == pid:
        samples.append(cur)
    return samples


def perf_symbol(sym):
    """perf's symbol without its +0xOFFSET."""
    return re.sub(r"\+0x[0-9a-f]+$", "", sym)


def perf_leaf(frame):
    """perf's name of a leaf frame (symbol, dso): an unnamed one by its module."""
    sym, dso = frame
    if sym == "[unknown]":
        return JIT if re.match(r"^perf-\d+\.map$", dso) else "[unknown] " + dso
    return perf_symbol(sym)


def perf_in_jit(sample):
    """Whether a perf sample met JIT code (a frame in perf-PID.map)."""
    return any(re.match(r"^perf-\d+\.map$", dso) for _, dso in sample)


def perf_figures(samples):
    """(share reaching the root, {leaf: share}, share that met JIT code,
    share reaching the root of those that did not) of perf's samples, in %."""
    n = len(samples) or 1
    whole = sum(1 for s in samples if s and perf_symbol(s[-1][0]) in ROOTS)
    rest = [s for s in samples if s and not perf_in_jit(s)]
    rest_whole = sum(1 for s in rest if perf_symbol(s[-1][0]) in ROOTS)
    leaves = Counter(perf_leaf(s[0]) for s in samples if s)
    return (100.0 * whole / n, {k: 100.0 * v / n for k, v in leaves.items()}, 100.0 * (n - len(rest)) / n,
            100.0 * rest_whole / (len(rest) or 1))


def taipan_leaf(stack, eval_loop):
    """The innermost kernel or native frame's function, as perf names it:
    where the innermost frame is a Python one, the interpreter's eval loop,
    which the merge replaced with it; an unnamed address, its module, as
    perf's [unknown] is."""
    if stack.frames and not (stack.frames[-1].native or stack.frames[-1].kernel or stack.frames[-1].marker):
        return eval_loop
    frames = [f for f in stack.frames if f.native or f.kernel]
    if not frames:
        return None
    name = frames[-1].name
    if re.match(r"^0x[0-9a-f]+$", name):
        return JIT
    m = re.match(r"^(\S+)\+0x[0-9a-f]+$", name)
    if m:
        return "[unknown] " + m.group(1)
    return re.sub(r"\(.*$", "", name)  # perf names C++ functions without their parameters


NOT_READ = "[native: code taipan had not read yet]"


def warming(stack):
    """A sample taken before taipan had built the tables of the code it ran
    (a process that maps hundreds of files has them built over its first
    few hundred milliseconds): not a failure to unwind, counted apart."""
    return any(f.name == NOT_READ for f in stack.frames)


def taipan_in_jit(stack):
    """Whether a taipan stack met JIT code (an unnamed frame in anonymous
    memory, or the marker of JIT code it could not step out of)."""
    return any(f.name == JIT_MARKER or (f.native and re.match(r"^0x[0-9a-f]+$", f.name)) for f in stack.frames)


# What taipan puts above the root of a thread that runs no Python code: it
# says what the thread is, not that its stack was cut.
NO_PYTHON = "[no Python thread state]"


def taipan_whole(stack):
    frames = stack.frames[1:] if stack.frames and stack.frames[0].name == NO_PYTHON else stack.frames
    return bool(frames) and not any(f.marker for f in frames) and frames[0].native and frames[0].name in ROOTS


def taipan_figures(stacks, pid):
    """perf_figures() of taipan's stacks of pid, leaving out those of
    warming()."""
    mine = [s for s in stacks if s.pid == pid and not warming(s)]
    n = sum(s.count for s in mine) or 1
    whole = sum(s.count for s in mine if taipan_whole(s))
    rest = [s for s in mine if not taipan_in_jit(s)]
    rest_n = sum(s.count for s in rest)
    rest_whole = sum(s.count for s in rest if taipan_whole(s))
    leaves = Counter()
    for s in mine:
        leaf = taipan_leaf(s, "_PyEval_EvalFrameDefault")
        if leaf:
            leaves[leaf] += s.count
    return (100.0 * whole / n, {k: 100.0 * v / n for k, v in leaves.items()}, 100.0 * (n - rest_n) / n,
            100.0 * rest_whole / (rest_n or 1))


def record_both(taipan, tmp, pid, seconds, rate=999):
    """Records pid with taipan (--native all) and perf (--call-graph dwarf,
    cpu-clock) at the same time. perf starts once taipan has read all the
    process's code (its -v line), so that both record the same steady
    state: taipan's samples taken before then would be left out as
    warming(), and dropping those alone would skew its leaf shares against
    perf's, which has no such window. taipan stops (SIGINT) after perf.
    Returns (perf's samples, taipan's stacks)."""
    perf = perf_path()
    data = os.path.join(tmp, "perf.data")
    out = os.path.join(tmp, "taipan.folded")
    log = open(os.path.join(tmp, "taipan.err"), "w+")
    t = subprocess.Popen([taipan, "record", "-v", "-r", str(rate), "-o", out, "--folded-threads",
                          "--native", "all", "-p", str(pid)],
                         stdout=subprocess.DEVNULL, stderr=log, text=True)
    ready = re.compile(r"pid %d: native: all its code read" % pid)
    try:
        deadline = time.time() + 120
        while True:
            log.seek(0)
            if ready.search(log.read()):
                break
            assert t.poll() is None, "taipan exited:\n" + open(log.name).read()
            assert time.time() < deadline, "taipan did not read the code in 120 s:\n" + open(log.name).read()
            time.sleep(0.1)
        subprocess.run([perf, "record", "-q", "-e", "cpu-clock", "-F", str(rate), "--call-graph",
                        "dwarf,32768", "-o", data, "-p", str(pid), "--", "sleep", str(seconds)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=seconds + 60)
    finally:
        if t.poll() is None:
            t.send_signal(signal.SIGINT)
        t.wait(timeout=60)
    log.seek(0)
    err = log.read()
    log.close()
    assert t.returncode == 0 and os.path.getsize(out) > 0, err
    return perf_samples(perf, data, pid), parse_folded(out)


def compare(perf_samples_, stacks, pid):
    """{'perf_root': %, 'taipan_root': %, 'leaves': [(leaf, perf %, taipan %)]}
    with the leaves that hold 2% of either's samples, largest first."""
    pr, pl, pj, prest = perf_figures(perf_samples_)
    tr, tl, tj, trest = taipan_figures(stacks, pid)
    keys = sorted(set(pl) | set(tl), key=lambda k: -max(pl.get(k, 0), tl.get(k, 0)))
    mine = [s for s in stacks if s.pid == pid]
    return {"perf_root": pr, "taipan_root": tr, "perf_jit": pj, "taipan_jit": tj, "perf_rest_root": prest,
            "taipan_rest_root": trest, "perf_n": len(perf_samples_),
            "taipan_n": sum(s.count for s in mine),
            "warming": 100.0 * sum(s.count for s in mine if warming(s)) / (sum(s.count for s in mine) or 1),
            "leaves": [(k, pl.get(k, 0), tl.get(k, 0)) for k in keys if max(pl.get(k, 0), tl.get(k, 0)) >= 2]}

