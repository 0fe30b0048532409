"""The functional tests' taipan agent (test_agent.py, test_agent_security.py,
test_attacks.py): an Agent on TCP with a bearer token or on a Unix socket,
the agents fixture that starts them and checks that each one ends cleanly,
and a bounded wait. A test module imports the agents fixture by its name, for
pytest to find it."""

import gzip
import http.client
import http.server
import json
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest


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


class PostReceiver:
    """An HTTP server on 127.0.0.1 (port 0: any free one) that keeps, for
    each POST, a dict: time, path, status and what parse(handler, body)
    makes of it; it answers with the next of statuses, then 200 (the body
    ok, else unhappy)."""

    def __init__(self, parse, port=0, statuses=(), ok=b"ok\n", unhappy=b"unhappy\n"):
        self.posts = []
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
                got = parse(self, body)
                with rec.lock:
                    status = rec.statuses.pop(0) if rec.statuses else 200
                    rec.posts.append(dict(got, time=time.time(), status=status))
                reply = ok if status == 200 else unhappy
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
            return [p for p in self.posts if p["status"] == 200]

    def all(self):
        with self.lock:
            return list(self.posts)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


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

    def served_sockets(self):
        """How many connections the agent's side still holds open on its TCP
        port: established, or closed by the client and not yet by the agent
        (/proc/net/tcp)."""
        n = 0
        for path in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(path) as f:
                for row in f.readlines()[1:]:
                    local, st = row.split()[1], row.split()[3]
                    n += int(local.rsplit(":", 1)[1], 16) == self.port and st in ("01", "08")
        return n

    def wait_idle(self):
        """Until the agent has closed every connection made to it so far
        (TCP): each counts against its address's limit until the agent has
        seen it close, which takes a while on a loaded machine."""
        wait_for(lambda: self.served_sockets() == 0, 20, "the agent to close its connections")

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
