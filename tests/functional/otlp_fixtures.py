"""OpenTelemetry profiles in the functional tests (test_otlp.py,
test_agent_otlp.py): the official protos compiled by protoc (Debian's
protobuf-compiler) for Python's protobuf (python3-protobuf) in the test, and
readers of OTLP and pprof that give the same shape for the same samples. A
test module imports the protos fixture by its name, for pytest to find it."""

import gzip
import importlib
import os
import shutil
import subprocess
import sys

import pytest

from conftest import IN_CI, ROOT, require

OUTPUT_SRC = os.path.join(ROOT, "src", "output")
OTLP_PROTOS = [
    "opentelemetry/proto/common/v1/common.proto",
    "opentelemetry/proto/resource/v1/resource.proto",
    "opentelemetry/proto/profiles/v1development/profiles.proto",
    "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto",
]
# The OpenTelemetry eBPF profiler's profile.frame.type values
# (libpf/interpretertype.go), by the pprof mapping taipan gives each kind.
FRAME_TYPES = {"[python]": "cpython", "[ruby]": "ruby", "[kernel.kallsyms]": "kernel", "[taipan]": "unknown"}


class Protos:
    """The compiled modules: otlp (ExportProfilesServiceRequest and what it
    holds) and pprof (Profile)."""

    def __init__(self, otlp, pprof):
        self.otlp = otlp
        self.pprof = pprof


@pytest.fixture(scope="session")
def protos(tmp_path_factory):
    protoc = shutil.which("protoc")
    require(protoc or "/usr/bin/protoc", "protoc (protobuf-compiler), to decode OTLP")
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        msg = "Python's protobuf (python3-protobuf) is not installed, to decode OTLP"
        if IN_CI:
            pytest.fail("required in CI: " + msg)
        pytest.skip(msg)
    out = str(tmp_path_factory.mktemp("protos"))
    subprocess.run([protoc, "--python_out=" + out] + OTLP_PROTOS + ["profile.proto"], cwd=OUTPUT_SRC,
                   check=True)
    sys.path.insert(0, out)
    try:
        otlp = importlib.import_module(
            "opentelemetry.proto.collector.profiles.v1development.profiles_service_pb2")
        pprof = importlib.import_module("profile_pb2")
    finally:
        sys.path.remove(out)
    return Protos(otlp, pprof)


def any_value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def read_pprof(protos, path):
    """pprof at path as ({sample key: [values]}, [(type, unit)], {(file, build-id)},
    {location's frames: its mapping's file})."""
    p = protos.pprof.Profile()
    with open(path, "rb") as f:
        p.ParseFromString(gzip.decompress(f.read()))
    st = p.string_table
    fns = {f.id: f for f in p.function}
    maps = {m.id: m for m in p.mapping}
    locs = {}
    kinds = {}
    for loc in p.location:
        frame = tuple((st[fns[ln.function_id].name], st[fns[ln.function_id].filename], ln.line)
                      for ln in loc.line)
        if not frame:
            frame = (("@", st[maps[loc.mapping_id].filename], loc.address),)
        locs[loc.id] = frame
        kinds[frame] = st[maps[loc.mapping_id].filename]
    samples = {}
    for s in p.sample:
        lb = {st[l.key]: st[l.str] for l in s.label}
        key = (int(lb["pid"]), int(lb["tid"]), lb.get("thread_name", ""), lb.get("state", ""), lb.get("gil", ""),
               lb.get("task", ""), tuple(locs[i] for i in s.location_id))
        old = samples.get(key, [0] * len(s.value))
        samples[key] = [a + b for a, b in zip(old, s.value)]
    types = [(st[t.type], st[t.unit]) for t in p.sample_type]
    build_ids = {(st[m.filename], st[m.build_id]) for m in p.mapping if m.build_id}
    return samples, types, build_ids, kinds


