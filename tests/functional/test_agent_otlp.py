"""The agent's OTLP pushes (--otlp URL): each window POSTed to
URL/v1development/profiles as a gzipped ExportProfilesServiceRequest, to a
receiver on loopback that decodes every request with the official protos
(otlp_fixtures.py); the headers of --otlp-headers-file; a receiver that
fails for a while gets the backlog afterwards, in order."""

import gzip
import os
import subprocess
import time

import pytest

from conftest import pyenv
from agent_fixtures import agents  # noqa: F401 (a fixture: pytest finds it by name)
from agent_fixtures import INNER, PostReceiver, wait_for
from otlp_fixtures import protos, read_otlp  # noqa: F401 (protos: a fixture)

TOKEN = "Bearer otlp-Zq9-3d1f8c"


def OtlpReceiver(protos, statuses=()):
    """An OTLP/HTTP receiver on 127.0.0.1: keeps every POST (time, path,
    headers, status, the decoded request) and answers with the next of
    statuses, then 200."""

    def parse(handler, body):
        req = protos.otlp.ExportProfilesServiceRequest()
        req.ParseFromString(gzip.decompress(body))
        return dict(path=handler.path, headers=dict(handler.headers), body=body, request=req)
    return PostReceiver(parse, statuses=statuses, ok=b"", unhappy=b"receiver unhappy\n")


