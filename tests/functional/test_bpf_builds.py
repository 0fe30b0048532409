"""The two builds of taipan's looping BPF programs walk the same stacks,
and what the walkers save on reads loses no name.

Where the kernel has bpf_loop (5.17+), the thread-state search, the frame
walkers and the native unwinder run their loop bodies as bpf_loop callbacks,
which the verifier checks once; elsewhere the same bodies run in unrolled
loops. TAIPAN_BPF_LOOP=0 loads the unrolled build on this kernel, so both are
tested here against the same workloads."""

import collections
import os
import platform

import pytest

from conftest import assert_deep_recursion, interpreter, marked_lines, matrix_sample, record_folded, total

BUILDS = {"bpf_loop": {}, "unrolled": {"TAIPAN_BPF_LOOP": "0"}}
# Both walkers (frame objects up to 3.10, interpreter frames from 3.11),
# and a version whose frames the 3.12 CALL path can leave half made.
IDENTS = ["pyenv-2.7", "pyenv-3.10", "pyenv-3.12"]


def kernel_has_bpf_loop():
    major, minor = (int(x) for x in platform.release().split(".")[:2])
    return (major, minor) >= (5, 17)


def env_for(build):
    return dict(os.environ, **BUILDS[build])


@pytest.mark.parametrize("build", BUILDS)
def test_the_build_loaded_is_said(taipan, workload, tmp_path, build):
    w = workload(interpreter("pyenv-3.12"), "chain.py", 30)
    _, res = record_folded(taipan, tmp_path, w.pid, seconds=1, extra=["--no-kernel"],
                           env=dict(env_for(build), TAIPAN_DEBUG="1"))
    want = "bpf_loop" if build == "bpf_loop" and kernel_has_bpf_loop() else "unrolled (no bpf_loop)"
    assert "taipan: debug: BPF loops: %s\n" % want in res.stderr, res.stderr


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("ident", IDENTS)
def test_1000_deep_every_frame_native_included(taipan, workload, tmp_path, ident, build):
    """Tail calls of the Python walker (16 runs of 64 frames), then of the
    native unwinder, which is cut at its limit and says so."""
    w = workload(interpreter(ident), "deep.py", 30, 1000)
    stacks, _ = record_folded(taipan, tmp_path, w.pid, rate=200, extra=["--no-kernel"], env=env_for(build))
    assert_deep_recursion([s for s in stacks if s.pid == w.pid], 1000)


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("ident", IDENTS)
def test_every_thread_found_by_the_search(taipan, workload, tmp_path, ident, build):
    """Each thread's first sample searches the interpreter's thread list
    (tpw_search_step) before the thread is cached."""
    w = workload(interpreter(ident), "threads.py", 30)
    stacks, _ = record_folded(taipan, tmp_path, w.pid, seconds=2, rate=500, extra=["--no-kernel"],
                              env=env_for(build))
    stacks = [s for s in stacks if s.pid == w.pid]
    n = total(stacks)
    assert n >= 200, "too few samples: %d" % n
    tids = collections.defaultdict(set)
    unnamed = 0
    for s in stacks:
        names = [f.name for f in s.python]
        for fn in ("spin_a", "spin_b", "spin_c", "spin_d"):
            if fn in names:
                tids[fn].add(s.tid)
        if not names:
            unnamed += s.count
    assert sorted(tids) == ["spin_a", "spin_b", "spin_c", "spin_d"], dict(tids)
    assert all(len(t) == 1 for t in tids.values()), dict(tids)
    assert len(set().union(*tids.values())) == 4
    assert unnamed <= n * 0.05, "%d of %d samples without a Python frame" % (unnamed, n)


@pytest.mark.parametrize("ident", matrix_sample())
def test_methods_named_by_their_class(taipan, workload, tmp_path, ident):
    """Up to 3.10 a method's class comes from its first local, read in BPF
    only where that local is called self or cls: a method, a classmethod,
    a method calling itself on one self (looked up once a sample), and a
    function whose first argument is an instance under another name, which
    is no method."""
    it = interpreter(ident)
    w = workload(it, "methods.py", 30)
    stacks, _ = record_folded(taipan, tmp_path, w.pid, seconds=1, rate=1000, extra=["--no-kernel"])
    stacks = [s for s in stacks if s.pid == w.pid and s.python]
    assert total(stacks) >= 100, "too few samples: %d" % total(stacks)
    lines = marked_lines(w.script)
    leaves = collections.Counter()
    for s in stacks:
        leaf = s.python[-1]
        leaves[(leaf.name, leaf.line)] += s.count
        names = [f.name for f in s.python]
        if "Shape.nest" in names:
            # Caught on the way down, or at the bottom in Shape.area.
            chain = names[names.index("Shape.nest"):]
            nests = chain.count("Shape.nest")
            assert chain in (["Shape.nest"] * nests, ["Shape.nest"] * 9 + ["Shape.area"]), names
            assert nests <= 9, names
    for name, mark in (("Shape.area", "area"), ("Shape.build", "build"), ("helper", "helper")):
        assert leaves[(name, lines[mark])] > 0, "no %s at line %d: %s" % (name, lines[mark], leaves)
    assert not any(n.endswith(".helper") for n, _ in leaves), leaves