def read_otlp(protos, path, events=None):
    """OTLP at path as read_pprof() reads pprof, with the resources
    ({pid: {attribute: value}}) and the frame types ({frames: type}) too.
    Each sample's values add up; with events a list, each value is also
    appended to it as (timestamp, key, [its value in each type]), where the
    samples carry timestamps (every sample of a profile does, or none)."""
    r = protos.otlp.ExportProfilesServiceRequest()
    with open(path, "rb") as f:
        r.ParseFromString(f.read())
    d = r.dictionary
    st = d.string_table
    # Each table starts with its zero value, as the protocol asks.
    assert st[0] == ""
    for table in (d.mapping_table, d.location_table, d.function_table, d.stack_table, d.attribute_table):
        assert len(table) and table[0] == type(table[0])(), table[0]
    assert len(d.link_table) == 1 and not any(d.link_table[0].trace_id)

    def attrs(indices):
        out = {}
        for i in indices:
            a = d.attribute_table[i]
            assert st[a.key_strindex] not in out, "a key twice"
            out[st[a.key_strindex]] = any_value(a.value)
        return out

    locs = {}
    ftypes = {}
    for i, loc in enumerate(d.location_table[1:], 1):
        fns = [(d.function_table[ln.function_index], ln.line) for ln in loc.lines]
        frame = tuple((st[f.name_strindex], st[f.filename_strindex], line) for f, line in fns)
        mapping = d.mapping_table[loc.mapping_index]
        if not frame:
            frame = (("@", st[mapping.filename_strindex], loc.address),)
        locs[i] = frame
        ftypes[frame] = attrs(loc.attribute_indices)["profile.frame.type"]
    build_ids = set()
    for m in d.mapping_table[1:]:
        bid = attrs(m.attribute_indices).get("process.executable.build_id.gnu")
        if bid:
            build_ids.add((st[m.filename_strindex], bid))

    samples = {}
    resources = {}
    types = None
    for rp in r.resource_profiles:
        res = {kv.key: any_value(kv.value) for kv in rp.resource.attributes}
        pid = res["process.pid"]
        assert pid not in resources, "one ResourceProfiles per process"
        resources[pid] = res
        assert len(rp.scope_profiles) == 1 and rp.scope_profiles[0].scope.name == "taipan"
        profs = rp.scope_profiles[0].profiles
        t = [(st[p.sample_type.type_strindex], st[p.sample_type.unit_strindex]) for p in profs]
        assert types in (None, t)
        types = t
        timed = bool(profs[0].samples) and bool(profs[0].samples[0].timestamps_unix_nano)
        for p in profs:
            assert len(p.samples) == len(profs[0].samples)
            assert (st[p.period_type.type_strindex], st[p.period_type.unit_strindex]) == ("cpu", "nanoseconds")
            assert p.period > 0 and p.time_unix_nano > 0 and p.duration_nano > 0
            for s in p.samples:
                # One shape for all: a value per timestamp, or one value.
                assert len(s.values) == (len(s.timestamps_unix_nano) if timed else 1), s
                assert all(p.time_unix_nano <= t <= p.time_unix_nano + p.duration_nano
                           for t in s.timestamps_unix_nano)
        for i, s in enumerate(profs[0].samples):
            assert all(p.samples[i].stack_index == s.stack_index and
                       p.samples[i].timestamps_unix_nano == s.timestamps_unix_nano for p in profs)
            at = attrs(s.attribute_indices)
            stack = tuple(locs[li] for li in d.stack_table[s.stack_index].location_indices)
            key = (pid, at["thread.id"], at.get("thread.name", ""), at.get("taipan.state", ""),
                   at.get("taipan.gil", ""), at.get("taipan.task", ""), stack)
            values = [sum(p.samples[i].values) for p in profs]
            old = samples.get(key, [0] * len(values))
            samples[key] = [a + b for a, b in zip(old, values)]
            if events is not None:
                for e, t in enumerate(s.timestamps_unix_nano):
                    events.append((t, key, [p.samples[i].values[e] for p in profs]))
    return samples, types, build_ids, ftypes, resources
