"""Hostile targets: Python processes that corrupt their own interpreter state
(tests/workloads/hostile.py) while taipan profiles them next to a healthy one.
taipan must keep running, keep profiling the healthy process, write its
profile, and count the bad samples under their error kind. Races: threads
that start and stop at a high rate, processes that exec into other programs."""

import os
import re
import time

import pytest

from conftest import CHAIN_NAMES, ROOT, WORKLOADS, pyenv, record_folded, run_taipan, stats, total

HOSTILE = os.path.join(WORKLOADS, "hostile.py")
CHAIN = os.path.join(WORKLOADS, "chain.py")
VERSIONS = ["2.7", "3.9", "3.12"]


def layout_row(version):
    """The row of the committed offset table for major.minor, as {field: offset}."""
    with open(os.path.join(ROOT, "src", "cpython", "gen", "pyoffsets_table.c")) as f:
        text = f.read()
    major, minor = (int(x) for x in version.split("."))
    for m in re.finditer(r"\.hexversion = 0x([0-9a-f]+),(.*?)\n\t\}", text, re.S):
        h = int(m.group(1), 16)
        if h >> 24 == major and (h >> 16) & 0xFF == minor:
            return {k: int(v) for k, v in re.findall(r"\.(\w+) = (-?\d+),", m.group(2))}
    raise AssertionError("no row for %s in src/cpython/gen/pyoffsets_table.c" % version)


def hostile(workload, version, mode, seconds=60):
    """hostile.py in this mode, with the version's offsets on its command line."""
    row = layout_row(version)
    return workload(pyenv("pyenv-" + version), "hostile.py", mode, seconds,
                    *["%s=%d" % kv for kv in sorted(row.items())])


def assert_healthy(stacks, pid):
    """The healthy chain.py next to the hostile process was profiled in full."""
    mine = [s for s in stacks if s.pid == pid]
    assert total(mine) >= 100, "healthy process: %d samples" % total(mine)
    good = [s for s in mine if [f.name for f in s.python][:3] == CHAIN_NAMES]
    assert total(good) >= 0.9 * total(mine), [[f.text for f in s.frames] for s in mine][:5]
    assert not any(f.marker for s in mine for f in s.frames)


def healthy(workload):
    return workload(pyenv("pyenv-3.11"), "chain.py", 60)


def beside_healthy(taipan, workload, tmp_path, version, mode, rate=500):
    """Records a hostile process (mode) and a healthy one together for 3 s,
    checks that the healthy one's stacks are whole, and returns the hostile
    process, its stacks, taipan's stats and its stderr."""
    bad = hostile(workload, version, mode)
    good = healthy(workload)
    stacks, res = record_folded(taipan, tmp_path, [bad.pid, good.pid], seconds=3, rate=rate,
                                extra=["--stats", "--no-kernel"])
    assert_healthy(stacks, good.pid)
    return bad, [s for s in stacks if s.pid == bad.pid], stats(res.stderr), res.stderr


def dump_survives(taipan, pid):
    """taipan dump reads the broken process without crashing or hanging."""
    t0 = time.time()
    res = run_taipan(taipan, ["dump", "-p", pid], timeout=30)
    assert res.returncode in (0, 1), (res.returncode, res.stderr)
    assert time.time() - t0 < 10, "dump took %.1f s" % (time.time() - t0)
    return res


@pytest.mark.parametrize("version", VERSIONS)
def test_frame_list_that_loops(taipan, workload, tmp_path, version):
    bad, mine, st, err = beside_healthy(taipan, workload, tmp_path, version, "frame-loop")
    assert total(mine) >= 50, err
    assert st.get("frame_loop", 0) >= 50, err
    looped = [s for s in mine if s.frames[0].text == "[broken frame chain]"]
    assert total(looped) >= 0.9 * total(mine), [[f.text for f in s.frames][:4] for s in mine][:5]
    # spin_looped "called" by itself, once, and busy() under it: no tower.
    for s in looped:
        assert [f.name for f in s.python] in (["spin_looped"], ["spin_looped", "busy"]), \
            [f.text for f in s.frames]
    res = dump_survives(taipan, bad.pid)
    assert "[broken frame chain]" in res.stdout and "spin_looped" in res.stdout, res.stdout[-500:]


@pytest.mark.parametrize("version", VERSIONS)
def test_caller_link_that_skips_a_frame_is_a_merge_failure(taipan, workload, tmp_path, version):
    """A caller link that leads past a frame to an older real one gives a
    Python stack that looks whole, but one eval loop's frames short: the
    native stack shows the loop. The sample keeps both parts, whole, under a
    marker, and is counted; nothing is spliced by a guess."""
    bad, mine, st, err = beside_healthy(taipan, workload, tmp_path, version, "frame-skip")
    assert total(mine) >= 50, err
    marked = [s for s in mine if s.frames[0].text == "[native and Python stacks disagree]"]
    assert total(marked) >= 0.9 * total(mine), [[f.text for f in s.frames] for s in mine][:3]
    for s in marked:
        py = [f.name for f in s.python]
        assert py[:3] == ["<module>", "main", "spin_skip"], [f.text for f in s.frames]
        assert any(f.native and f.name.split(".")[0] in ("_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx")
                   for f in s.frames), [f.text for f in s.frames]
    assert st.get("merge", 0) >= total(marked), err


