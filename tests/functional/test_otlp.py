"""OpenTelemetry profiles (record -o FILE.otlp): decoded with the official
protos (otlp_fixtures.py) and compared with the pprof that the same
recording wrote beside it (record -o A.otlp -o B.pb.gz), read through
pprof's profile.proto compiled the same way."""

import os

import pytest

from conftest import WORKLOADS, pyenv, record, run_taipan
from otlp_fixtures import FRAME_TYPES, protos, read_otlp, read_pprof  # noqa: F401 (protos: a fixture)


@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_otlp_equals_the_pprof_of_the_same_recording(taipan, protos, workload, tmp_path, mode):
    w = workload(pyenv("pyenv-3.12"), "named_threads.py", 30)
    otlp, pprof = tmp_path / "out.otlp", tmp_path / "out.pb.gz"
    record(taipan, otlp, w.pid, seconds=2,
           extra=["-o", pprof, "--native", "all", "--mode", mode, "--service", "billing"])
    want, want_types, want_bids, kinds = read_pprof(protos, pprof)
    events = []
    got, types, bids, ftypes, resources = read_otlp(protos, otlp, events)

    assert types == want_types
    assert types[:2] == [("samples", "count"), ("cpu", "nanoseconds")]
    assert (("wall", "nanoseconds") in types) == (mode == "wall")
    # Not an empty match: the named threads and their busy functions.
    names = {k[2] for k in got}
    assert {"hasher", "sorter", "MainThread"} <= names, names
    assert any(f[0][0] == "hash_loop" for k in got if k[2] == "hasher" for f in k[6])
    assert got == want
    # Each cpu-clock sample is an event of its own, with its time.
    on_cpu = [v for _, k, v in events if k[3] in ("", "running")
              and not k[6][-1][0][0].startswith("[before taipan")]
    assert len(on_cpu) > 100 and all(v[0] == 1 for v in on_cpu), on_cpu[:5]
    assert len({t for t, _, _ in events}) > len(events) // 2
    assert bids == want_bids and bids, "native frames with build-ids"
    assert set(ftypes) == set(kinds)
    for frame, file in kinds.items():
        assert ftypes[frame] == FRAME_TYPES.get(file, "native"), (frame, file)
    assert "cpython" in ftypes.values() and "native" in ftypes.values()

    assert list(resources) == [w.pid]
    res = resources[w.pid]
    assert res["service.name"] == "billing"
    assert res["host.name"] == os.uname().nodename
    assert res["process.executable.path"] == os.path.realpath(pyenv("pyenv-3.12"))
    assert res["process.runtime.name"] == "python"
    assert res["process.runtime.version"].startswith("3.12")


def test_timestamps_follow_the_phases(taipan, protos, tmp_path):
    """A thread spins in first_phase, sleeps in nap_phase, then spins in
    second_phase: each event's timestamp falls within the time its phase
    ran by the process's own wall clock, and the nap is one event, at its
    start, weighing its length."""
    out, pprof = tmp_path / "out.otlp", tmp_path / "out.pb.gz"
    res = record(taipan, out, [pyenv("pyenv-3.12"), os.path.join(WORKLOADS, "otlp_phases.py")],
                 seconds=None, extra=["-o", pprof, "--mode", "wall"])
    phases = {}
    for line in res.stdout.splitlines():
        if line.startswith("phase "):
            _, name, t0, t1 = line.split()
            phases[name] = (int(t0), int(t1))
    assert set(phases) == {"first_phase", "nap_phase", "second_phase"}, res.stdout
    events = []
    got, _, _, _, _ = read_otlp(protos, out, events)
    assert got == read_pprof(protos, pprof)[0]
    by_phase = {name: [] for name in phases}
    for t, key, values in events:
        names = [f[0][0] for f in key[6]]  # leaf first
        for name in phases:
            if name in names:
                by_phase[name].append((t, key[3], values))
    # The wall clock is slewed against the profiler's (1% in this VM): a
    # phase's events may lie this far outside the times it printed.
    slack = 50_000_000
    for name in ("first_phase", "second_phase"):
        t0, t1 = phases[name]
        running = [t for t, state, _ in by_phase[name] if state == "running"]
        assert len(running) > 20, (name, by_phase[name][:5])
        assert all(t0 - slack <= t <= t1 + slack for t in running), (name, t0, t1, running)
    t0, t1 = phases["nap_phase"]
    naps = [(t, v) for t, state, v in by_phase["nap_phase"] if state == "sleeping"]
    assert naps, by_phase["nap_phase"]
    t, v = max(naps, key=lambda e: e[1][2])
    assert abs(t - t0) <= slack, (t - t0, naps)
    assert v[2] >= 0.9 * (t1 - t0), (v, t1 - t0)


