"""Ruby (doc/design/ruby.md): where each thread's execution context lives,
found in Debian's own libruby with its symbol (bookworm's 3.1) and without
(sid's stripped 3.3, which hides ruby_current_ec), in a stripped ruby 3.3
linked statically with YJIT (built by make roots from Debian's source), whose
executable holds it below the thread pointer, and in a stripped 3.3 built
against musl with libruby shared (make roots), reached through musl's DTV;
checked in live processes against what Ruby itself says of its threads."""

import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import (IN_CI, ROOTS, WORKLOADS, ROOT_WORKLOADS, Recording, go_pprof, marked_lines,
                      parse_folded, record, record_folded, thread_cpu_ns, total)
from otlp_fixtures import FRAME_TYPES, protos, read_otlp, read_pprof  # noqa: F401 (protos: a fixture)

TOOLS = os.environ.get("TAIPAN_TOOLS", os.path.join(os.path.dirname(__file__), "..", "..", "build", "tools"))

# (id, root or None, the ruby executable, its libruby inside the root: the
# executable itself for a ruby linked statically)
STATIC_RUBY = os.path.join(ROOTS, "ruby-3.3-static", "ruby-stripped")
MUSL_RUBY = os.path.join(ROOTS, "ruby-3.3-musl", "ruby-stripped")
MUSL_LIB = os.path.join(ROOTS, "ruby-3.3-musl", "stripped", "libruby.so.3.3")
RUBIES = [
    ("debian-3.1", None, "/usr/bin/ruby3.1", "/usr/lib/x86_64-linux-gnu/libruby-3.1.so.3.1"),
    ("sid-3.3", os.path.join(ROOTS, "sid"), "/usr/bin/ruby3.3", "/usr/lib/x86_64-linux-gnu/libruby-3.3.so.3.3"),
    # Debian's ruby3.3 source, --disable-shared --enable-yjit, stripped
    # (scripts/make-roots.sh: build_ruby_static), run from its build tree.
    ("built-3.3-static", None, STATIC_RUBY, STATIC_RUBY),
    # The same source against musl with libruby shared, as Alpine builds
    # it, stripped (build_ruby_musl), run from its build tree: its EC is
    # reached through musl's DTV.
    ("built-3.3-musl", None, MUSL_RUBY, MUSL_LIB),
]
# musl's libc.so has no CFI (musl is built without unwind tables) and its
# functions keep no frame pointer: a native stack that reaches into it
# (a sleep's system call, the GC's malloc) ends there under this marker.
MUSL_CUT = "[native: no CFI, no frame pointer in libc.so]"
# Options a row's ruby always gets: the built ones have no gems, nor
# extensions, installed; the workloads need none.
RUBY_FLAGS = {"built-3.3-static": ["--disable-gems"], "built-3.3-musl": ["--disable-gems"]}


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
    that one; where it is hidden (sid's 3.3) the readers alone find it. In
    the static 3.3 they read it below the thread pointer (local exec)."""
    root, _, lib = ruby(ident)
    res = rbec(root + lib)
    assert res.returncode == 0, res.stderr
    f = fields(res.stdout)
    if lib == STATIC_RUBY:
        # Local exec: the variable is dtpoff below the thread pointer, in
        # the executable's block (rounded up to its alignment).
        assert (f["model"], f["got"]) == ("le", "0x0"), f
        assert 8 <= int(f["dtpoff"]) <= int(f["tls_size"]) + 64, f
    else:
        assert f["model"] == "gd"
        assert int(f["dtpoff"]) + 8 <= int(f["tls_size"]), f
    assert int(f["agreed"]) >= 3, f
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


@pytest.fixture
def ruby_workload(talker):
    """ruby_workload(ident, name, *args, flags=()): a Ruby process running
    tests/workloads/NAME (in its root, if any) with ruby's options flags,
    ready: a Talker, with the script's path as the process sees it."""

    def start(ident, name, *args, flags=()):
        root, exe, _ = ruby(ident)
        script = os.path.join(WORKLOADS, name)
        if root:
            os.makedirs(root + ROOT_WORKLOADS, exist_ok=True)
            shutil.copy(script, root + ROOT_WORKLOADS)
            path = os.path.join(ROOT_WORKLOADS, name)
            argv = ["chroot", root, exe] + RUBY_FLAGS.get(ident, []) + list(flags) + [path]
        else:
            path = script
            argv = [exe] + RUBY_FLAGS.get(ident, []) + list(flags) + [script]
        w = talker(argv + list(args), name)
        w.path = path
        return w
    return start


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


# What Ruby 3.4 calls the frames of rb_record.rb that 3.1 and 3.3 call by
# their method's name alone: taipan names them as 3.4 does, Class#method,
# Class.method for a singleton's, and the blocks after their method.
QUALIFIED = {"loop": "Kernel#loop", "sorter": "Work#sorter", "sort_by": "Enumerable#sort_by",
             "each": "Array#each", "block in sorter": "block in Work#sorter", "area": "Shapes.area",
             "hot": "Work.hot", "sleep": "Kernel#sleep"}


def reported_stacks(lines):
    """{thread name: [(label, path, line), ...]} from a workload's "stack
    NAME" and "at LABEL<tab>PATH<tab>LINE" lines (its caller_locations)."""
    want, tag = {}, None
    for line in lines:
        if line.startswith("stack "):
            tag = line.split(" ", 1)[1]
            want[tag] = []
        elif line.startswith("at ") and tag:
            label, path, lineno = line[3:].split("\t")
            want[tag].append((label, path, int(lineno)))
    return want


# rb_frames.rb's labels as taipan writes them (Ruby 3.4's).
FRAMES_QUALIFIED = {"wait": "Greeter.wait", "run": "Outer#run", "block in run": "block in Outer#run",
                    "inner": "Outer#inner", "deeper": "Object#deeper"}


@pytest.mark.parametrize("ident", [r[0] for r in RUBIES])
def test_dump_lists_every_thread_with_its_frames(taipan, ident, ruby_workload):
    """dump reads the VM's list of threads (found by symbol in 3.1, through
    ruby_vm_at_exit's code in sid's stripped 3.3) and gives each Ruby
    thread, named and with its OS thread id, the frames its own
    caller_locations(0) gave, qualified as 3.4 writes them, under the native
    frames of Kernel#sleep; the GVL released by each; in JSON and as text,
    and with --native none nothing but the Ruby frames."""
    w = ruby_workload(ident, "rb_frames.rb")
    want = reported_stacks(w.lines)
    assert set(want) == {"a", "b"}, want
    res = subprocess.run([taipan, "dump", "-p", str(w.pid), "--json", "-v"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    how = "VM by symbol" if ident == "debian-3.1" else "VM by ruby_vm_at_exit's code"
    assert how in res.stderr, res.stderr
    d = json.loads(res.stdout)
    assert (d["runtime"], d["thread_list_error"]) == ("ruby", None), d
    assert d["runtime_version"].startswith("3.1." if ident == "debian-3.1" else "3.3."), d
    assert "python_version" not in d
    tasks = {int(t) for t in os.listdir("/proc/%d/task" % w.pid)}
    threads = d["threads"]
    # The main thread and the two chains (the printing thread has ended);
    # the VM's timer thread runs no Ruby and is no Ruby thread.
    assert len(threads) == 3 and {t["tid"] for t in threads} < tasks, (threads, tasks)
    by_name = {t["name"]: t for t in threads}
    assert {"chain-a", "chain-b"} < set(by_name), by_name.keys()
    # On musl, Kernel#sleep's system call is in libc.so, whose frames end
    # the native stack (MUSL_CUT): the C code of libruby below is not seen.
    musl = ident == "built-3.3-musl"
    for t in threads:
        native_error = "no_frame_pointer" if musl else None
        assert (t["gvl"], t["error"], t["native_error"], t["ractor"]) == ("released", None, native_error, 0), t
    for tag in ("a", "b"):
        t = by_name["chain-" + tag]
        frames = t["frames"]
        ruby_frames = [(f["name"], f["file"], f["line"]) for f in frames if f["kind"] == "ruby"]
        expect = [("Kernel#sleep", None, None)] + [(FRAMES_QUALIFIED.get(l, l), p, n) for l, p, n in want[tag]]
        assert ruby_frames == expect, (tag, ruby_frames, expect)
        # Kernel#sleep's C code is above it, as native frames.
        assert frames[0]["kind"] == "native" and frames[0]["module"], frames[:3]
        first = next(i for i, f in enumerate(frames) if f["kind"] == "ruby")
        if musl:
            assert frames[first - 1]["name"] == MUSL_CUT, frames[:first + 1]
            first -= 1
        assert first > 0 and all(f["kind"] == "native" for f in frames[:first]), frames[:first + 1]
    main = next(t for t in threads if t["tid"] == w.pid)
    assert main["name"] == main["os_name"] and main["frames"][-1]["name"] == "<main>", main
    # Text, and Ruby frames alone with nothing stopped.
    res = subprocess.run([taipan, "dump", "-p", str(w.pid), "--native", "none"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    t = by_name["chain-a"]
    block = res.stdout.split('Thread %d "chain-a" (most recent call first):\n' % t["tid"], 1)[1].split("\n\n")[0]
    lines = block.splitlines()
    assert lines[0] == "  in Kernel#sleep", block
    assert lines[1:] == ['  File "%s", line %d, in %s' % (p, n, FRAMES_QUALIFIED.get(l, l))
                         for l, p, n in want["a"]], block
    assert res.stdout.startswith("Process %d (" % w.pid) and ": Ruby 3." in res.stdout.splitlines()[0], res.stdout


@pytest.mark.parametrize("ident,yjit", [(r[0], False) for r in RUBIES] + [("debian-3.1", True),
                                                                           ("built-3.3-static", True)])
def test_record_ruby_frames_merged_with_native(taipan, ident, yjit, ruby_workload, tmp_path):
    """`record -p` of a Ruby process: BPF walks every thread's control
    frames on each sample, and the profile holds each worker's stack as Ruby
    itself reports it (caller_locations from inside the hot method): the
    same frames in order, named as Ruby 3.4 names them (Work#sorter,
    Shapes.area, block in Work#sorter; C functions Enumerable#sort_by,
    Array#each), with file and exact line for each Ruby frame, the hot
    method's line one of its loop's. Native frames go where the VM ran
    Ruby: rb_yield, which sort_by's C code calls, lies between `each` and
    the block it runs, and `[native and Ruby stacks disagree]` is rare.
    Threads carry their Thread#name, and each worker's share of the samples
    is its share of the CPU time the kernel gave them, within 3 points.
    With YJIT (bookworm's 3.1 has it, the static 3.3 its Rust one: ruby
    --yjit), the Ruby frames are as
    whole, and the native stack, which cannot be unwound through the JIT's
    code, is cut there under a [YJIT] marker: never a disagreement. 3.3's
    YJIT writes a frame's pc only where its code calls out of the JIT, and
    the hot loop's compiled code never does: the hot method's line is then
    the last call out's (Thread.current[:report]), which is what the frame
    holds, not one of the loop's."""
    w = ruby_workload(ident, "rb_record.rb", flags=["--yjit"] if yjit else [])
    want = reported_stacks(w.lines)
    assert set(want) == {"worker-0", "worker-1"}, w.lines
    lines = marked_lines(os.path.join(WORKLOADS, "rb_record.rb"))
    loop = {lines["hot-a"], lines["hot-b"], lines["hot-c"], lines["hot-d"]}
    if yjit and ident != "debian-3.1":
        loop.add(lines["hot-callout"])
    # The threads' CPU times are read while taipan samples, from its first
    # sample to (nearly) its last: the GVL passes from worker to worker in
    # slices of 100 ms, and a read around the whole command also held the
    # time taipan took to start and stop, a slice or more that no sample
    # covers.
    out = tmp_path / "out.folded"
    with Recording(taipan, ["-r", 1000, "-o", out, "--folded-lines", "--folded-threads", "--no-kernel",
                            "-p", w.pid]) as rec:
        before = thread_cpu_ns(w.pid)
        after, deadline = before, time.time() + 60
        while sum(after.values()) - sum(before.values()) < 2_000_000_000:  # 2 s of CPU
            assert time.time() < deadline, "the workers did not run"
            time.sleep(0.05)
            after = thread_cpu_ns(w.pid)
    stacks = [s for s in parse_folded(out) if s.pid == w.pid]
    n = total(stacks)
    assert n >= 200, "too few samples: %d\n%s" % (n, rec.stderr())
    disagree = sum(s.count for s in stacks if any(f.text == "[native and Ruby stacks disagree]"
                                                   for f in s.frames))
    assert disagree <= 0.02 * n, (disagree, n)
    workers = [s for s in stacks if s.thread.startswith("worker-")]
    by_thread, exact, hot, callout = {}, 0, 0, 0
    for s in workers:
        by_thread.setdefault(s.tid, [s.thread, 0])[1] += s.count
        rb = [f for f in s.frames if not f.native and not f.marker and not f.kernel]
        if not rb or rb[-1].name != "Work.hot":
            continue
        hot += s.count
        expect = list(reversed(want[s.thread]))  # root first, as folded stacks are
        if len(rb) != len(expect):
            continue
        ok = rb[-1].line in loop and rb[-1].file == expect[-1][1]
        callout += s.count if rb[-1].line == lines["hot-callout"] else 0
        for f, (label, path, line) in zip(rb[:-1], expect[:-1]):
            # A C function has no file of its own (Ruby shows its caller's).
            ok = ok and f.name == QUALIFIED.get(label, label) and \
                (f.file is None or (f.file, f.line) == (path, line))
        names = [f.name for f in s.frames]
        each = names.index("Array#each") if "Array#each" in names else -1
        block = names.index("block in Work#sorter") if "block in Work#sorter" in names else -1
        if yjit:
            ok = ok and "[YJIT]" in names
        else:
            ok = ok and 0 <= each < block and "rb_yield" in names[each:block]
        exact += s.count if ok else 0
    assert hot >= 0.5 * n, (hot, n)
    assert exact >= 0.97 * hot, (exact, hot, [[f.text for f in s.frames] for s in workers[:5]])
    used = {tid: after.get(tid, 0) - before.get(tid, 0) for tid in by_thread}
    assert sorted(name for name, _ in by_thread.values()) == ["worker-0", "worker-1"], by_thread
    shares = {}
    for tid, (name, count) in by_thread.items():
        share, truth = count / n, used[tid] / sum(after[t] - before.get(t, 0) for t in after)
        shares[name] = (round(100 * share, 1), round(100 * truth, 1))
    print("ruby %s%s: exact %d of %d samples in hot (%d at its last call out); share of samples, "
          "of CPU time (%%): %s" % (ident, " --yjit" if yjit else "", exact, hot, callout, shares))
    for name, (share, truth) in shares.items():
        assert abs(share - truth) <= 3, shares


def gvl_shares(path, thread):
    """{held|waiting|released: seconds} of thread's wall time in pprof path."""
    tags = go_pprof("-tags", "-sample_index=wall", "-tagfocus=thread_name=^%s$" % thread, path)
    sec = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
    out = {}
    section = tags.split(" gvl: ", 1)[1].split("\n\n", 1)[0] if " gvl: " in tags else ""
    for m in re.finditer(r"([\d.]+)(s|ms|us|ns) \(\s*[\d.]+%\): (held|waiting|released)", section):
        out[m.group(3)] = float(m.group(1)) * sec[m.group(2)]
    return out


@pytest.mark.parametrize("ident", [r[0] for r in RUBIES])
def test_gc_marker_weighs_the_gc_time(taipan, ident, ruby_workload, tmp_path):
    """While the GC runs, the samples of the thread that runs it (the one
    that holds the GVL) carry a [GC] frame innermost among its Ruby
    frames, with the GC's native frames above it: the share of the churn
    thread's samples that carry it is the GC's share of its CPU time
    (GC.total_time against the thread's CPU clock, both read by Ruby),
    within 5 points, and no sample of the thread that waits on its input
    carries it but where that thread allocates (it may run the GC there).
    The flag comes from rb_during_gc's code in both
    libraries, stripped 3.3's too."""
    w = ruby_workload(ident, "rb_gc.rb")

    def read():
        m = re.match(r"gc (\d+) cpu (\d+)$", w.ask())
        assert m, "rb_gc.rb did not answer"
        return int(m.group(1)), int(m.group(2))
    # The truth is read while taipan samples, from its first sample to
    # (nearly) its last: the GC runs in bursts, and a truth read around the
    # whole command also held the time taipan took to start and stop, which
    # no sample covers and which a loaded host stretches.
    out = tmp_path / "out.folded"
    with Recording(taipan, ["-r", 1000, "-o", out, "--folded-lines", "--folded-threads",
                            "-p", w.pid]) as rec:
        gc0, cpu0 = read()
        gc1, cpu1 = gc0, cpu0
        deadline = time.time() + 60
        while cpu1 - cpu0 < 1_500_000_000:  # 1.5 s of the churn thread's CPU
            assert time.time() < deadline, "churn did not run"
            time.sleep(0.1)
            gc1, cpu1 = read()
    stacks = parse_folded(out)
    assert "GC flag found" in rec.stderr(), rec.stderr()
    truth = (gc1 - gc0) / (cpu1 - cpu0)
    churn = [s for s in stacks if s.pid == w.pid and s.thread == "churn"]
    n = total(churn)
    assert n >= 200, "too few samples: %d\n%s" % (n, rec.stderr())
    marked = [s for s in churn if any(f.text == "[GC]" for f in s.frames)]
    share = total(marked) / n
    print("ruby %s: [GC] in %.1f%% of %d samples of churn, GC.total_time %.1f%% of its CPU"
          % (ident, 100 * share, n, 100 * truth))
    assert truth > 0.05, truth  # the workload keeps the GC busy
    assert abs(share - truth) <= 0.05, (round(share, 3), round(truth, 3))
    cut = 0
    for s in marked:
        at = [f.text for f in s.frames].index("[GC]")
        rb_before = [f for f in s.frames[:at] if not (f.native or f.marker or f.kernel)]
        after = s.frames[at + 1:]
        # Under the churn thread's Ruby frames, down to the one that
        # allocated; the GC's own native code (and the kernel's) above it.
        # On musl, where the GC was in libc.so (malloc, memset,
        # clock_gettime), its native stack is cut there: a marker of the
        # native walk's (MUSL_CUT, or a wrong step out of libc's code,
        # which has no CFI), then what was unwound of libc's frames.
        assert rb_before and rb_before[0].name == "block in <main>", [f.text for f in s.frames]
        if ident == "built-3.3-musl" and after and after[0].marker and after[0].text.startswith("[native: "):
            cut += s.count
            after = after[1:]
        assert all(f.native or f.kernel for f in after), [f.text for f in s.frames]
    if cut:
        print("ruby %s: %d of the %d [GC] samples cut in musl's libc.so" % (ident, cut, total(marked)))
    # The main thread runs only to answer (it reads a line, pops the
    # churn thread's answer, writes its own), and may run the GC itself
    # wherever that allocates; the marker is nowhere else.
    lines = marked_lines(os.path.join(WORKLOADS, "rb_gc.rb"))
    allocates = {lines["read"], lines["pop"], lines["answer"]}
    others = [s for s in stacks if s.pid == w.pid and s.thread != "churn"]
    for s in others:
        if any(f.text == "[GC]" for f in s.frames):
            rb = [f for f in s.frames if not (f.native or f.marker or f.kernel)]
            assert rb and rb[0].name == "<main>" and rb[0].line in allocates, [f.text for f in s.frames]


@pytest.mark.parametrize("ident", [r[0] for r in RUBIES])
def test_record_ruby_wall_gvl_and_labels(taipan, ident, ruby_workload, tmp_path):
    """Wall mode: the sleeping thread weighs its time under `sleep`, in its
    block, with the GVL released; the two workers, which share the GVL,
    each hold it and wait for it, and between them hold it about half of
    their time (one holds it at a time); pprof samples carry runtime=ruby
    and the version, and functions their first line."""
    w = ruby_workload(ident, "rb_record.rb")
    out = tmp_path / "out.pb.gz"
    record(taipan, out, w.pid, seconds=2, rate=200, extra=["--no-kernel", "--mode", "wall"])
    folded = tmp_path / "out.folded"
    record(taipan, folded, w.pid, seconds=1, rate=100,
           extra=["--no-kernel", "--mode", "wall", "--folded-lines", "--folded-threads"])
    lines = marked_lines(os.path.join(WORKLOADS, "rb_record.rb"))
    sleeper = [s for s in parse_folded(folded) if s.pid == w.pid and s.thread == "sleeper"]
    under = sum(s.count for s in sleeper if any(f.name == "Kernel#sleep" for f in s.frames)
                and any(f.line == lines["sleeper"] for f in s.frames))
    # Folded wall values are microseconds: most of the 1 s.
    assert under >= 0.7e6, (under, [[f.text for f in s.frames] for s in sleeper])
    slept = gvl_shares(out, "sleeper")
    assert slept.get("released", 0) >= 1.5 and not slept.get("held"), slept
    workers = [gvl_shares(out, "worker-%d" % i) for i in (0, 1)]
    for g in workers:
        assert g.get("held", 0) >= 0.3 and g.get("waiting", 0) >= 0.3, workers
    print("gvl seconds: sleeper %s, workers %s" % (slept, workers))
    held = sum(g.get("held", 0) for g in workers)
    both = sum(sum(g.values()) for g in workers)
    assert 0.35 <= held / both <= 0.65, workers
    # Each function's first line: where its method is defined.
    raw = go_pprof("-raw", out)
    assert re.search(r" Work\.hot \S*rb_record\.rb:\d+ s=%d\(" % lines["def-hot"], raw), raw[-3000:]
    tags = go_pprof("-tags", out)
    version = "3.1" if ident == "debian-3.1" else "3.3"
    assert re.search(r"runtime: Total.*\n.*: ruby\b", tags), tags
    assert re.search(r"runtime_version: Total[^\n]*\n[^\n]*: %s\.\d+" % re.escape(version), tags), tags


@pytest.mark.parametrize("build", ["bpf_loop", "unrolled"])
@pytest.mark.parametrize("ident", [r[0] for r in RUBIES])
def test_deep_recursion_is_marked_truncated(taipan, ident, build, ruby_workload, tmp_path):
    """5,000 Ruby calls deep: more frames than a sample holds (2,048). Every
    sample keeps the innermost 2,048, spin at the leaf in its loop, and says
    [truncated] at its root; nothing is invented or repeated. The same with
    the unrolled programs of kernels without bpf_loop (TAIPAN_BPF_LOOP=0),
    which the verifier checks frame by frame."""
    w = ruby_workload(ident, "rb_depth.rb", 5000)
    lines = marked_lines(os.path.join(WORKLOADS, "rb_depth.rb"))
    env = dict(os.environ, TAIPAN_BPF_LOOP="0") if build == "unrolled" else None
    stacks, res = record_folded(taipan, tmp_path, w.pid, seconds=2, rate=200,
                                extra=["--no-kernel", "--native", "none"], env=env)
    mine = [s for s in stacks if s.pid == w.pid]
    n = total(mine)
    assert n >= 100, "too few samples: %d\n%s" % (n, res.stderr)
    for s in mine:
        rb = [f for f in s.frames if not f.marker]
        assert s.frames[0].text == "[truncated]", [f.text for f in s.frames[:3]]
        assert len(rb) == 2048, len(rb)
        assert rb[-1].name == "Object#spin" and rb[-1].line in (lines["spin"], lines["spin-loop"]), rb[-1]
        assert all(f.name == "Object#rec" and f.line == lines["rec"] for f in rb[:-1]), \
            set(f.text for f in rb[:-1])


def test_record_all_ruby_and_python_in_and_out_of_a_root(taipan, ruby_workload, tmp_path):
    """record -a: Debian's Python, bookworm's Ruby and sid's Ruby in its
    root, at once, each profiled with its own runtime's frames and
    labels."""
    rb31 = ruby_workload("debian-3.1", "rb_record.rb")
    rb33 = ruby_workload("sid-3.3", "rb_record.rb")
    script = tmp_path / "pyhot.py"
    script.write_text("import sys\ndef pyhot():\n    while True:\n        pass\n"
                      "print('ready', flush=True)\npyhot()\n")
    py = subprocess.Popen(["/usr/bin/python3.11", str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert py.stdout.readline().strip() == "ready"
        stacks, res = record_folded(taipan, tmp_path, None, seconds=3, rate=100,
                                    extra=["--no-kernel", "--comm", "ruby3.1", "--comm", "ruby3.3",
                                           "--comm", "python3.11"])
    finally:
        py.kill()
        py.wait()
    names = {}
    for s in stacks:
        names.setdefault(s.pid, set()).update(f.name for f in s.frames if not f.native and not f.marker)
    assert "pyhot" in names.get(py.pid, set()), (names.get(py.pid), res.stderr)
    for w in (rb31, rb33):
        assert {"Work.hot", "Work#sorter", "Enumerable#sort_by"} <= names.get(w.pid, set()), \
            (w.pid, names.get(w.pid), res.stderr)


def test_c_extension_calling_back_into_ruby(taipan, ruby_workload, tmp_path):
    """A C extension the test builds (tests/workloads/rb_cext.c) calls a
    Ruby block from C: the stack interleaves exactly, root first: outer,
    the C function's Ruby frame (CExt.call_back), its native frame
    (rbcext_call_back), rb_yield, the block, inner, hot at a line of its
    loop, in nearly every sample in hot."""
    inc = "/usr/include/ruby-3.1.0"
    if not os.path.exists(os.path.join(inc, "ruby.h")):
        msg = "ruby3.1-dev not installed (make deps)"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    ext = tmp_path / "rb_cext.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-fno-optimize-sibling-calls", "-I", inc,
                    "-I", "/usr/include/x86_64-linux-gnu/ruby-3.1.0", os.path.join(WORKLOADS, "rb_cext.c"),
                    "-o", str(ext), "-lruby-3.1"], check=True)
    w = ruby_workload("debian-3.1", "rb_cext.rb", ext)
    lines = marked_lines(os.path.join(WORKLOADS, "rb_cext.rb"))
    loop = {lines["hot-a"], lines["hot-b"], lines["hot-c"], lines["hot-d"]}
    stacks, res = record_folded(taipan, tmp_path, w.pid, seconds=2, rate=200, extra=["--no-kernel"])
    mine = [s for s in stacks if s.pid == w.pid]
    want = [("Object#outer", lines["outer"]), ("CExt.call_back", None), ("rbcext_call_back", "n"),
            ("rb_yield", "n"), ("block in Object#outer", lines["outer"]), ("Object#inner", lines["inner"]),
            ("Object#hot", loop)]
    hot = exact = 0
    for s in mine:
        rb = [f for f in s.frames if not f.native and not f.marker]
        if not rb or rb[-1].name != "Object#hot":
            continue
        hot += s.count
        names = [f.name for f in s.frames]
        if "Object#outer" not in names:
            continue
        tail = [f for f in s.frames[names.index("Object#outer"):]
                if not f.native or f.name in ("rbcext_call_back", "rb_yield")]
        ok = len(tail) == len(want)
        for f, (name, line) in zip(tail, want):
            ok = ok and f.name == name
            if line == "n":
                ok = ok and f.native
            elif isinstance(line, set):
                ok = ok and f.line in line
            elif line is not None:
                ok = ok and f.line == line
        exact += s.count if ok else 0
    assert hot >= 100, (hot, res.stderr)
    assert exact >= 0.95 * hot, (exact, hot, [[f.text for f in s.frames] for s in mine[:4]])


def test_record_ruby_as_otlp(taipan, protos, ruby_workload, tmp_path):
    """Ruby's frames in OTLP are of type ruby, as the OpenTelemetry eBPF
    profiler's are, and the OTLP equals the pprof of the same recording."""
    w = ruby_workload("debian-3.1", "rb_record.rb")
    otlp, pprof = tmp_path / "out.otlp", tmp_path / "out.pb.gz"
    record(taipan, otlp, w.pid, seconds=2, extra=["-o", pprof])
    want, want_types, want_bids, kinds = read_pprof(protos, pprof)
    got, types, bids, ftypes, resources = read_otlp(protos, otlp)
    assert got == want and types == want_types and bids == want_bids
    for frame, file in kinds.items():
        assert ftypes[frame] == FRAME_TYPES.get(file, "native"), (frame, file)
    assert any(f[0][0] == "Work#sorter" and ftypes[f] == "ruby" for k in got for f in k[6]), ftypes
    assert resources[w.pid]["process.runtime.name"] == "ruby"
