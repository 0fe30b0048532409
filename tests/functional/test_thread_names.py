"""Python thread names ("MainThread", threading.Thread(name="hasher")) in
record's labels and outputs and in dump, on every interpreter of the matrix:
read from the target's threading._active, not from the OS thread name."""

import collections
import json

import pytest

from conftest import go_pprof, interpreter, matrix_sample, record, record_folded, run_taipan, total

# named_threads.py: the function each thread spins in, and its Python name.
NAMED = {"hash_loop": "hasher", "sort_loop": "sorter", "rename_loop": "renamed", "main_loop": "MainThread"}
# Started by _thread.start_new_thread: no Thread object, so the OS name.
RAW = "raw_loop"


def busy_function(names):
    hits = [f for f in list(NAMED) + [RAW] if f in names]
    return hits[0] if len(hits) == 1 else None


@pytest.mark.parametrize("ident", matrix_sample())
def test_record_labels_threads_with_their_python_names(taipan, ident, workload, tmp_path):
    w = workload(interpreter(ident), "named_threads.py", 30)
    stacks, _ = record_folded(taipan, tmp_path, w.pid, seconds=2, rate=1000, extra=["--no-kernel"])
    stacks = [s for s in stacks if s.pid == w.pid]
    assert total(stacks) >= 200, "too few samples: %d" % total(stacks)
    seen = collections.defaultdict(collections.Counter)
    for s in stacks:
        fn = busy_function([f.name for f in s.python])
        if fn:
            seen[fn][s.thread] += s.count
    for fn, name in NAMED.items():
        assert seen[fn], "no samples in %s: %s" % (fn, dict(seen))
        # The first sample of a thread may come before its name is read
        # only if the read failed; it must not.
        assert set(seen[fn]) == {name}, "%s ran on threads named %s" % (fn, dict(seen[fn]))
    comm = {s.comm for s in stacks}
    assert len(comm) == 1, comm
    assert set(seen[RAW]) <= comm, "the unnamed thread is %s, not the OS name %s" % (dict(seen[RAW]), comm)


@pytest.mark.parametrize("ident", matrix_sample())
def test_dump_shows_python_thread_names(taipan, ident, workload):
    w = workload(interpreter(ident), "named_threads.py", 30)
    res = run_taipan(taipan, ["dump", "-p", w.pid, "--json"])
    assert res.returncode == 0, res.stderr
    threads = json.loads(res.stdout)["threads"]
    by_fn = {}
    for t in threads:
        fn = busy_function([f["name"] for f in t["frames"]])
        if fn:
            by_fn[fn] = t
    for fn, name in NAMED.items():
        assert fn in by_fn, "no thread in %s: %s" % (fn, res.stdout)
        assert by_fn[fn]["name"] == name, by_fn[fn]
        assert by_fn[fn]["os_name"], by_fn[fn]
    assert by_fn[RAW]["name"] == by_fn[RAW]["os_name"], by_fn[RAW]

    text = run_taipan(taipan, ["dump", "-p", w.pid])
    assert text.returncode == 0, text.stderr
    for name in NAMED.values():
        assert '"%s"' % name in text.stdout, text.stdout


def test_pprof_and_speedscope_carry_the_names(taipan, workload, tmp_path):
    w = workload(interpreter("pyenv-3.12"), "named_threads.py", 30)
    out = tmp_path / "out.json"
    res = record(taipan, out, w.pid, seconds=2, rate=500)
    assert res.returncode == 0, res.stderr
    titles = [p["name"] for p in json.loads(out.read_text())["profiles"]]
    for name in NAMED.values():
        assert any(t.startswith(name + " (tid ") for t in titles), titles

    pb = tmp_path / "out.pb.gz"
    res = record(taipan, pb, w.pid, seconds=2, rate=500)
    assert res.returncode == 0, res.stderr
    tags = go_pprof("-tags", pb)
    for name in NAMED.values():
        assert name in tags, tags