def test_no_timestamps_gives_one_value_per_stack(taipan, protos, workload, tmp_path):
    """--no-timestamps: each sample is one aggregated value, without times,
    whose sums are those of the pprof."""
    w = workload(pyenv("pyenv-3.12"), "chain.py", 30)
    otlp, pprof = tmp_path / "out.otlp", tmp_path / "out.pb.gz"
    record(taipan, otlp, w.pid, seconds=1, rate=1000, extra=["-o", pprof, "--no-timestamps"])
    events = []
    got, _, _, _, _ = read_otlp(protos, otlp, events)
    assert got and not events
    assert got == read_pprof(protos, pprof)[0]


def test_service_name_defaults_to_the_command_name(taipan, protos, workload, tmp_path):
    w = workload(pyenv("pyenv-3.12"), "chain.py", 30)
    out = tmp_path / "out.otlp"
    record(taipan, out, w.pid, seconds=1, extra=["--format", "otlp"])
    _, _, _, _, resources = read_otlp(protos, out)
    assert resources[w.pid]["service.name"] == "python3.12"


def test_hostile_names_stay_bounded_utf8(taipan, protos, workload, tmp_path):
    w = workload(pyenv("pyenv-3.12"), "otlp_hostile.py", 30)
    out = tmp_path / "out.otlp"
    record(taipan, out, w.pid, seconds=2)
    r = protos.otlp.ExportProfilesServiceRequest()
    # The parser checks that every string is UTF-8.
    r.ParseFromString(out.read_bytes())
    strings = list(r.dictionary.string_table)
    for rp in r.resource_profiles:
        strings += [kv.value.string_value for kv in rp.resource.attributes]
    strings += [a.value.string_value for a in r.dictionary.attribute_table]
    for s in strings:
        assert len(s.encode("utf-8")) <= 16384, len(s)
        assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in s), repr(s[:80])
    # They are there, escaped and cut.
    assert any(s.startswith("\\x1b[31mred\\x07") for s in strings), [s[:40] for s in strings]
    assert any(s.startswith("/tmp/\\x1b]0;title\\x07") for s in strings)
    assert any("thread\\x7f" in s for s in strings)


@pytest.mark.parametrize("args, want", [
    (["-o", "a.otlp", "-o", "b.pb.gz", "--format", "otlp"], "--format with several --output"),
    (["-o", "a.otlp", "-o", "a.otlp"], "--output a.otlp given twice"),
    (["-o", "1.otlp", "-o", "2.otlp", "-o", "3.otlp", "-o", "4.otlp", "-o", "5.otlp"], "at most 4 --output"),
    (["-o", "a.otlp", "-o", "b.unknown"], "cannot tell the format of 'b.unknown'"),
    (["--service", ""], "--service wants a name"),
    (["-o", "a.pb.gz", "--no-timestamps"], "--no-timestamps is for OTLP"),
])
def test_bad_outputs_refused_before_recording(taipan, tmp_path, args, want):
    res = run_taipan(taipan, ["record", "-d", "1", "-p", "1"] + args, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert want in res.stderr, res.stderr
    assert not list(tmp_path.iterdir()), "nothing written"
