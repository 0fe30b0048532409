"""Ruby (doc/design/ruby.md): where each thread's execution context lives,
found in Debian's own libruby with its symbol (bookworm's 3.1) and without
(sid's stripped 3.3, which hides ruby_current_ec), and checked in live
processes against what Ruby itself says of its threads."""

import os
import re
import shutil
import subprocess

import pytest

from conftest import IN_CI, ROOTS, WORKLOADS, ROOT_WORKLOADS

TOOLS = os.environ.get("TAIPAN_TOOLS", os.path.join(os.path.dirname(__file__), "..", "..", "build", "tools"))

# (id, root or None, the ruby executable, its libruby inside the root)
RUBIES = [
    ("debian-3.1", None, "/usr/bin/ruby3.1", "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1"),
    ("sid-3.3", os.path.join(ROOTS, "sid"), "/usr/bin/ruby3.3", "/usr/lib/x86_64-linux-gnu/libruby-3.3.so.3.3"),
]


def ruby(ident):
    """(root or "", ruby, libruby) of RUBIES row ident; in CI a missing one
    fails (make deps installs ruby3.1, make roots puts ruby3.3 in sid)."""
    for rid, root, exe, lib in RUBIES:
        if rid == ident:
            root = root or ""
            if not os.path.exists(root + exe):
                msg = "ruby %s not installed at %s%s (make deps; make roots)" % (ident, root, exe)
                if IN_CI:
                    pytest.fail(msg)
                pytest.skip(msg)
            return root, exe, lib
    raise KeyError(ident)


def rbec(*args):
    tool = os.path.join(TOOLS, "taipan-rbec")
    if not os.path.exists(tool):
        pytest.fail("%s not built (make build/tools/taipan-rbec)" % tool)
    return subprocess.run([tool] + [str(a) for a in args], capture_output=True, text=True, timeout=60)


def fields(out):
    return dict(line.split("=", 1) for line in out.splitlines())


@pytest.mark.parametrize("ident", [r[0] for r in RUBIES])
def test_execution_context_found_in_the_library(ident):
    """The exported readers of GET_EC() (rb_errinfo, rb_thread_current,
    rb_set_errinfo, ...) all reach one thread-local variable, in the bounds
    of the library's TLS block; where ruby_current_ec is exported (3.1) it is
    that one; where it is hidden (sid's 3.3) the readers alone find it."""
    root, _, lib = ruby(ident)
    res = rbec(root + lib)
    assert res.returncode == 0, res.stderr
    f = fields(res.stdout)
    assert f["model"] == "gd"
    assert int(f["agreed"]) >= 3, f
    assert int(f["dtpoff"]) + 8 <= int(f["tls_size"]), f
    # 3.1 exports the symbol, 3.3 does not: the answer does not need it.
    assert f["by_symbol"] == ("1" if ident == "debian-3.1" else "0"), f
    # ec->thread_ptr, thread->self, as rb_thread_current's code reads them.
    assert (f["ec_thread"], f["thread_self"]) == ("48", "16"), f


def test_not_a_ruby_library_is_said():
    """A library without Ruby's readers is refused in words, not guessed at."""
    res = rbec("/usr/lib/x86_64-linux-gnu/libc.so.6")
    assert res.returncode == 1 and "taipan-rbec: " in res.stderr, res.stderr
    assert "execution context" in res.stderr or "thread-local" in res.stderr, res.stderr


def fs_bases(pid):
    """Each thread's thread pointer (fs base), as gdb reads it from the
    stopped process: {tid: fs base}."""
    gdb = shutil.which("gdb")
    if not gdb:
        pytest.fail("gdb is not installed (make deps)")
    res = subprocess.run([gdb, "-nx", "-batch", "-p", str(pid), "-iex", "set auto-load off",
                          "-iex", "set debuginfod enabled off", "-ex", "thread apply all p/x $fs_base"],
                         capture_output=True, text=True, timeout=120)
    out, tid = {}, None
    for line in res.stdout.splitlines():
        m = re.match(r"Thread \d+ \(.*LWP (\d+)", line)
        if m:
            tid = int(m.group(1))
        m = re.match(r"\$\d+ = (0x[0-9a-f]+)", line)
        if m and tid:
            out[tid] = m.group(1)
            tid = None
    assert out, res.stdout + res.stderr
    return out


