"""taipan agent: pprof over HTTP (read by go tool pprof), /stats, pushes to a
Pyroscope-style receiver (checked part by part and read by go tool pprof),
retries with backoff, dropped windows, SIGTERM's flush and SIGHUP's log
reopening. Everything listens on 127.0.0.1 only, and every wait is bounded."""

import gzip
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from email import policy
from email.parser import BytesParser

import pytest

from conftest import go_pprof, pyenv, require

INNER = "Worker.run.<locals>.inner"  # chain.py's busy function on 3.12


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond, timeout, what, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(step)
    raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))


def get(url, timeout=10, method="GET", headers=None):
    """(status, body bytes) of one request; HTTP errors are answers too."""
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def pprof_strings(body):
    """The pprof's bytes, ungzipped: its string table names the functions."""
    return gzip.decompress(body)


class Agent:
    def __init__(self, taipan, tmp_path, *args, window=2):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log = tmp_path / "agent.log"
        self.stderr = open(tmp_path / "agent.stderr", "wb")
        self.proc = subprocess.Popen(
            [taipan, "agent", "--listen", "127.0.0.1:%d" % self.port, "--window", str(window),
             "--log", str(self.log)] + [str(a) for a in args],
            stdout=subprocess.DEVNULL, stderr=self.stderr)
        try:
            wait_for(self._healthy, 30, "the agent's /healthz")
        except AssertionError:
            self.kill()
            raise AssertionError("agent did not come up:\n" + self.logs())

    def _healthy(self):
        if self.proc.poll() is not None:
            raise AssertionError("agent exited with %s:\n%s" % (self.proc.returncode, self.logs()))
        try:
            return get(self.url + "/healthz", timeout=2) == (200, b"ok\n")
        except OSError:
            return False

    def logs(self):
        out = ""
        for p in (self.log, self.stderr.name):
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out += f.read()
        return out

    def stats(self):
        status, body = get(self.url + "/stats")
        assert status == 200, body
        return json.loads(body)

    def stop(self, sig=signal.SIGTERM, timeout=15):
        """Signals the agent; returns its exit status and how long it took."""
        t0 = time.time()
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=timeout)
        self.stderr.close()
        return rc, time.time() - t0

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.stderr.closed:
            self.stderr.close()


@pytest.fixture
def agents(taipan, tmp_path):
    started = []

    def start(*args, **kw):
        a = Agent(taipan, tmp_path, *args, **kw)
        started.append(a)
        return a

    yield start
    # Every agent ends the way a service manager ends it, cleanly: under
    # ASan and UBSan that also checks it for leaks and undefined behaviour.
    for a in started:
        if a.proc.poll() is None:
            rc, _ = a.stop()
            assert rc == 0, a.logs()
        a.kill()
        logs = a.logs()
        assert "Sanitizer" not in logs and "runtime error" not in logs, logs