@pytest.mark.parametrize("version", VERSIONS)
def test_frame_whose_caller_is_garbage(taipan, workload, tmp_path, version):
    bad, mine, st, err = beside_healthy(taipan, workload, tmp_path, version, "frame-garbage")
    assert total(mine) >= 50, err
    # What was read before the garbage, under the marker: spin_cut and busy.
    cut = [s for s in mine if s.frames[0].text == "[frame unreadable]"]
    assert total(cut) >= 0.9 * total(mine), [[f.text for f in s.frames] for s in mine][:5]
    for s in cut:
        assert [f.name for f in s.python] in (["spin_cut"], ["spin_cut", "busy"]), [f.text for f in s.frames]
    assert st.get("frame unreadable", 0) >= total(cut), err
    res = dump_survives(taipan, bad.pid)
    assert "spin_cut" in res.stdout, res.stdout


@pytest.mark.parametrize("version", VERSIONS)
def test_code_object_with_a_garbage_name(taipan, workload, tmp_path, version):
    bad, mine, st, err = beside_healthy(taipan, workload, tmp_path, version, "bad-name")
    assert total(mine) >= 50, err
    # The victim's frame is a marker; its caller and callee are still named.
    unknown = [s for s in mine if [f.text for f in s.frames if not f.kernel][2:3] == ["[unknown]"]]
    assert total(unknown) >= 0.9 * total(mine), [[f.text for f in s.frames] for s in mine][:5]
    assert all(s.frames[0].name == "<module>" for s in unknown)
    assert st.get("unreadable code objects", 0) >= total(unknown), err
    dump_survives(taipan, bad.pid)


@pytest.mark.parametrize("version", VERSIONS)
def test_line_table_of_random_bytes(taipan, workload, tmp_path, version):
    bad, mine, st, err = beside_healthy(taipan, workload, tmp_path, version, "random-linetable")
    assert total(mine) >= 50, err
    # Names and files are intact; the line is whatever the garbage decodes
    # to, or the first line, but never a crash.
    for s in mine:
        names = [f.name for f in s.python]
        assert names in (["<module>", "main", "victim"], ["<module>", "main", "victim", "busy"]), names
        assert s.python[2].line is None or s.python[2].line >= 0
    dump_survives(taipan, bad.pid)


@pytest.mark.parametrize("version", VERSIONS)
def test_thread_list_cut_mid_walk(taipan, workload, tmp_path, version):
    bad, mine, st, err = beside_healthy(taipan, workload, tmp_path, version, "thread-cut")
    # Four busy threads: the newest is before the cut and walks; the two
    # older workers and the main thread are past it.
    cut = [s for s in mine if s.frames and s.frames[0].text == "[thread state unreadable]"]
    whole = [s for s in mine if len(s.python) >= 2 and s.python[-1].name == "busy"
             and s.python[-2].name.endswith("worker")]
    assert total(cut) >= 50 and st.get("thread state unreadable", 0) >= total(cut), err
    assert total(whole) >= 20, [[f.text for f in s.frames] for s in mine][:8]
    assert len({s.tid for s in whole}) == 1
    res = dump_survives(taipan, bad.pid)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("version", VERSIONS)
def test_threads_starting_and_stopping_fast(taipan, workload, tmp_path, version):
    bad, mine, st, err = beside_healthy(taipan, workload, tmp_path, version, "churn", rate=1000)
    assert total(mine) >= 50, err
    # Threads come and go between the sample and the walk: whatever fails is
    # counted under its kind, and most samples still have the short() frame.
    named = [s for s in mine if s.python and s.python[-1].name.endswith("short")]
    assert total(named) >= 10, [[f.text for f in s.frames] for s in mine][:8]
    assert "perf samples in targets" in err


def test_processes_that_exec_other_programs(taipan, tmp_path):
    """`record -- sh -c 'A & B & wait'`: a chain of Pythons that exec into
    sh and back, 40 times, next to a healthy Python that runs throughout."""
    py = pyenv("pyenv-3.12")
    chain = "%s %s exec-chain 40" % (py, HOSTILE)
    good = "%s %s 4" % (pyenv("pyenv-3.11"), CHAIN)
    loop = "for i in 1 2 3 4 5 6 7 8 9 10; do %s -c pass; /bin/true; done" % py
    stacks, res = record_folded(taipan, tmp_path,
                                ["sh", "-c", "%s >/dev/null & %s >/dev/null & %s & wait" % (chain, good, loop)],
                                seconds=None, extra=["--stats"], timeout=120)
    names = {f.name for s in stacks for f in s.python}
    assert {"main", "Worker.run"} <= names, names
    assert "exec_chain" in names, names
    assert "stacks recorded" in res.stderr