@pytest.fixture
def receivers(protos):
    made = []

    def make(**kw):
        r = OtlpReceiver(protos, **kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def headers_file(tmp_path, text, mode=0o600):
    path = tmp_path / "otlp-headers"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def window_span(req):
    """A request's window as (start, end) in ns: its profiles' time."""
    profs = [p for rp in req.resource_profiles for sp in rp.scope_profiles for p in sp.profiles]
    assert profs
    starts = {p.time_unix_nano for p in profs}
    ends = {p.time_unix_nano + p.duration_nano for p in profs}
    assert len(starts) == 1 and len(ends) == 1, "one window per request"
    return starts.pop(), ends.pop()


def test_windows_arrive_with_the_headers(agents, receivers, protos, workload, tmp_path):
    w = workload(pyenv("pyenv-3.12"), "chain.py", 60)
    rec = receivers()
    hf = headers_file(tmp_path, "# for the receiver\nAuthorization: %s\nX-Scope-OrgID:  tenant-7 \n" % TOKEN)
    a = agents("--otlp", rec.url + "/", "--otlp-headers-file", hf, window=1)
    wait_for(lambda: len(rec.taken()) >= 2, 30, "two OTLP pushes")
    for r in rec.taken()[:2]:
        assert r["path"] == "/v1development/profiles", r["path"]
        h = r["headers"]
        assert h["Content-Type"] == "application/x-protobuf" and h["Content-Encoding"] == "gzip", h
        assert h["Authorization"] == TOKEN and h["X-Scope-OrgID"] == "tenant-7", h
        path = tmp_path / "window.otlp"
        path.write_bytes(gzip.decompress(r["body"]))
        events = []
        samples, types, _, ftypes, resources = read_otlp(protos, path, events)
        assert types == [("samples", "count"), ("cpu", "nanoseconds")]
        # Each cpu-clock sample an event, at its time within the window
        # (read_otlp checks that).
        mine = [v for _, k, v in events if k[0] == w.pid]
        assert len(mine) > 10 and all(v[0] == 1 for v in mine), mine[:5]
        assert w.pid in resources and resources[w.pid]["service.name"] == "python3.12"
        assert resources[w.pid]["process.executable.path"] == os.path.realpath(pyenv("pyenv-3.12"))
        mine = [k for k in samples if k[0] == w.pid]
        assert any(f[0][0] == INNER for k in mine for f in k[6]), mine[:3]
        assert "cpython" in ftypes.values()
    first, second = (window_span(r["request"]) for r in rec.taken()[:2])
    assert first[1] <= second[0] + 100_000_000, (first, second)
    st = wait_for(lambda: (lambda s: s if s["otlp_windows_pushed"] >= 2 else None)(a.stats()), 5,
                  "the OTLP pushes counted")
    assert st["otlp_push_failures"] == 0 and st["otlp_dropped_windows"] == 0
    assert st["otlp_events_merged"] == 0
    logs = a.logs()
    assert "pushing each window to %s/v1development/profiles as OTLP" % rec.url in logs, logs
    assert "with the headers of --otlp-headers-file" in logs
    # The token stays out of the log and of what the agent serves.
    assert "otlp-Zq9" not in logs and "otlp-Zq9" not in str(st)


def test_a_receiver_that_fails_for_a_while_gets_the_backlog_in_order(agents, receivers, workload):
    workload(pyenv("pyenv-3.12"), "chain.py", 60)
    rec = receivers(statuses=[503, 503, 503])
    a = agents("--otlp", rec.url, "--backlog", "16", window=1)
    # The first window is tried four times (waits of about 1, 2 and 4 s);
    # the windows cut meanwhile wait in the backlog.
    st = wait_for(lambda: (lambda s: s if s["otlp_windows_pushed"] >= 6 else None)(a.stats()), 40,
                  "the backlog pushed")
    tries = rec.all()
    assert [t["status"] for t in tries[:4]] == [503, 503, 503, 200], [t["status"] for t in tries]
    failed = {window_span(t["request"]) for t in tries[:3]}
    assert len(failed) == 1, "the same window, tried again"
    taken = [window_span(t["request"]) for t in rec.taken()]
    assert taken[0] in failed
    # Oldest first, none missing: each window starts where the one before ended.
    for prev, cur in zip(taken, taken[1:]):
        assert cur[0] > prev[0], taken
        assert abs(cur[0] - prev[1]) < 200_000_000, taken
    # Four windows or more were cut while the first was refused.
    assert sum(1 for t in tries[:4] if t["status"] == 503) == 3
    assert len([s for s in taken if s[0] < tries[3]["time"] * 1e9]) >= 4, taken
    assert st["otlp_push_failures"] == 3 and st["otlp_dropped_windows"] == 0
    assert "OTLP push of window" in a.logs() and "HTTP 503: receiver unhappy" in a.logs()


@pytest.mark.parametrize("text,mode,args,msg", [
    ("Authorization: %s\n" % TOKEN, 0o644, None, "(mode 0644): chmod 600"),
    ("Authorization: %s\n" % TOKEN, 0o640, None, "(mode 0640): chmod 600"),
    ("Authorization %s\n" % TOKEN, 0o600, None, "line 1: want 'Key: Value'"),
    ("X-A: 1\nContent-Encoding: identity\n", 0o600, None, "line 2: Content-Encoding is taipan's to set"),
    ("X-A: \x1b[2J\n", 0o600, None, "line 1: a control character in the value"),
    ("Authorization: %s\n" % TOKEN, 0o600, [], "--otlp-headers-file is for --otlp"),
])
def test_bad_headers_files_refused(taipan, tmp_path, text, mode, args, msg):
    hf = headers_file(tmp_path, text, mode)
    argv = [taipan, "agent", "--otlp-headers-file", hf] + (["--otlp", "http://127.0.0.1:1"] if args is None else args)
    res = subprocess.run([str(x) for x in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=10)
    assert res.returncode == 2, res.stderr
    assert msg in res.stderr, res.stderr
    assert "otlp-Zq9" not in res.stderr


def test_otlp_url_with_credentials_and_lone_options_refused(taipan):
    for url, msg in (("http://u:s3cr3t-pw@127.0.0.1:1", "a user name or password in the URL"),
                     ("grpc://127.0.0.1:4317", "--otlp wants an http:// or https:// URL")):
        res = subprocess.run([taipan, "agent", "--otlp", url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, timeout=10)
        assert res.returncode == 2, res.stderr
        assert msg in res.stderr and "s3cr3t" not in res.stderr, res.stderr
    res = subprocess.run([taipan, "agent", "--no-timestamps"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=10)
    assert res.returncode == 2 and "--no-timestamps is for --otlp" in res.stderr, res.stderr


def test_wall_mode_pushes_the_wall_profile(agents, receivers, protos, workload, tmp_path):
    """Unlike the Pyroscope push, which must look like a CPU profile, OTLP
    names each sample type: an agent in --mode wall sends wall time too."""
    w = workload(pyenv("pyenv-3.12"), "chain.py", 60)
    rec = receivers()
    agents("--otlp", rec.url, "--mode", "wall", window=1)
    wait_for(lambda: rec.taken(), 30, "an OTLP push")
    path = tmp_path / "window.otlp"
    path.write_bytes(gzip.decompress(rec.taken()[0]["body"]))
    samples, types, _, _, _ = read_otlp(protos, path)
    assert types == [("samples", "count"), ("cpu", "nanoseconds"), ("wall", "nanoseconds")]
    states = {k[3] for k in samples if k[0] == w.pid}
    assert "running" in states, states
