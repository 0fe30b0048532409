"""taipan agent: who may connect (the root-only Unix socket, --allow-uid, the
bearer token on TCP), what a client cannot do (hold a slot after leaving,
trickle a request head, flood the log, hang it with query parameters), and
what another local user cannot do (put a file in the way of --log or
--auth-token-file, hold connections or the agent's descriptors). The Agent
is agent_fixtures.py's. Everything listens on 127.0.0.1 or a Unix socket, and
every wait is bounded."""

import errno
import json
import os
import pwd
import re
import secrets
import select
import shutil
import stat
import subprocess
import tempfile
import time

import pytest

from conftest import ATTACKER as ATTACKER_NAME
from conftest import as_user, cpu_seconds, go_pprof, pyenv, require
from agent_fixtures import agents  # noqa: F401 (a fixture: pytest finds it by name)
from agent_fixtures import DEFAULT_SOCKET, INNER, socket_alive, wait_for, write_token


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
    # The health check's connection, closed, counts until the agent has
    # seen it close: else the last of these would be refused.
    a.wait_idle()
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
