"""Free-threaded CPython (PEP 703): the 3.13t that make-roots.sh builds from
Debian's python3.13 source. Its threads run Python on every CPU at once, so
BPF walks frames of one process on several CPUs in parallel; its objects have
a 32-byte header, so every offset comes from its own _Py_DebugOffsets."""
import collections
import json
import os
import re
import subprocess

import pytest

from conftest import (WORKLOADS, Interp, go_pprof, interpreter, tag_values, parse_folded, record, record_args,
                      run_taipan, total)

FT = "sid-3.13t"


def _result(stdout):
    """The workload's "result JSON" line, out of taipan's standard output
    (the command's own)."""
    for line in stdout.splitlines():
        if line.startswith("result "):
            return json.loads(line[len("result "):])
    raise AssertionError("the workload printed no result: %r" % stdout[-2000:])


def _record_command(taipan, tmp_path, it, script, *args, rate=1000, nice=0):
    out = tmp_path / "out.folded"
    argv = (["nice", "-n", str(nice)] if nice else []) + it.argv(os.path.join(WORKLOADS, script), *args)
    res = record(taipan, out, argv, seconds=None, rate=rate,
                 extra=["--folded-lines", "--folded-threads", "--no-kernel"], timeout=180)
    return parse_folded(out), _result(res.stdout)


def test_four_threads_in_parallel_each_its_own_stack_and_share(taipan, tmp_path):
    it = interpreter(FT)
    # At a higher priority than the load of a loaded test run (stress-ng
    # on every CPU), which would otherwise leave the four threads about
    # one CPU between them.
    stacks, res = _record_command(taipan, tmp_path, it, "ft_parallel.py", 4, nice=-10)
    funcs = ["spin_w", "spin_x", "spin_y", "spin_z"]
    # The four ran at once: more CPU than the wall-clock time, which a
    # GIL build cannot give Python code.
    cpu = {f: res[f]["cpu"] for f in funcs}
    assert sum(cpu.values()) > 1.05 * res["wall"], res
    by_func = collections.Counter()
    for s in stacks:
        names = [f.name for f in s.python]
        hit = [f for f in funcs if f in names]
        if not hit:
            continue
        assert len(hit) == 1, names
        fn = hit[0]
        # Each sample sits in its own thread, under its own exact stack.
        assert s.tid == res[fn]["tid"], (fn, s.tid, res)
        assert names[-3:] == ["run", fn, "spin"] and names[:3] == [
            "Thread._bootstrap", "Thread._bootstrap_inner", "Thread.run"], names
        leaf = s.python[-1]
        assert leaf.file.endswith("ft_parallel.py") and 19 <= leaf.line <= 22, leaf
        by_func[fn] += s.count
    n = sum(by_func.values())
    assert n >= 0.5 * 1000 * sum(cpu.values()), (n, cpu)
    for fn in funcs:
        got, want = by_func[fn] / n, cpu[fn] / sum(cpu.values())
        assert abs(got - want) <= 0.03, "%s: %.1f%% of samples, %.1f%% of the CPU time: %s %s" % (
            fn, 100 * got, 100 * want, dict(by_func), cpu)


def test_churn_of_64_threads_never_mixes_them_up(taipan, tmp_path):
    it = interpreter(FT)
    stacks, res = _record_command(taipan, tmp_path, it, "ft_churn.py", 4, 3)
    ran = {int(t): fn for t, fn in res["ran"].items()}
    # At least 3 waves: the workload runs them however long a loaded host takes.
    assert res["waves"] >= 3 and len(ran) >= 64 * 3, (res["waves"], len(ran))
    # Markers of samples that carry no Python stack, for a reason that is no
    # mix-up: start-up (before recognition, or before the dynamic loader
    # has set the main thread's fs base), finalization, a thread on its
    # way in or out.
    allowed = {"[no Python frame]", "[no Python thread state]", "[thread exiting]",
               "[before taipan recognised the process]", "[no thread pointer]"}
    seen = collections.Counter()
    for s in stacks:
        for f in s.frames:
            # Garbage would show as a name of no code object the program has,
            # or as a marker of a broken walk.
            if f.marker:
                assert f.text in allowed or f.text.startswith("[native"), [x.text for x in s.frames]
            elif not f.native:
                assert f.file and (f.file.startswith("<frozen") or os.path.isfile(it.root + f.file)), f.text
        names = [f.name for f in s.python]
        hit = [n for n in names if n.startswith("churn_")]
        if hit:
            # The thread the sample names ran exactly that function.
            assert s.tid in ran and hit == [ran[s.tid]], (s.tid, names, ran.get(s.tid))
            seen[hit[0]] += s.count
    # Every function was seen, and the samples are what the process's CPU
    # time gives at 1 kHz (less than that only for samples that failed,
    # which the markers above would show): sized by what the process got,
    # not by the time, since a loaded host gives it less.
    n = total(stacks)
    assert len(seen) == 8, dict(seen)
    assert n >= 0.5 * 1000 * res["cpu"], (n, res["cpu"])