class Receiver:
    """A Pyroscope stand-in on 127.0.0.1: records every POST /ingest (time,
    query, multipart parts) and answers with the next of statuses, then 200."""

    def __init__(self, port=0, statuses=()):
        self.pushes = []
        self.statuses = list(statuses)
        self.lock = threading.Lock()
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(min(n, 64 << 20))
                url = urllib.parse.urlsplit(self.path)
                ctype = self.headers.get("Content-Type", "")
                parts = {}
                if ctype.startswith("multipart/form-data"):
                    msg = BytesParser(policy=policy.HTTP).parsebytes(
                        b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
                    for part in msg.iter_parts():
                        parts[part.get_param("name", header="content-disposition")] = (
                            part.get_filename(), part.get_content_type(),
                            part.get_payload(decode=True))
                with rec.lock:
                    status = rec.statuses.pop(0) if rec.statuses else 200
                    rec.pushes.append(dict(time=time.time(), path=url.path, status=status,
                                           query=dict(urllib.parse.parse_qsl(url.query)),
                                           ctype=ctype, parts=parts))
                reply = b"ok\n" if status == 200 else b"ingester unhappy\n"
                self.send_response(status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def taken(self):
        with self.lock:
            return [p for p in self.pushes if p["status"] == 200]

    def all(self):
        with self.lock:
            return list(self.pushes)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receivers():
    made = []

    def make(**kw):
        r = Receiver(**kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def expected_name(app):
    return "%s{hostname=%s}" % (app, re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()))


def check_push(push, tmp_path, app="taipan", functions=(INNER, "Worker.run")):
    """One push as Pyroscope's ingest API documents it, its pprof read by go tool pprof."""
    q = push["query"]
    assert push["path"] == "/ingest", push
    assert q["name"] == expected_name(app), q
    assert q["format"] == "pprof" and q["spyName"] == "taipan" and q["sampleRate"] == "100", q
    assert 0 < int(q["until"]) - int(q["from"]) <= 40, q
    assert abs(int(q["until"]) - time.time()) < 120, q
    assert push["ctype"].startswith("multipart/form-data; boundary="), push["ctype"]
    fname, ptype, profile = push["parts"]["profile"]
    assert fname and ptype == "application/octet-stream"
    config = json.loads(push["parts"]["sample_type_config"][2])
    assert config["samples"]["units"] == "samples" and config["samples"]["sampled"] is True
    path = tmp_path / ("push-%s-%s.pb.gz" % (q["from"], q["until"]))
    path.write_bytes(profile)
    raw = go_pprof("-raw", path)
    for f in functions:
        assert f in raw, raw[:2000]
    return raw


# --- the command line ---------------------------------------------------------------

def test_help_explains_every_option(taipan):
    for argv in (["help", "agent"], ["agent", "--help"]):
        res = subprocess.run([taipan] + argv, stdout=subprocess.PIPE, text=True, timeout=10)
        assert res.returncode == 0
        for opt in ["--listen", "--push", "--window", "--rate", "--app", "--comm", "--cgroup",
                    "--backlog", "--no-kernel", "--log", "--stats", "--verbose", "examples:",
                    "/debug/pprof/profile?seconds=", "/stats", "/healthz", "SIGHUP", "SIGTERM"]:
            assert opt in res.stdout, opt
    res = subprocess.run([taipan, "help"], stdout=subprocess.PIPE, text=True, timeout=10)
    assert "agent" in res.stdout


@pytest.mark.parametrize("args,msg", [
    (["--listen", "9100"], "--listen wants"),
    (["--listen", "example.com:80"], "--listen wants"),
    (["--window", "0"], "--window wants"),
    (["--window", "x"], "--window wants"),
    (["--rate", "0"], "--rate"),
    (["--app", "my app"], "--app wants"),
    (["--push", "ftp://127.0.0.1"], "--push wants"),
    (["--push", "http://127.0.0.1:4040/?x=1"], "--push wants"),
    (["--backlog", "0"], "--backlog wants"),
    (["leftover"], "takes no arguments"),
])
def test_usage_errors(taipan, args, msg):
    res = subprocess.run([taipan, "agent"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=10)
    assert res.returncode == 2, res.stderr
    assert msg in res.stderr


def test_port_in_use(taipan, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        res = subprocess.run([taipan, "agent", "--listen", "127.0.0.1:%d" % port],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert res.returncode == 1
    assert "cannot listen on 127.0.0.1:%d: Address already in use" % port in res.stderr


# --- HTTP -------------------------------------------------------------------------

def test_profile_over_http_read_by_go_pprof(agents, workload, tmp_path):
    w = workload(pyenv("pyenv-3.12"), "chain.py", 60)
    a = agents()
    t0 = time.time()
    raw = go_pprof("-raw", a.url + "/debug/pprof/profile?seconds=3")
    took = time.time() - t0
    assert 2.9 <= took < 30, took
    for f in (INNER, "Worker.run", "main", "<module>"):
        assert f in raw, raw[:2000]
    # Every process, told apart by labels: the workload's pid is one.
    assert "pid:[%d]" % w.pid in raw
    # go tool pprof's own view: the busy function carries the workload's samples.
    top = go_pprof("-top", "-tagfocus=pid=^%d$" % w.pid, a.url + "/debug/pprof/profile?seconds=2")
    flat = [l for l in top.splitlines() if l.rstrip().endswith(INNER)]
    shown = re.search(r"Showing nodes accounting for ([\d.]+)(m?s)", top)
    assert flat and shown, top
    secs = lambda v: float(re.sub(r"m?s$", "", v)) / (1000 if v.endswith("ms") else 1)
    # All of the workload's samples are in inner (kernel frames of interrupts
    # that landed on it sit on top of it), about a CPU's worth.
    assert secs(flat[0].split()[3]) == secs(shown.group(1) + shown.group(2)), top
    assert secs(flat[0].split()[3]) >= 0.5, top

    st = a.stats()
    assert st["samples"] > 100 and st["lost_samples"] >= 0
    assert st["processes_tracked"] >= 1 and st["processes_seen"] >= st["processes_tracked"]
    assert st["profile_requests_served"] == 2 and st["profile_requests_refused"] == 0
    assert st["windows"] >= 2 and st["window_seconds"] == 2 and st["rate_hz"] == 100
    assert 4.5 < st["uptime_seconds"] < 120
    assert st["push_enabled"] is False and st["windows_pushed"] == 0
    later = wait_for(lambda: (lambda s: s if s["samples"] > st["samples"] else None)(a.stats()),
                     5, "samples to grow")
    assert later["uptime_seconds"] > st["uptime_seconds"]


def test_concurrent_requests_and_sampling_goes_on(agents, workload):
    workload(pyenv("pyenv-3.12"), "chain.py", 60)
    a = agents()
    results = {}

    def fetch(i, seconds):
        results[i] = get(a.url + "/debug/pprof/profile?seconds=%d" % seconds, timeout=30)

    threads = [threading.Thread(target=fetch, args=(i, 2 + i % 2)) for i in range(4)]
    for t in threads:
        t.start()
    # While they wait, samples keep arriving and the other endpoints answer.
    s1 = a.stats()
    time.sleep(1)
    s2 = a.stats()
    assert s2["samples"] > s1["samples"]
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 4
    for status, body in results.values():
        assert status == 200
        assert INNER.encode() in pprof_strings(body)


def test_bad_requests_and_limits(agents):
    a = agents()
    assert get(a.url + "/nope")[0] == 404
    assert get(a.url + "/debug/pprof/")[0] == 404
    status, _ = get(a.url + "/stats", method="POST")
    assert status == 405
    assert get(a.url + "/debug/pprof/profile?seconds=1", method="DELETE")[0] == 405
    for bad in ("0", "301", "abc", "1.5", "-3"):
        status, body = get(a.url + "/debug/pprof/profile?seconds=" + bad)
        assert status == 400 and b"seconds" in body, (bad, status, body)
    # Headers past the connection's memory: refused, and the agent lives on.
    try:
        status, _ = get(a.url + "/stats", headers={"X-Big": "x" * 40000})
        assert 400 <= status < 500
    except (ConnectionError, OSError):
        pass
    many = {"X-H%d" % i: "v" * 100 for i in range(400)}
    try:
        status, _ = get(a.url + "/stats", headers=many)
        assert 400 <= status < 500
    except (ConnectionError, OSError):
        pass
    # At most 8 profile requests wait at once; the 9th is told to come back.
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        get(a.url + "/debug/pprof/profile?seconds=4", timeout=30)[0])) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    status, body = get(a.url + "/debug/pprof/profile?seconds=1")
    assert status == 503 and b"too many" in body
    for t in threads:
        t.join(timeout=30)
    assert results == [200] * 8
    st = a.stats()
    assert st["profile_requests_served"] == 8 and st["profile_requests_refused"] >= 6
    assert get(a.url + "/healthz") == (200, b"ok\n")


# --- pushes -------------------------------------------------------------------------

def test_push_to_receiver(agents, receivers, workload, tmp_path):
    workload(pyenv("pyenv-3.12"), "chain.py", 60)
    rec = receivers()
    a = agents("--push", rec.url, "--app", "checkout-svc")
    wait_for(lambda: len(rec.taken()) >= 2, 30, "two pushes")
    pushes = rec.taken()
    for p in pushes[:2]:
        check_push(p, tmp_path, app="checkout-svc")
    # Windows follow each other.
    q0, q1 = pushes[0]["query"], pushes[1]["query"]
    assert int(q0["until"]) <= int(q1["from"]) + 1
    st = wait_for(lambda: (lambda s: s if s["windows_pushed"] >= 2 else None)(a.stats()), 5,
                  "the pushes counted")
    assert st["push_enabled"] is True
    assert st["push_failures"] == 0 and st["dropped_windows"] == 0
    assert "pushing each window to %s/ingest as %s" % (rec.url, expected_name("checkout-svc")) in a.logs()


def test_push_retries_with_backoff(agents, receivers, workload, tmp_path):
    workload(pyenv("pyenv-3.12"), "chain.py", 60)
    rec = receivers(statuses=[500, 500, 500])
    a = agents("--push", rec.url)
    wait_for(lambda: rec.taken(), 30, "a push after three failures")
    tries = rec.all()
    first = tries[0]["query"]
    same = [t for t in tries if t["query"]["from"] == first["from"] and t["query"]["until"] == first["until"]]
    # The same window, tried four times, the waits growing: 1, 2, 4 s with ±25% jitter.
    assert [t["status"] for t in same] == [500, 500, 500, 200], [t["status"] for t in tries]
    gaps = [b["time"] - a_["time"] for a_, b in zip(same, same[1:])]
    assert 0.6 <= gaps[0] <= 2.0, gaps
    assert 1.3 <= gaps[1] <= 3.5 and gaps[1] > gaps[0], gaps
    assert 2.8 <= gaps[2] <= 6.5 and gaps[2] > gaps[1], gaps
    check_push(same[-1], tmp_path)
    logs = a.logs()
    assert re.search(r"push of window \d+-\d+ failed \(try 1 of 6\): HTTP 500: ingester unhappy; "
                     r"retrying in \d+\.\d s", logs), logs
    # The windows that waited meanwhile follow.
    st = wait_for(lambda: (lambda s: s if s["windows_pushed"] >= 3 else None)(a.stats()), 20,
                  "the queued windows")
    assert st["push_failures"] == 3 and st["dropped_windows"] == 0


def test_push_backlog_drops_windows_when_down(agents, receivers, workload, tmp_path):
    workload(pyenv("pyenv-3.12"), "chain.py", 60)
    port = free_port()  # nothing listens there yet: connection refused
    a = agents("--push", "http://127.0.0.1:%d" % port, "--backlog", "1", window=1)
    st = wait_for(lambda: (lambda s: s if s["dropped_windows"] >= 2 else None)(a.stats()), 20,
                  "dropped windows")
    assert st["push_failures"] >= 1 and st["push_backlog"] <= 2 and st["windows_pushed"] == 0
    logs = a.logs()
    assert "push backlog full (1 window): dropped window" in logs, logs
    assert re.search(r"failed \(try 1 of 6\): Couldn't connect to server", logs), logs
    # The server comes back: the window in hand and the newest go through.
    rec = receivers(port=port)
    wait_for(lambda: a.stats()["windows_pushed"] >= 2, 30, "pushes once the server is up")
    check_push(rec.taken()[-1], tmp_path)


# --- signals ------------------------------------------------------------------------

def test_sigterm_flushes_and_exits_0(agents, receivers, workload, tmp_path):
    w = workload(pyenv("pyenv-3.12"), "chain.py", 60)
    rec = receivers()
    a = agents("--push", rec.url, "--stats", window=60)
    answer = {}

    def fetch():
        answer["r"] = get(a.url + "/debug/pprof/profile?seconds=60", timeout=30)

    t = threading.Thread(target=fetch)
    t.start()
    time.sleep(3)
    assert not rec.all()  # the window is far from over
    rc, took = a.stop(signal.SIGTERM)
    assert rc == 0 and took < 6, (rc, took, a.logs())
    t.join(timeout=10)
    # The waiting request got what there was: about 3 s of the workload.
    status, body = answer["r"]
    assert status == 200
    path = tmp_path / "flushed.pb.gz"
    path.write_bytes(body)
    raw = go_pprof("-raw", path)
    assert INNER in raw and "pid:[%d]" % w.pid in raw
    # The partial window was pushed.
    pushes = rec.taken()
    assert len(pushes) == 1
    q = pushes[0]["query"]
    assert 2 <= int(q["until"]) - int(q["from"]) <= 6, q
    check_push(pushes[0], tmp_path)
    logs = a.logs()
    assert re.search(r"stats: \d+ windows \(0 empty\), 1 pushed, 0 push failures, 0 dropped; "
                     r"1 profile requests served", logs), logs
    assert "exiting on SIGTERM" in logs
    # Every line of the agent's own is timestamped.
    for line in open(a.log):
        if "taipan: " in line and not line.startswith("taipan: "):
            assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z taipan: ", line), line


def test_sigint_exits_0(agents):
    a = agents()
    rc, took = a.stop(signal.SIGINT)
    assert rc == 0 and took < 6
    assert "exiting on SIGINT" in a.logs()


def test_sighup_reopens_log(agents, tmp_path):
    a = agents()
    rotated = tmp_path / "agent.log.1"
    os.rename(a.log, rotated)
    a.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: a.log.exists() and "reopened the log file" in a.log.read_text(), 10,
             "a line in the new log file")
    assert get(a.url + "/healthz") == (200, b"ok\n")  # still serving
    rc, _ = a.stop()
    assert rc == 0
    old, new = rotated.read_text(), a.log.read_text()
    assert "agent started" in old and "listening on http://127.0.0.1:%d" % a.port in old
    assert "reopened" not in old and "exiting" not in old
    assert "SIGHUP: reopened the log file" in new and "exiting on SIGTERM" in new


# --- installation -------------------------------------------------------------------

def test_install_puts_the_unit_in_place(taipan, tmp_path):
    require(shutil.which("make"), "make")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build = os.path.dirname(os.path.abspath(taipan))
    res = subprocess.run(["make", "-s", "-C", root, "install", "BUILD=" + build, "-o", taipan,
                          "PREFIX=/usr", "DESTDIR=%s" % tmp_path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    unit = tmp_path / "usr/lib/systemd/system/taipan-agent.service"
    assert os.stat(unit).st_mode & 0o777 == 0o644
    text = unit.read_text()
    for line in ["Type=simple", "Restart=on-failure", "ExecStart=/usr/local/bin/taipan agent",
                 "CapabilityBoundingSet=CAP_BPF CAP_PERFMON CAP_SYS_PTRACE CAP_DAC_READ_SEARCH "
                 "CAP_SYSLOG", "NoNewPrivileges=yes", "WantedBy=multi-user.target"]:
        assert line in text, line
    # systemd's own check, where systemd is installed, of the unit pointing at
    # the binary under test.
    analyze = shutil.which("systemd-analyze")
    if analyze:
        copy = tmp_path / "taipan-agent.service"
        copy.write_text(text.replace("/usr/local/bin/taipan", taipan).replace(
            "Documentation=man:taipan(1)\n", ""))
        res = subprocess.run([analyze, "verify", str(copy)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, timeout=60)
        assert res.returncode == 0 and not res.stderr.strip(), res.stderr