class RubyWorkload:
    """A Ruby process running tests/workloads/NAME (in its root, if any),
    its output up to 'ready' in lines."""

    def __init__(self, ident, name):
        root, exe, _ = ruby(ident)
        script = os.path.join(WORKLOADS, name)
        if root:
            os.makedirs(root + ROOT_WORKLOADS, exist_ok=True)
            shutil.copy(script, root + ROOT_WORKLOADS)
            self.path = os.path.join(ROOT_WORKLOADS, name)
            argv = ["chroot", root, exe, self.path]
        else:
            self.path = script
            argv = [exe, script]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        self.lines = []
        for line in self.proc.stdout:
            if line.strip() == "ready":
                return
            self.lines.append(line.rstrip("\n"))
        raise AssertionError("%s exited before it was ready: %s" % (name, self.lines))

    def stop(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def ruby_workload():
    started = []

    def start(ident, name):
        w = RubyWorkload(ident, name)
        started.append(w)
        return w
    yield start
    for w in started:
        w.stop()


@pytest.mark.parametrize("ident", [r[0] for r in RUBIES])
def test_each_thread_execution_context_in_a_live_process(ident, ruby_workload):
    """In a live Ruby with three Ruby threads, each thread's EC read through
    its own thread pointer (the module's id from the GOT, the thread's
    dynamic thread vector, the variable's offset) leads, through
    ec->thread_ptr->self, to that thread's Thread object, whose address Ruby
    printed; the VM's other native threads (the timer thread) have none."""
    w = ruby_workload(ident, "rb_threads.rb")
    threads = [int(m.group(1), 16) for m in (re.match(r"thread #<Thread:(0x[0-9a-f]+)", l) for l in w.lines) if m]
    assert len(threads) == 3, w.lines
    bases = fs_bases(w.pid)
    res = rbec("--pid", w.pid, *bases.values())
    found, none = [], 0
    for line in res.stdout.splitlines():
        m = re.match(r"\S+ ec=(0x[0-9a-f]+)(?: thread=\S+ self=(0x[0-9a-f]+))?", line)
        assert m, res.stdout + res.stderr
        if int(m.group(1), 16) == 0:
            none += 1
        else:
            found.append(int(m.group(2), 16))
    assert sorted(found) == sorted(threads), (res.stdout, [hex(t) for t in threads])
    assert len(found) + none == len(bases), res.stdout


@pytest.mark.parametrize("ident", [r[0] for r in RUBIES])
def test_frames_equal_caller_locations(ident, ruby_workload):
    """Threads asleep in known chains (methods, a yield, blocks, a module's
    singleton method, 30 recursive calls): each one's frames, read from its
    EC with the layout generated for its version, are the Ruby frames that
    its own caller_locations(0) gave on the line where it sleeps: the same
    labels, paths and lines, in order. Kernel#sleep, a C function, is
    the one frame above them; the main thread is in <main> at its sleep."""
    w = ruby_workload(ident, "rb_frames.rb")
    want, tag = {}, None
    for line in w.lines:
        if line.startswith("stack "):
            tag = line.split()[1]
            want[tag] = []
        elif line.startswith("at "):
            label, path, lineno = line[3:].split("\t")
            want[tag].append((label, path, int(lineno)))
    assert set(want) == {"a", "b"} and len(want["b"]) > 30, want
    bases = fs_bases(w.pid)
    res = rbec("--frames", "--pid", w.pid, *bases.values())
    assert res.returncode == 0, res.stdout + res.stderr
    got = {}
    for line in res.stdout.splitlines():
        fs, rest = line.split(" ", 1)
        stack = got.setdefault(fs, [])
        if rest.startswith("frame "):
            label, path, lineno = rest[6:].split("\t")
            stack.append((label, path, int(lineno)))
        elif rest == "cfunc":
            stack.append("cfunc")
        else:
            assert rest == "ec=0x0", line
    stacks = [s for s in got.values() if s]
    for t in ("a", "b"):
        assert ["cfunc"] + want[t] in stacks, (t, want[t], stacks)
    with open(os.path.join(WORKLOADS, "rb_frames.rb")) as f:
        last = len(f.read().splitlines())
    assert ["cfunc", ("<main>", w.path, last)] in stacks, stacks
    assert len(stacks) == 3, stacks