def test_free_threaded_and_gil_builds_told_apart(taipan, workload, tmp_path):
    ft, gil = interpreter(FT), interpreter("sid-3.13")
    wf = workload(ft, "chain.py", 60)
    wg = workload(gil, "chain.py", 60)
    out = tmp_path / "out.pb.gz"
    record(taipan, out, None, seconds=3, rate=200)
    for w, want in ((wf, r"3.13.15t"), (wg, None)):
        tags = go_pprof("-tags", "-tagfocus=pid=^%d$" % w.pid, out)
        versions = tag_values(tags, "runtime_version")
        assert versions, tags
        assert tag_values(tags, "python_version") == versions, tags
        assert tag_values(tags, "runtime") == ["python"], tags
        if want:
            assert versions == [want], tags
        else:
            assert len(versions) == 1 and not versions[0].endswith("t"), tags
        top = go_pprof("-top", "-cum", "-tagfocus=pid=^%d$" % w.pid, out)
        assert "Worker.run" in top, top


def test_dump_reads_every_thread(taipan, workload):
    w = workload(interpreter(FT), "ft_parallel.py", 30)
    funcs = ("spin_w", "spin_x", "spin_y", "spin_z")
    # The threads leave their start barrier a moment after "ready" (later
    # on a loaded host): dump until all four are in their functions.
    for _ in range(50):
        res = run_taipan(taipan, ["dump", "--json", "-p", w.pid])
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        frames = [[f["name"] for f in t["frames"]] for t in doc["threads"]]
        if all(any(fn in names for names in frames) for fn in funcs):
            break
    assert doc["python_version"].endswith("t"), doc["python_version"]
    assert len(doc["threads"]) == 5, frames
    for fn in funcs:
        assert sum(fn in names for names in frames) == 1, frames


@pytest.fixture
def broken_ft():
    """A copy of the free-threaded interpreter whose _Py_DebugOffsets (in the
    file's .PyRuntime section, copied into memory as it starts) says
    runtime_state.size is 0. CPython itself never reads the struct, so the
    copy runs as well as the original; taipan must refuse it and say why."""
    it = interpreter(FT)
    real = os.path.realpath(it.root + it.path)
    sec = subprocess.run(["readelf", "-SW", real], stdout=subprocess.PIPE, text=True, check=True).stdout
    m = re.search(r"\.PyRuntime\s+PROGBITS\s+[0-9a-f]+\s+([0-9a-f]+)", sec)
    assert m, sec
    off = int(m.group(1), 16)
    data = bytearray(open(real, "rb").read())
    # Include/internal/pycore_runtime.h (3.13): cookie, version,
    # free_threaded, then runtime_state.size.
    assert data[off:off + 8] == b"xdebugpy"
    assert int.from_bytes(data[off + 16:off + 24], "little") == 1
    assert 0 < int.from_bytes(data[off + 24:off + 32], "little") < 1 << 20
    data[off + 24:off + 32] = bytes(8)
    path = os.path.join(os.path.dirname(it.path), "python3.13t-broken")
    with open(it.root + path, "wb") as f:
        f.write(data)
    os.chmod(it.root + path, 0o755)
    yield Interp("sid-3.13t-broken", path, it.version, it.root)
    os.unlink(it.root + path)


def _says_why(stderr):
    assert "(free-threaded)" in stderr and "runtime_state.size 0 is not a plausible size" in stderr, stderr


def test_refused_build_is_named_and_exits_non_zero(taipan, broken_ft, workload, tmp_path):
    # A command: nothing could be recorded, and that is an error, not "the
    # targets did not run Python".
    out = tmp_path / "out.folded"
    res = run_taipan(taipan, record_args(out, broken_ft.argv(os.path.join(WORKLOADS, "chain.py"), 2),
                                         seconds=None, rate=200), timeout=60)
    assert res.returncode == 1, res.stderr
    _says_why(res.stderr)
    assert "refused" in res.stderr and "did not run Python" not in res.stderr, res.stderr
    # A pid, and dump: refused at once.
    w = workload(broken_ft, "chain.py", 30)
    for args in (record_args(tmp_path / "p.folded", w.pid, seconds=1), ["dump", "-p", w.pid]):
        res = run_taipan(taipan, args)
        assert res.returncode == 1, res.stderr
        _says_why(res.stderr)
