"""taipan agent: pprof over HTTP (read by go tool pprof), /stats, pushes to a
Pyroscope-style receiver (checked part by part and read by go tool pprof),
retries with backoff, dropped windows, SIGTERM's flush and SIGHUP's log
reopening; who may connect (the root-only Unix socket, --allow-uid, the
bearer token on TCP) and what a client cannot do (hold a slot after leaving,
trickle a request head, flood the log, hang it with query parameters).
Everything listens on 127.0.0.1 or a Unix socket, and every wait is bounded."""

import base64
import errno
import gzip
import http.client
import http.server
import json
import os
import pwd
import re
import secrets
import select
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from email import policy
from email.parser import BytesParser

import pytest

from conftest import ATTACKER as ATTACKER_NAME
from conftest import as_user, cpu_seconds, go_pprof, interpreter, pyenv, require

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


DEFAULT_SOCKET = "/run/taipan/agent.sock"


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def write_token(tmp_path):
    path = tmp_path / "token"
    path.write_text(secrets.token_hex(20) + "\n")
    os.chmod(path, 0o600)
    return path


def socket_alive(path):
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(path)
            return True
        except OSError:
            return False


class Agent:
    """An agent on TCP with a bearer token (tcp=True), or on the Unix socket
    `sock` (None: the default one)."""

    def __init__(self, taipan, tmp_path, *args, window=2, tcp=True, sock=None, env=None):
        self.tcp = tcp
        self.log = tmp_path / "agent.log"
        self.stderr = open(tmp_path / "agent.stderr", "wb")
        where = []
        if tcp:
            self.port = free_port()
            self.url = "http://127.0.0.1:%d" % self.port
            self.token_file = write_token(tmp_path)
            self.token = self.token_file.read_text().strip()
            where = ["--listen", "127.0.0.1:%d" % self.port, "--auth-token-file", self.token_file]
        else:
            self.sock = str(sock or DEFAULT_SOCKET)
            self.token = None
            if sock:
                where = ["--socket", self.sock]
        self.proc = subprocess.Popen(
            [taipan, "agent", "--window", str(window), "--log", str(self.log)] + where +
            [str(a) for a in args], stdout=subprocess.DEVNULL, stderr=self.stderr, env=env)
        try:
            wait_for(self._healthy, 30, "the agent's /healthz")
        except AssertionError:
            self.kill()
            raise AssertionError("agent did not come up:\n" + self.logs())

    def _healthy(self):
        if self.proc.poll() is not None:
            raise AssertionError("agent exited with %s:\n%s" % (self.proc.returncode, self.logs()))
        try:
            return self.get("/healthz", timeout=2) == (200, b"ok\n")
        except OSError:
            return False

    def connection(self, timeout=10, source=None):
        """source: the local address to connect from (TCP)."""
        if self.tcp:
            return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout,
                                              source_address=(source, 0) if source else None)
        return UnixHTTPConnection(self.sock, timeout)

    def get(self, path, timeout=10, method="GET", headers=None, token=True, source=None):
        """(status, body bytes) of one request, with the token unless told not to."""
        headers = dict(headers or {})
        if token and self.token:
            headers["Authorization"] = "Bearer " + self.token
        conn = self.connection(timeout, source)
        try:
            conn.request(method, path, headers=headers)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def fetch(self, path, out, timeout=30):
        """A profile saved to out, for go tool pprof (which cannot send the token)."""
        status, body = self.get(path, timeout=timeout)
        assert status == 200, (status, body)
        out.write_bytes(body)
        return out

    def raw(self):
        """A plain socket connected to the agent."""
        if self.tcp:
            return socket.create_connection(("127.0.0.1", self.port), timeout=10)
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(self.sock)
        return s

    def logs(self):
        out = ""
        for p in (self.log, self.stderr.name):
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out += f.read()
        return out

    def stats(self):
        status, body = self.get("/stats")
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
                                           ctype=ctype, parts=parts,
                                           auth=self.headers.get("Authorization")))
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
                    "--socket", "--allow-uid", "--auth-token-file", DEFAULT_SOCKET,
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
    (["--listen", "127.0.0.1:0"], "--listen (TCP) needs --auth-token-file FILE"),
    (["--listen", "127.0.0.1:0", "--socket", "/tmp/x.sock"], "exclude each other"),
    (["--listen", "127.0.0.1:0", "--auth-token-file", "TOKEN", "--allow-uid", "1"],
     "--allow-uid is for the Unix socket"),
    (["--allow-uid", "nobody"], "--allow-uid wants numeric uids"),
    (["--allow-uid", "1,,2"], "--allow-uid wants numeric uids"),
    (["--socket", ""], "--socket wants a path"),
])
def test_usage_errors(taipan, args, msg, tmp_path):
    args = [str(write_token(tmp_path)) if a == "TOKEN" else a for a in args]
    res = subprocess.run([taipan, "agent"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=10)
    assert res.returncode == 2, res.stderr
    assert msg in res.stderr


@pytest.mark.parametrize("content,mode,msg", [
    ("short\n", 0o600, "must hold one token of 16 to 1024"),
    ("a token with spaces in it\n", 0o600, "must hold one token"),
    (secrets.token_hex(20), 0o644, "by its group or by others (mode 0644): chmod 600"),
    (secrets.token_hex(20), 0o640, "by its group or by others (mode 0640): chmod 600"),
    (None, 0o600, "--auth-token-file: cannot open"),
])
def test_bad_token_files(taipan, tmp_path, content, mode, msg):
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
        os.chmod(path, mode)
    res = subprocess.run([taipan, "agent", "--listen", "127.0.0.1:0", "--auth-token-file", path],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=10)
    assert res.returncode == 2, res.stderr
    assert msg in res.stderr, res.stderr



# --- files a local user may have put in the agent's way ------------------------------

@pytest.fixture
def user_dir(attacker):
    """A directory the attacking user owns (its home, a shared spool), where
    an administrator might point --log or --auth-token-file."""
    d = tempfile.mkdtemp(prefix="taipan-test-user-", dir="/tmp")
    os.chown(d, attacker.pw_uid, attacker.pw_gid)
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def as_attacker(attacker, argv):
    """Runs argv as the attacking user; it must succeed."""
    res = subprocess.run(as_user(attacker, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout


def agent_refuses(taipan, args, run_dir, timeout=20):
    """The agent started with args on a socket of its own: (its stderr, how
    long it took to refuse); it must exit 1 or 2 at once."""
    where = [] if "--listen" in args else ["--socket", os.path.join(run_dir, "agent.sock")]
    t0 = time.time()
    res = subprocess.run([taipan, "agent"] + where + [str(a) for a in args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=timeout)
    assert res.returncode in (1, 2), res.stderr
    return res.stderr, time.time() - t0


def test_log_through_a_symlink_is_refused(taipan, attacker, user_dir, run_dir, tmp_path):
    """The attacker links the agent's --log to a file of root's: the agent
    refuses it and leaves that file as it was."""
    precious = tmp_path / "precious"
    precious.write_text("root's own\n")
    before = os.stat(precious)
    log = os.path.join(user_dir, "agent.log")
    as_attacker(attacker, ["ln", "-s", precious, log])
    err, _ = agent_refuses(taipan, ["--log", log], run_dir)
    assert "--log: %s is a symbolic link: give the path of the file itself" % log in err, err
    after = os.stat(precious)
    assert precious.read_text() == "root's own\n"
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    # A link the agent's own user made is refused the same way: the path
    # itself must be the file.
    os.unlink(log)
    os.symlink(precious, log)
    err, _ = agent_refuses(taipan, ["--log", log], run_dir)
    assert "is a symbolic link" in err, err
    assert precious.read_text() == "root's own\n"


def test_log_of_another_user_is_refused(taipan, attacker, user_dir, run_dir):
    log = os.path.join(user_dir, "agent.log")
    as_attacker(attacker, ["touch", log])
    err, _ = agent_refuses(taipan, ["--log", log], run_dir)
    assert "--log: %s is owned by uid %d, not by root: that user could read and rewrite the " \
           "log; chown root %s" % (log, attacker.pw_uid, log) in err, err
    assert os.path.getsize(log) == 0
    # Another name of a file of root's (a hard link) is refused too.
    os.unlink(log)
    other = os.path.join(user_dir, "other")
    open(other, "w").close()
    os.link(other, log)
    err, _ = agent_refuses(taipan, ["--log", log], run_dir)
    assert "has 2 hard links" in err, err


def test_token_file_group_readable_is_refused(taipan, run_dir, tmp_path):
    token = write_token(tmp_path)
    os.chmod(token, 0o640)
    err, _ = agent_refuses(taipan, ["--listen", "127.0.0.1:0", "--auth-token-file", token], run_dir)
    assert "--auth-token-file: %s may be read or written by its group or by others (mode 0640): " \
           "chmod 600 %s" % (token, token) in err, err


def test_token_file_of_another_user_is_refused(taipan, attacker, user_dir, run_dir):
    token = os.path.join(user_dir, "token")
    as_attacker(attacker, ["sh", "-c", "umask 077; echo %s > %s" % (secrets.token_hex(20), token)])
    assert stat.S_IMODE(os.stat(token).st_mode) == 0o600
    err, _ = agent_refuses(taipan, ["--listen", "127.0.0.1:0", "--auth-token-file", token], run_dir)
    assert "--auth-token-file: %s is owned by uid %d, not by root: that user could read or change " \
           "it; chown root %s" % (token, attacker.pw_uid, token) in err, err


def test_token_file_fifo_is_refused_at_once(taipan, attacker, user_dir, run_dir):
    """A FIFO where the token should be would hang the start (an open for
    reading waits for a writer): refused at once."""
    token = os.path.join(user_dir, "token")
    as_attacker(attacker, ["mkfifo", "-m", "600", token])
    err, took = agent_refuses(taipan, ["--listen", "127.0.0.1:0", "--auth-token-file", token],
                              run_dir, timeout=10)
    assert took < 5, took
    assert "--auth-token-file: %s is a FIFO: give a regular file" % token in err, err
    # root's own FIFO too.
    os.unlink(token)
    os.mkfifo(token, 0o600)
    err, took = agent_refuses(taipan, ["--listen", "127.0.0.1:0", "--auth-token-file", token],
                              run_dir, timeout=10)
    assert took < 5 and "is a FIFO" in err, err


def test_port_in_use(taipan, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        res = subprocess.run([taipan, "agent", "--listen", "127.0.0.1:%d" % port,
                              "--auth-token-file", write_token(tmp_path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert res.returncode == 1
    assert "cannot listen on 127.0.0.1:%d: Address already in use" % port in res.stderr


# --- HTTP -------------------------------------------------------------------------

def test_profile_over_http_read_by_go_pprof(agents, workload, tmp_path):
    w = workload(pyenv("pyenv-3.12"), "chain.py", 60)
    a = agents()
    t0 = time.time()
    raw = go_pprof("-raw", a.fetch("/debug/pprof/profile?seconds=3", tmp_path / "p3.pb.gz"))
    took = time.time() - t0
    assert 2.9 <= took < 30, took
    for f in (INNER, "Worker.run", "main", "<module>"):
        assert f in raw, raw[:2000]
    # Every process, told apart by labels: the workload's pid is one.
    assert "pid:[%d]" % w.pid in raw
    # go tool pprof's own view: the busy function carries the workload's samples.
    top = go_pprof("-top", "-tagfocus=pid=^%d$" % w.pid,
                   a.fetch("/debug/pprof/profile?seconds=2", tmp_path / "p2.pb.gz"))
    flat = [l for l in top.splitlines() if l.rstrip().endswith(INNER)]
    # The profile's total, not "Showing nodes accounting for", which leaves
    # out the nodes pprof drops as too small (one of 0.01 s, once).
    shown = re.search(r"% of ([\d.]+)(m?s) total", top)
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
        results[i] = a.get("/debug/pprof/profile?seconds=%d" % seconds, timeout=30)

    threads = [threading.Thread(target=fetch, args=(i, 2 + i % 2)) for i in range(4)]
    for t in threads:
        t.start()
    # While they wait, samples keep arriving and the other endpoints answer.
    s1 = a.stats()
    wait_for(lambda: a.stats()["samples"] > s1["samples"], 10, "samples while requests wait")
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 4
    for status, body in results.values():
        assert status == 200
        assert INNER.encode() in pprof_strings(body)


def test_bad_requests_and_limits(agents):
    a = agents()
    assert a.get("/nope")[0] == 404
    assert a.get("/debug/pprof/")[0] == 404
    status, _ = a.get("/stats", method="POST")
    assert status == 405
    assert a.get("/debug/pprof/profile?seconds=1", method="DELETE")[0] == 405
    for bad in ("0", "301", "abc", "1.5", "-3"):
        status, body = a.get("/debug/pprof/profile?seconds=" + bad)
        assert status == 400 and b"seconds" in body, (bad, status, body)
    # Headers past the connection's memory: refused, and the agent lives on.
    try:
        status, _ = a.get("/stats", headers={"X-Big": "x" * 40000})
        assert 400 <= status < 500
    except (ConnectionError, OSError):
        pass
    many = {"X-H%d" % i: "v" * 100 for i in range(400)}
    try:
        status, _ = a.get("/stats", headers=many)
        assert 400 <= status < 500
    except (ConnectionError, OSError):
        pass
    # At most 8 profile requests wait at once; the 9th is told to come back.
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        a.get("/debug/pprof/profile?seconds=4", timeout=30)[0])) for _ in range(8)]
    for t in threads:
        t.start()
    wait_for(lambda: a.stats()["profile_requests_waiting"] == 8, 10, "eight waiting requests")
    status, body = a.get("/debug/pprof/profile?seconds=1")
    assert status == 503 and b"too many" in body
    for t in threads:
        t.join(timeout=30)
    assert results == [200] * 8
    st = a.stats()
    assert st["profile_requests_served"] == 8 and st["profile_requests_refused"] >= 6
    assert a.get("/healthz") == (200, b"ok\n")


# --- who may connect ------------------------------------------------------------------

NOBODY_CLIENT = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect: %d" % e.errno)
    sys.exit(0)
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
data = b""
while True:
    d = s.recv(4096)
    if not d:
        break
    data += d
print(data.split(b"\r\n")[0].decode())
"""


def as_nobody(path):
    """What user nobody gets from the agent's Unix socket at path: "connect:
    ERRNO" or the status line."""
    require(shutil.which("setpriv"), "setpriv (util-linux)")
    res = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                          "/usr/bin/python3", "-c", NOBODY_CLIENT, path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


@pytest.fixture
def run_dir():
    """A directory under /run that user nobody may enter, as /run/taipan."""
    d = tempfile.mkdtemp(prefix="taipan-test-", dir="/run")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_default_unix_socket_is_root_only(taipan, agents):
    if socket_alive(DEFAULT_SOCKET):
        pytest.skip("another agent serves " + DEFAULT_SOCKET)
    a = agents(tcp=False)
    st = os.lstat(DEFAULT_SOCKET)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0
    d = os.lstat(os.path.dirname(DEFAULT_SOCKET))
    assert stat.S_ISDIR(d.st_mode) and d.st_uid == 0 and not d.st_mode & 0o022
    assert a.get("/healthz") == (200, b"ok\n")
    assert as_nobody(DEFAULT_SOCKET) == "connect: %d" % errno.EACCES
    assert "listening on unix:%s (" % DEFAULT_SOCKET in a.logs() and "for root only" in a.logs()
    # A second agent leaves the first one's socket alone.
    res = subprocess.run([taipan, "agent"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=60)
    assert res.returncode == 1
    assert "cannot listen on %s: another agent is serving there" % DEFAULT_SOCKET in res.stderr
    assert a.get("/healthz") == (200, b"ok\n")
    rc, _ = a.stop()
    assert rc == 0 and not os.path.exists(DEFAULT_SOCKET)


def test_allow_uid_lets_that_user_in(agents, run_dir, tmp_path):
    nobody = pwd.getpwnam("nobody").pw_uid
    sock = os.path.join(run_dir, "agent.sock")
    a = agents("--allow-uid", "4242,%d" % nobody, tcp=False, sock=sock)
    # Anyone may connect; the uid decides.
    assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o666
    assert as_nobody(sock) == "HTTP/1.1 200 OK"
    assert a.get("/healthz") == (200, b"ok\n")  # root always
    a.proc.kill()  # its socket stays behind
    a.proc.wait()
    assert os.path.exists(sock)
    b = agents("--allow-uid", "4242", tcp=False, sock=sock)  # takes the stale socket's place
    assert as_nobody(sock) == "HTTP/1.1 403 Forbidden"
    assert b.stats()["requests_denied"] == 1
    assert "refused a connection from uid %d: not allowed (--allow-uid)" % nobody in b.logs()
    # A directory others may write is refused: they could swap the socket.
    os.chmod(run_dir, 0o777)
    res = subprocess.run([b.proc.args[0], "agent", "--socket", os.path.join(run_dir, "x.sock")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    os.chmod(run_dir, 0o755)
    assert res.returncode == 1
    assert "must be a directory of root's that only it may write (it is mode 0777" in res.stderr


def test_tcp_wants_the_token(agents, workload, tmp_path):
    w = workload(pyenv("pyenv-3.12"), "chain.py", 60)
    a = agents()
    for path in ("/healthz", "/stats", "/debug/pprof/profile?seconds=1", "/nope"):
        status, body = a.get(path, token=False)
        assert status == 401 and b"Authorization: Bearer" in body, (path, status, body)
    conn = a.connection()
    conn.request("GET", "/healthz", headers={"Authorization": "Bearer " + "0" * len(a.token)})
    r = conn.getresponse()
    assert r.status == 401 and r.getheader("WWW-Authenticate") == 'Bearer realm="taipan"'
    conn.close()
    assert a.get("/healthz", token=False, headers={"Authorization": "Basic " + a.token})[0] == 401
    assert a.get("/healthz", token=False, headers={"Authorization": "bearer " + a.token}) == \
        (200, b"ok\n")
    raw = go_pprof("-raw", a.fetch("/debug/pprof/profile?seconds=2", tmp_path / "p.pb.gz"))
    assert INNER in raw and "pid:[%d]" % w.pid in raw
    st = a.stats()
    assert st["requests_denied"] == 6 and st["profile_requests_served"] == 1


# --- what a client cannot do -----------------------------------------------------------

def test_abandoned_requests_free_their_slots(agents, workload, tmp_path):
    workload(pyenv("pyenv-3.12"), "chain.py", 60)
    a = agents()
    req = ("GET /debug/pprof/profile?seconds=300 HTTP/1.1\r\nHost: x\r\n"
           "Authorization: Bearer %s\r\n\r\n" % a.token).encode()
    clients = []
    for _ in range(8):
        s = a.raw()
        s.sendall(req)
        clients.append(s)
    wait_for(lambda: a.stats()["profile_requests_waiting"] == 8, 10, "eight waiting requests")
    status, body = a.get("/debug/pprof/profile?seconds=1")
    assert status == 503 and b"too many" in body
    # The clients give up: their slots are free at once, not in 300 s.
    t0 = time.time()
    for s in clients:
        s.close()
    st = wait_for(lambda: (lambda s: s if s["profile_requests_waiting"] == 0 else None)(a.stats()),
                  5, "the slots freed")
    assert time.time() - t0 < 5 and st["profile_requests_abandoned"] == 8
    path = a.fetch("/debug/pprof/profile?seconds=1", tmp_path / "ninth.pb.gz")
    assert INNER in go_pprof("-raw", path)
    assert time.time() - t0 < 15


def test_trickling_client_is_cut_at_the_head_deadline(agents):
    a = agents()
    s = a.raw()
    t0 = time.time()
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
    closed = None
    # One byte every 0.25 s: each byte would reset an idle timeout.
    for byte in head:
        readable, _, _ = select.select([s], [], [], 0.25)
        try:
            if readable and not s.recv(100):
                closed = time.time() - t0
                break
            s.send(bytes([byte]))
        except OSError:
            closed = time.time() - t0
            break
        if time.time() - t0 > 25:
            break
    s.close()
    assert closed is not None and 9.5 <= closed < 15, closed
    assert a.stats()["connections_cut"] == 1
    # The count is taken under the server's lock; the line is written after
    # it, so a loaded machine can answer the stats first.
    wait_for(lambda: "closed 1 connection that sent no complete request within 10 s" in a.logs(),
             10, "the deadline's log line")
    assert a.get("/healthz") == (200, b"ok\n")


def refusals_logged(logs, what):
    """How many refusals of a kind the log lines tell of, and in how many lines."""
    told, lines = 0, 0
    for line in logs.splitlines():
        if not line.endswith(what):
            continue
        lines += 1
        m = re.search(r"taipan: (\d+) more like this in the last \d+ s: ", line)
        told += int(m.group(1)) if m else 1
    return told, lines


def test_refusals_are_logged_at_a_bounded_rate(agents):
    a = agents()
    held = [a.raw() for _ in range(16)]  # the limit per address
    # Refused while the held ones are open, which the head deadline (10 s
    # from their accept) would close: up to 1000 of them, in 6 s at most
    # (a loaded host does fewer).
    deadline = time.time() + 6
    n = 0
    while n < 1000 and time.time() < deadline:
        s = a.raw()
        try:
            assert s.recv(100) == b""  # refused
        except ConnectionResetError:
            pass
        s.close()
        n += 1
    for s in held:
        s.close()
    assert n >= 100, "only %d connections refused in 6 s" % n

    refused = [0]

    def healthy():
        # Until the server has seen the held ones close, it still refuses,
        # and counts that refusal too.
        try:
            return a.get("/healthz")[0] == 200
        except ConnectionError:
            refused[0] += 1
            return False
    wait_for(healthy, 10, "connections again")
    for _ in range(1000):
        assert a.get("/healthz", token=False)[0] == 401
    limit = "refused a connection from 127.0.0.1: it has 16 open, the most one address may have"
    token = "refused a request without the bearer token (--auth-token-file)"
    # Every refusal is told of, in a few lines: the rest follow as counts.
    wait_for(lambda: refusals_logged(a.logs(), limit)[0] == n + refused[0] and
             refusals_logged(a.logs(), token)[0] == 1000, 20, "the counts logged")
    logs = a.logs()
    assert refusals_logged(logs, limit)[1] <= 6 and refusals_logged(logs, token)[1] <= 6, logs
    assert len(logs.splitlines()) < 20, logs
    assert a.stats()["requests_denied"] == 1000


# --- what another local user cannot do -------------------------------------------------

# Holds COUNT connections to TARGET (a Unix socket's path, or HOST:PORT
# from the source addresses SOURCES in turn) and opens a new one for each
# that the agent closes, 5 rounds a second, for SECONDS; sends nothing.
ATTACKER_CLIENT = r"""
import select, socket, sys, time
target, count, sources, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), float(sys.argv[4])

def connect(i):
    if target.startswith("/"):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(1)
        s.connect(target)
    else:
        host, port = target.rsplit(":", 1)
        s = socket.socket()
        s.settimeout(1)
        s.bind((sources[i % len(sources)], 0))
        s.connect((host, int(port)))
    s.setblocking(False)
    return s

held, made, end, first = {}, 0, time.time() + seconds, True
while time.time() < end:
    round_end = time.time() + 0.2
    for i in range(count):
        if i not in held:
            try:
                held[i] = connect(i)
                made += 1
            except OSError:
                pass
    if first:
        print("ready %d" % len(held), flush=True)
        first = False
    readable, _, _ = select.select(list(held.values()), [], [], max(0, round_end - time.time()))
    time.sleep(max(0, round_end - time.time()))
    for s in readable:
        try:
            gone = not s.recv(4096)
        except BlockingIOError:
            gone = False
        except OSError:
            gone = True
        if gone:
            i = next(i for i, v in held.items() if v is s)
            s.close()
            del held[i]
print("made %d held %d" % (made, len(held)), flush=True)
"""


class Attack:
    """The attacking user holding connections to the agent (ATTACKER_CLIENT)."""

    def __init__(self, attacker, target, count, sources=("127.0.0.1",), seconds=60):
        require(shutil.which("setpriv"), "setpriv (util-linux)")
        self.proc = subprocess.Popen(
            as_user(attacker, ["/usr/bin/python3", "-c", ATTACKER_CLIENT, target, count,
                               ",".join(sources), seconds]),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("ready "), line + self.proc.stderr.read()
        self.first_held = int(line.split()[1])

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def attacks(attacker):
    made = []

    def start(*args, **kw):
        a = Attack(attacker, *args, **kw)
        made.append(a)
        return a

    yield start
    for a in made:
        a.stop()


# The attack tests profile no process (--comm names none): what they try
# is the HTTP side, and the session's own descriptors then stay as they are.
NO_TARGETS = ("--comm", "taipan-no-such-process")


def served(a, n=20, path="/healthz", timeout=5, **kw):
    """How many of n requests, one after another, were answered 200, and in
    how many seconds."""
    ok, t0 = 0, time.time()
    for _ in range(n):
        try:
            ok += a.get(path, timeout=timeout, **kw)[0] == 200
        except OSError:
            pass
    return ok, time.time() - t0


def test_refused_uid_holds_no_connection_slot(agents, attacks, run_dir):
    """A user who is not allowed holds 80 connections to the Unix socket
    (mode 0666 with --allow-uid), reopening each one closed: none of them
    takes a slot from the users who are allowed."""
    nobody = pwd.getpwnam("nobody").pw_uid
    sock = os.path.join(run_dir, "agent.sock")
    a = agents("--allow-uid", "4242,%d" % nobody, *NO_TARGETS, tcp=False, sock=sock)
    attack = attacks(sock, 80)
    time.sleep(1)
    ok, took = served(a)
    assert ok == 20 and took < 10, (ok, took, a.logs())
    ok, took = served(a, path="/stats")
    assert ok == 20 and took < 10, (ok, took)
    # The other allowed user too.
    assert as_nobody(sock) == "HTTP/1.1 200 OK"
    st = a.stats()
    assert st["connections_refused"] >= 80, st
    attack.stop()
    assert re.search(r"refused a connection from uid %d: not allowed \(--allow-uid\)" %
                     pwd.getpwnam(ATTACKER_NAME).pw_uid, a.logs()), a.logs()


@pytest.mark.parametrize("sources", [["127.0.0.1"], ["127.0.0.1", "127.0.0.3", "127.0.0.4", "127.0.0.5"]],
                         ids=["one-address", "four-addresses"])
def test_tokenless_connections_do_not_starve_the_token_holder(agents, attacks, sources):
    """64 connections without the token, from one loopback address or from
    four (a local user may bind any of 127/8), held and reopened: the token
    holder, from an address of its own, gets 20 answers of 20."""
    a = agents(*NO_TARGETS)
    attack = attacks("127.0.0.1:%d" % a.port, 64, sources)
    time.sleep(1)
    ok, took = served(a, source="127.0.0.2")
    assert ok == 20 and took < 10, (ok, took, a.logs())
    ok, took = served(a, path="/stats", source="127.0.0.2")
    assert ok == 20 and took < 10, (ok, took)
    # Until the server has seen the attacker's connections close, its
    # address is still at its limit: the counters are asked from another.
    attack.stop()
    st = json.loads(a.get("/stats", source="127.0.0.2")[1])
    if len(sources) > 1:
        # The table was full of them: room was made by closing idle ones.
        assert st["connections_evicted"] >= 1, st


def test_out_of_descriptors_backs_off_and_keeps_answering(agents, attacks, run_dir):
    """With every descriptor of the agent taken (its limit lowered to what
    it holds), accept() fails with EMFILE: the server thread backs off
    instead of spinning, idle connections give way, and /healthz answers."""
    require(shutil.which("prlimit"), "prlimit (util-linux)")
    sock = os.path.join(run_dir, "agent.sock")
    a = agents("--allow-uid", "4242", *NO_TARGETS, tcp=False, sock=sock)
    pid = a.proc.pid
    limit = max(int(fd) for fd in os.listdir("/proc/%d/fd" % pid)) + 1
    subprocess.run(["prlimit", "--pid", str(pid), "--nofile=%d:%d" % (limit, limit)], check=True,
                   timeout=10)
    attack = attacks(sock, 80)
    # Idle connections of an allowed user, which would hold the last
    # descriptors.
    idle = []
    for _ in range(3):
        try:
            idle.append(a.raw())
        except OSError:
            pass
    time.sleep(1)
    c0, t0 = cpu_seconds(pid), time.time()
    time.sleep(2)
    cpu = (cpu_seconds(pid) - c0) / (time.time() - t0)
    ok, took = served(a, timeout=3)
    c1, t1 = cpu_seconds(pid), time.time()
    assert ok == 20 and took < 20, (ok, took, cpu, a.logs())
    assert cpu < 0.3, (cpu, a.logs())
    cpu_serving = (c1 - c0) / (t1 - t0)
    assert cpu_serving < 0.5, (cpu_serving, a.logs())
    attack.stop()
    for s in idle:
        s.close()
    logs = a.logs()
    assert "out of file descriptors" in logs, logs


def test_open_files_limit_is_raised_to_the_hard_limit(taipan, run_dir, tmp_path):
    """The agent raises its soft limit on open files to the hard one at
    start (and says so with -v): connections and the processes it follows
    take descriptors, and 1024 is the usual soft limit."""
    require(shutil.which("prlimit"), "prlimit (util-linux)")
    sock = os.path.join(run_dir, "agent.sock")
    log = tmp_path / "agent.log"
    with open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen(["prlimit", "--nofile=256:4096", taipan, "agent", "-v", "--socket", sock,
                                 "--log", log] + list(NO_TARGETS), stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_for(lambda: socket_alive(sock), 30, "the agent's socket")
        with open("/proc/%d/limits" % proc.pid) as f:
            row = [l for l in f if l.startswith("Max open files")][0]
        assert row.split()[3:5] == ["4096", "4096"], row
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    assert "open files: at most 4096 (raised from 256 to the hard limit)" in \
        (tmp_path / "stderr").read_text(), (tmp_path / "stderr").read_text()


def test_many_query_parameters_get_400_at_once(agents):
    a = agents()
    q = "&".join("a%d=b" % i for i in range(250))
    t0 = time.time()
    status, body = a.get("/debug/pprof/profile?" + q, timeout=5)
    assert status == 400 and b"too many query parameters" in body, (status, body)
    assert time.time() - t0 < 3
    q = "&".join(["seconds=1"] + ["a%d=b" % i for i in range(31)])
    assert a.get("/debug/pprof/profile?" + q)[0] == 200
    assert a.get("/healthz") == (200, b"ok\n")


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


def test_push_in_wall_mode_is_the_cpu_profile(agents, receivers, workload, tmp_path):
    """Pyroscope reads a pushed window as a CPU profile: an agent in --mode
    wall pushes its samples on the CPU, without the time off it."""
    workload(pyenv("pyenv-3.12"), "chain.py", 60)
    rec = receivers()
    agents("--push", rec.url, "--mode", "wall")
    wait_for(lambda: len(rec.taken()) >= 1, 30, "a push")
    raw = check_push(rec.taken()[0], tmp_path)
    assert "wall/nanoseconds" not in raw and "state:" not in raw, raw[:1000]


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


def test_push_url_with_credentials_is_refused(taipan):
    """Credentials in --push would be in ps for every user to read, and in
    the log: refused, with how to give them instead, and never echoed."""
    for url in ("http://u:s3cr3t-pw@127.0.0.1:1", "http://u:s3cr3t/pw@127.0.0.1:1/x",
                "ftp://u:s3cr3t-pw@127.0.0.1"):
        res = subprocess.run([taipan, "agent", "--push", url], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, timeout=10)
        assert res.returncode == 2, res.stderr
        assert "s3cr3t" not in res.stderr, res.stderr
        assert "***@127.0.0.1" in res.stderr, res.stderr
        if url.startswith("http"):
            assert "a user name or password in the URL can be read by every user (ps)" in res.stderr
            assert "--push-credentials-file FILE" in res.stderr
            assert "TAIPAN_PUSH_USER and TAIPAN_PUSH_PASSWORD" in res.stderr


@pytest.mark.parametrize("content,mode,extra,env,msg", [
    ("user:Zq9sec\n", 0o640, [], {}, "(mode 0640): chmod 600"),
    ("no colon here\n", 0o600, [], {}, "must hold USER:PASSWORD on one line"),
    (":Zq9sec\n", 0o600, [], {}, "must hold USER:PASSWORD on one line"),
    ("user:Zq9sec\n", 0o600, [], {"TAIPAN_PUSH_PASSWORD": "Zq9sec"}, "not both"),
    (None, 0, [], {"TAIPAN_PUSH_PASSWORD": "Zq9sec"}, "set both TAIPAN_PUSH_USER"),
    ("user:Zq9sec\n", 0o600, None, {}, "--push-credentials-file is for --push"),
])
def test_bad_push_credentials(taipan, tmp_path, content, mode, extra, env, msg):
    args = ["agent"] if extra is None else ["agent", "--push", "http://127.0.0.1:1"]
    if content is not None:
        path = tmp_path / "creds"
        path.write_text(content)
        os.chmod(path, mode)
        args += ["--push-credentials-file", path]
    res = subprocess.run([taipan] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=10, env=dict(os.environ, **env))
    assert res.returncode == 2, res.stderr
    assert msg in res.stderr, res.stderr
    assert "Zq9sec" not in res.stderr, res.stderr


def check_credentials_pushed(a, rec, user, password):
    """Every push the receiver got carried user and password (HTTP Basic),
    and neither the agent's log nor its command line shows the password."""
    wait_for(lambda: rec.taken(), 30, "a push")
    basic = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    assert [p["auth"] for p in rec.all()] == ["Basic " + basic] * len(rec.all())
    with open("/proc/%d/cmdline" % a.proc.pid, "rb") as f:
        assert password.encode() not in f.read()
    logs = a.logs()
    assert password not in logs and basic not in logs, logs
    assert "pushing each window to %s/ingest" % rec.url in logs, logs
    # Over http://, the agent says that they go as clear text.
    assert "the push credentials go over http:// as clear text" in logs, logs
    return logs


def test_push_credentials_from_a_file(agents, receivers, workload, tmp_path):
    workload(pyenv("pyenv-3.12"), "chain.py", 60)
    rec = receivers()
    password = "Pw:%s@x" % secrets.token_hex(8)
    creds = tmp_path / "push-credentials"
    creds.write_text("ingest-user:%s\n" % password)
    os.chmod(creds, 0o600)
    a = agents("--push", rec.url, "--push-credentials-file", creds)
    logs = check_credentials_pushed(a, rec, "ingest-user", password)
    assert "with the credentials of --push-credentials-file" in logs
    a.stop()
    logs = a.logs()
    assert password not in logs and "exiting on SIGTERM" in logs


def test_push_credentials_from_the_environment(agents, receivers, workload, tmp_path):
    workload(pyenv("pyenv-3.12"), "chain.py", 60)
    rec = receivers()
    password = "env-%s" % secrets.token_hex(8)
    a = agents("--push", rec.url, env=dict(os.environ, TAIPAN_PUSH_USER="ingest-user",
                                          TAIPAN_PUSH_PASSWORD=password))
    logs = check_credentials_pushed(a, rec, "ingest-user", password)
    assert "with the credentials of TAIPAN_PUSH_USER and TAIPAN_PUSH_PASSWORD" in logs


# --- signals ------------------------------------------------------------------------

def test_sigterm_flushes_and_exits_0(agents, receivers, workload, tmp_path):
    w = workload(pyenv("pyenv-3.12"), "chain.py", 60)
    rec = receivers()
    a = agents("--push", rec.url, "--stats", window=60)
    answer = {}

    def fetch():
        answer["r"] = a.get("/debug/pprof/profile?seconds=60", timeout=30)

    t = threading.Thread(target=fetch)
    t.start()
    wait_for(lambda: a.stats()["profile_requests_waiting"] == 1, 10, "the waiting request")
    time.sleep(3)  # of workload for the request to get: a length, not a wait for a state
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
    assert a.get("/healthz") == (200, b"ok\n")  # still serving
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
    for line in ["Type=simple", "Restart=on-failure", "ExecStart=/usr/bin/taipan agent\n",
                 "RuntimeDirectory=taipan\n", "RuntimeDirectoryMode=0755\n",
                 "CapabilityBoundingSet=CAP_BPF CAP_PERFMON CAP_SYS_PTRACE CAP_DAC_READ_SEARCH "
                 "CAP_SYSLOG", "NoNewPrivileges=yes", "WantedBy=multi-user.target"]:
        assert line in text, line
    # systemd's own check, where systemd is installed, of the unit pointing at
    # the binary under test.
    analyze = shutil.which("systemd-analyze")
    if analyze:
        copy = tmp_path / "taipan-agent.service"
        copy.write_text(text.replace("/usr/bin/taipan", taipan).replace(
            "Documentation=man:taipan(1)\n", ""))
        res = subprocess.run([analyze, "verify", str(copy)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, timeout=60)
        assert res.returncode == 0 and not res.stderr.strip(), res.stderr


def test_free_threaded_process_over_http(agents, workload, tmp_path):
    w = workload(interpreter("sid-3.13t"), "chain.py", 60)
    a = agents()
    out = a.fetch("/debug/pprof/profile?seconds=3", tmp_path / "ft.pb.gz")
    raw = go_pprof("-raw", "-tagfocus=pid=^%d$" % w.pid, out)
    for f in (INNER, "Worker.run", "main", "<module>"):
        assert f in raw, raw[:2000]
    assert re.search(r"python_version:\[3\.13\.\d+t\]", raw.replace(" ", "")), raw[-2000:]


def test_wall_mode_endpoint_read_by_go_pprof(agents, workload, tmp_path):
    """--mode wall: /debug/pprof/wall serves wall-clock time with the state
    of every sample; /debug/pprof/profile stays a CPU profile; an agent in
    CPU mode says how to get the wall view."""
    w = workload(pyenv("pyenv-3.12"), "wall_mix.py", 60, ready=False)
    a = agents("--mode", "wall", "-r", 200)
    out = a.fetch("/debug/pprof/wall?seconds=3", tmp_path / "w.pb.gz")
    raw = go_pprof("-raw", out)
    assert "wall/nanoseconds" in raw, raw[:500]
    top = go_pprof("-top", "-sample_index=wall", "-unit=ms", "-tagfocus=pid=^%d$" % w.pid, out)
    # Each function's cumulative time.
    rows = {m.group(2): float(m.group(1)) for m in
            re.finditer(r"^\s*\S+\s+[\d.]+%\s+[\d.]+%\s+([\d.]+)ms\s+[\d.]+%\s+(\S+)\s*$", top, re.M)}
    # 3 s of the workload's one thread: 70% asleep, 30% computing on a
    # quiet host; on a loaded one its computing takes longer (37% in
    # CI's loaded pass), the waits for a CPU counted in. test_wall.py checks
    # the split against the workload's own measurement.
    assert "sleep_phase" in rows and "compute_phase" in rows, top
    total = rows["sleep_phase"] + rows["compute_phase"]
    assert 2500 <= total <= 3600, top
    assert 0.2 <= rows["compute_phase"] / total <= 0.45, top
    tags = go_pprof("-tags", "-tagfocus=pid=^%d$" % w.pid, out)
    assert "sleeping" in tags and "running" in tags, tags
    # The CPU profile of the same agent: samples on the CPU only.
    cpu = a.fetch("/debug/pprof/profile?seconds=2", tmp_path / "c.pb.gz")
    raw = go_pprof("-raw", cpu)
    assert "wall/nanoseconds" not in raw and "cpu/nanoseconds" in raw, raw[:500]
    assert "state:" not in raw and "compute_phase" in raw, raw[:2000]
    cpu_top = go_pprof("-top", "-tagfocus=pid=^%d$" % w.pid, cpu)
    assert "sleep_phase" not in cpu_top or "compute_phase" in cpu_top.split("sleep_phase")[0], cpu_top


def test_wall_endpoint_needs_wall_mode(agents):
    a = agents()
    status, body = a.get("/debug/pprof/wall?seconds=1")
    assert status == 404 and b"--mode wall" in body, (status, body)
