"""Shared fixtures for taipan's functional tests: the interpreter matrix, the
taipan binary, workloads that signal when they are busy, and a folded-stack
parser. These tests need root: they load real BPF programs."""

import glob
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, replace

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORKLOADS = os.path.join(ROOT, "tests", "workloads")
PYENV = os.environ.get("TAIPAN_PYENV", "/root/.pyenv/versions")
# Debian roots made by scripts/make-roots.sh (make roots).
ROOTS = os.environ.get("TAIPAN_ROOTS", "/var/cache/taipan-test")
# Where the workloads are copied inside a root.
ROOT_WORKLOADS = "/tmp/taipan-workloads"
IN_CI = os.environ.get("CI") == "true"
# No debug files from the network in the tests, whatever the machine sets:
# test_debuginfod.py names its own server.
os.environ.pop("DEBUGINFOD_URLS", None)
# The outer frames of chain.py's busy thread, root first.
CHAIN_NAMES = ["<module>", "main", "Worker.run"]


@dataclass
class Interp:
    id: str
    path: str  # the interpreter as the process sees it
    version: tuple
    root: str = None  # a Debian root it runs in through chroot, or None
    # Run as a user's machine has it: the debug files of the -dbg packages
    # (which the test roots install, and which name the regular
    # interpreter's every function) out of its sight, under an empty tmpfs
    # in a mount namespace of its own.
    hide_debug: bool = False

    @property
    def has_qualname(self):
        return self.version >= (3, 11)

    def argv(self, script, *args):
        """The command that runs a workload (a host path) with this interpreter."""
        if not self.root:
            argv = [self.path, script] + [str(a) for a in args]
        else:
            inside = os.path.join(ROOT_WORKLOADS, os.path.basename(script))
            copy_workloads(self.root)
            if not os.path.exists(self.root + inside):
                shutil.copy(script, self.root + inside)
            argv = ["chroot", self.root, self.path, inside] + [str(a) for a in args]
        if self.hide_debug:
            debug = (self.root or "") + "/usr/lib/debug"
            argv = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                    '{ [ ! -d "$0" ] || mount -t tmpfs taipan-no-debug "$0"; } && exec "$@"',
                    debug] + argv
        return argv


def copy_workloads(root):
    dst = root + ROOT_WORKLOADS
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(WORKLOADS):
        if name.endswith(".py"):
            shutil.copy(os.path.join(WORKLOADS, name), dst)


def _pyenv(minor):
    major, mi = minor.split(".")
    hits = sorted(glob.glob(os.path.join(PYENV, "%s.*" % minor, "bin", "python%s" % minor)))
    hits = [h for h in hits if re.search(r"/%s\.%s\.\d+/" % (major, mi), h)]
    return hits[-1] if hits else None


def interpreter_matrix():
    """Every interpreter the suite runs against: (id, path or None, version, root)."""
    rows = []
    for minor in ["2.7", "3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]:
        rows.append(("pyenv-" + minor, _pyenv(minor), tuple(int(x) for x in minor.split(".")), None))
    rows.append(("debian-3.11-static", "/usr/bin/python3.11" if os.path.exists("/usr/bin/python3.11") else None,
                 (3, 11), None))
    # Debian's own builds in roots: non-PIE executables with libpython linked
    # in (python3.X, diverted to the -nopie build), the PIE build (python3.X-pie),
    # and the debug build (python3.X-dbg); reachable only through /proc/PID/root.
    in_root = [("bullseye", "3.9", "")]
    for minor in ["3.13", "3.14", "3.15"]:
        in_root += [("sid", minor, ""), ("sid", minor, "-pie"), ("sid", minor, "-dbg")]
    for suite, minor, variant in in_root:
        root = os.path.join(ROOTS, suite)
        path = "/usr/bin/python%s%s" % (minor, variant)
        ok = os.path.exists(root + path)
        rows.append(("%s-%s%s" % (suite, minor, variant), path if ok else None,
                     tuple(int(x) for x in minor.split(".")), root))
    # The free-threaded build (PEP 703) that make-roots.sh compiles from
    # Debian's python3.13 source into the sid root.
    root = os.path.join(ROOTS, "sid")
    path = "/opt/python3.13t/bin/python3.13t"
    rows.append(("sid-3.13t", path if os.path.exists(root + path) else None, (3, 13), root))
    return rows


MATRIX = interpreter_matrix()

# The sanitizer pass (make SAN=1 functional, TAIPAN_SANITIZED=1) runs the
# tests that reach code of taipan's that the others do not: san-tests.txt
# (written by make san-select from one coverage run of the whole suite)
# marks each test it analysed "+" (run under the sanitizers) or "-" (every
# line it reaches, a "+" test reaches too). A test it does not list, newer
# than the list, runs; the tests that feed taipan hostile input run whatever
# the list says, since what the sanitizers look for there is in the data,
# not in the lines.
SANITIZED = os.environ.get("TAIPAN_SANITIZED") == "1"
SAN_LIST = os.path.join(HERE, "san-tests.txt")
SAN_ALWAYS = ("tests/functional/test_hostile.py::", "tests/functional/test_attacks.py::")


def read_san_list(path=SAN_LIST):
    """{test id: True to run under the sanitizers, False to leave out}."""
    marks = {}
    if os.path.exists(path):
        for line in open(path):
            if line[:2] in ("+ ", "- "):
                marks[line[2:].split()[0]] = line[0] == "+"
    return marks


def pytest_collection_modifyitems(config, items):
    if not SANITIZED:
        return
    marks = read_san_list()
    keep, drop = [], []
    for item in items:
        out = marks.get(item.nodeid) is False and not item.nodeid.startswith(SAN_ALWAYS)
        (drop if out else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# Coverage runs (make san-select): the gcov data of every taipan a test runs
# goes to TAIPAN_COVERAGE/<the test's id>.
COVERAGE = os.environ.get("TAIPAN_COVERAGE")


@pytest.fixture(autouse=True)
def _coverage_prefix(request):
    if not COVERAGE:
        yield
        return
    d = os.path.join(COVERAGE, re.sub(r"[^\w.-]", "_", request.node.nodeid))
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o1777)  # taipan run as another user writes here too
    with open(os.path.join(d, "nodeid"), "w") as f:
        f.write(request.node.nodeid)
    old = os.environ.get("GCOV_PREFIX")
    os.environ["GCOV_PREFIX"] = d
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("GCOV_PREFIX", None)
        else:
            os.environ["GCOV_PREFIX"] = old


# The throughput tests (hundreds of processes that live for a moment, each
# to be recognised in time) measure how fast taipan is; under the sanitizers
# every per-process step is several times slower, so they would measure the
# sanitizers. They run in the normal pass; the sanitizer pass skips them.
THROUGHPUT_EXTRA = []
throughput = pytest.mark.skipif(SANITIZED, reason="measures taipan's speed, which the sanitizers change")


def matrix_sample():
    """The MATRIX ids a matrix-wide test runs over: all of them (the
    sanitizer pass picks among them by san-tests.txt)."""
    return [m[0] for m in MATRIX]


def require(path, what):
    """Skips (or, in CI, fails) when a needed file is absent."""
    if path and os.path.exists(path):
        return
    msg = "%s is not installed (%s)" % (what, path)
    if IN_CI:
        pytest.fail("required in CI: " + msg)
    pytest.skip(msg)


def go_pprof(*args):
    """go tool pprof ARGS: its output; it must succeed."""
    go = shutil.which("go")
    require(go, "go (golang-go), the pprof reader")
    env = dict(os.environ)
    env.setdefault("HOME", "/root")
    env.setdefault("GOCACHE", "/tmp/taipan-gocache")
    # -symbolize=none: taipan names every location (each mapping says it
    # has functions), yet pprof would open each mapped binary to match its
    # build id, 0.7 s a call on a quiet host (libpython) and several under
    # load, which is pprof's cost, not taipan's.
    res = subprocess.run([go, "tool", "pprof", "-symbolize=none"] + [str(a) for a in args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


def tag_values(tags, key):
    """The values of label key in go tool pprof -tags output, in its order."""
    values, current = [], None
    for line in tags.splitlines():
        m = re.match(r"\s*(\S+): Total ", line)
        if m:
            current = m.group(1)
        elif current == key and "%): " in line:
            values.append(line.split("%): ", 1)[1].strip())
    return values


def _installed(row):
    """The Interp of a MATRIX row, which must be installed (see require())."""
    ident, path, version, root = row
    if root and not path:
        require(None, "interpreter %s in %s (run scripts/make-roots.sh)" % (ident, root))
    require(root + path if root else path, "interpreter " + ident)
    return Interp(ident, path, version, root)


def interpreter(ident):
    """The Interp of the MATRIX row named ident ("pyenv-3.12", "sid-3.15")."""
    for row in MATRIX:
        if row[0] == ident:
            return _installed(row)
    raise KeyError(ident)


def without_debug_files(ident):
    """interpreter(ident) as a user's machine runs it: without the debug
    files of its -dbg package."""
    return replace(interpreter(ident), hide_debug=True)


def pyenv(ident):
    """The path of a host interpreter of the matrix ("pyenv-3.12",
    "debian-3.11-static"), for workloads that take a path."""
    it = interpreter(ident)
    assert not it.root, "%s runs in a root: use interpreter()" % ident
    return it.path


@pytest.fixture(params=MATRIX, ids=[m[0] for m in MATRIX])
def interp(request):
    return _installed(request.param)


@pytest.fixture(scope="session")
def taipan():
    path = os.environ.get("TAIPAN", os.path.join(ROOT, "build", "taipan"))
    if not os.path.exists(path):
        pytest.fail("taipan binary not built: %s (run make)" % path)
    if os.geteuid() != 0:
        pytest.skip("functional tests load BPF programs and need root")
    return path


class Workload:
    """A Python process running a workload, ready once it printed 'ready'."""

    def __init__(self, interp, script, *args, cwd=None, user=None):
        """interp: an Interp, or the path of an interpreter on the host;
        user: a pwd entry (attacker) to run it as, through as_user()."""
        self.script = os.path.join(WORKLOADS, script)
        if user and not self.script.startswith(user.pw_dir + "/"):
            # The clone may lie where the user cannot read (under /root):
            # the user runs a copy of its own.
            self.script = user_copy(user, self.script)
        if not isinstance(interp, Interp):
            interp = Interp("host", interp, (0, 0))
        argv = interp.argv(self.script, *args)
        self.proc = subprocess.Popen(
            as_user(user, argv) if user else argv,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
        )
        self.pid = self.proc.pid

    def wait_ready(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                err = self.proc.stderr.read().decode(errors="replace")
                raise AssertionError("workload exited before ready: " + err)
            if line.strip() == b"ready":
                return self
        raise AssertionError("workload not ready after %ss" % timeout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


class Talker:
    """A workload that prints 'ready' once it is, and answers each line on
    its input with a line: argv started, and what it printed before
    'ready' in lines."""

    def __init__(self, argv, what):
        self.proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        self.lines = []
        for line in self.proc.stdout:
            if line.strip() == "ready":
                return
            self.lines.append(line.rstrip("\n"))
        raise AssertionError("%s exited before it was ready: %s %s" % (what, self.lines, self.proc.stderr.read()))

    def ask(self):
        """Writes a line to its input and returns the line it answers."""
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().rstrip("\n")

    def stop(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def talker():
    """talker(argv, what): a Talker, killed at the end of the test."""
    started = []

    def start(argv, what):
        t = Talker(argv, what)
        started.append(t)
        return t
    yield start
    for t in started:
        t.stop()


@pytest.fixture
def workload():
    started = []

    def start(interp, script, *args, ready=True, **kw):
        w = Workload(interp, script, *args, **kw)
        started.append(w)
        return w.wait_ready() if ready else w

    yield start
    for w in started:
        w.stop()


class Screen:
    """A command (taipan top, dump, ...) running in a detached tmux session of
    its own server, in a 200x50 terminal."""

    def __init__(self, tmux, argv, status_file, conf):
        self.tmux = tmux
        self.sock = "taipan-test-%s" % uuid.uuid4().hex[:12]
        self.status_file = status_file
        # Our own configuration, not the user's: tmux acts on OSC 52
        # (clipboard) writes, so that a test sees one that gets through.
        with open(conf, "w") as f:
            f.write("set -s set-clipboard on\n")
        self.conf = conf
        cmd = "%s; echo $? > %s; sleep 600" % (
            " ".join(shlex.quote(str(a)) for a in argv), shlex.quote(str(status_file)))
        self._tmux("new-session", "-d", "-x", "200", "-y", "50", "-s", "t", cmd)

    def _tmux(self, *args):
        return subprocess.run([self.tmux, "-f", str(self.conf), "-L", self.sock] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True,
                              timeout=10).stdout

    def text(self, joined=False):
        """What the pane shows; joined: lines the terminal wrapped made whole."""
        return self._tmux("capture-pane", "-p", "-t", "t", *(["-J"] if joined else []))

    def title(self):
        return self._tmux("display-message", "-p", "-t", "t", "#{pane_title}").rstrip("\n")

    def buffers(self):
        """tmux's paste buffers: an OSC 52 write that got through makes one."""
        return self._tmux("list-buffers")

    def keys(self, *keys):
        self._tmux("send-keys", "-t", "t", *keys)

    def wait_for(self, pred, timeout=15, what="the screen"):
        deadline = time.time() + timeout
        while True:
            text = self.text()
            got = pred(text)
            if got:
                return got
            if time.time() > deadline:
                raise AssertionError("timed out waiting for %s; screen:\n%s" % (what, text))
            time.sleep(0.2)

    def exit_status(self, timeout=5):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if os.path.exists(self.status_file) and open(self.status_file).read().strip():
                return int(open(self.status_file).read())
            time.sleep(0.1)
        raise AssertionError("the command did not exit; screen:\n" + self.text())

    def close(self):
        subprocess.run([self.tmux, "-L", self.sock, "kill-server"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=10)


@pytest.fixture
def screen(tmp_path):
    """screen(argv): argv running in a tmux terminal (a Screen)."""
    tmux = shutil.which("tmux")
    require(tmux, "tmux (scripts/install-deps.sh installs it)")
    screens = []

    def start(argv):
        n = len(screens)
        s = Screen(tmux, argv, tmp_path / ("status-%d" % n), tmp_path / ("tmux-%d.conf" % n))
        screens.append(s)
        return s

    yield start
    for s in screens:
        s.close()


# The unprivileged local user of the attack tests (test_attacks.py): made
# once by the suite, with no capabilities, no groups, nothing but a home.
ATTACKER = "taipan-mallory"


@pytest.fixture(scope="session")
def attacker():
    """The attacking user (a pwd entry), created if it is missing."""
    import pwd
    try:
        return pwd.getpwnam(ATTACKER)
    except KeyError:
        pass
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    require(useradd, "useradd (passwd), to make the attacking user")
    res = subprocess.run([useradd, "--system", "--create-home", "--home-dir", "/var/tmp/" + ATTACKER,
                          "--shell", "/bin/sh", "--user-group", ATTACKER],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    # A parallel run may have made it between the look and useradd.
    try:
        return pwd.getpwnam(ATTACKER)
    except KeyError:
        raise AssertionError("useradd %s failed: %s" % (ATTACKER, res.stdout))


def user_copy(user, path):
    """A copy of path (a workload) in user's home, owned by user, readable:
    what that user runs."""
    dst = os.path.join(user.pw_dir, os.path.basename(path))
    shutil.copyfile(path, dst)
    os.chown(dst, user.pw_uid, user.pw_gid)
    os.chmod(dst, 0o755)
    return dst


def as_user(user, argv):
    """argv run as user (a pwd entry): its uid and group only, no
    capabilities, as a local user logs in (the bounding set stays whole,
    as a stock Debian user's does: unshare -Urm works)."""
    return ["setpriv", "--reuid=%d" % user.pw_uid, "--regid=%d" % user.pw_gid, "--clear-groups",
            "--inh-caps=-all", "--"] + [str(a) for a in argv]


def cpu_seconds(pid):
    """The CPU time pid has used so far (/proc/PID/stat: utime + stime)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_ns(pid):
    """The CPU time each thread of pid has used so far, in ns, by its tid
    (/proc/PID/task/TID/schedstat: exact, where stat counts clock ticks)."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                out[int(tid)] = int(f.read().split()[0])
        except OSError:
            pass  # gone meanwhile
    return out


def run_taipan(taipan, args, timeout=60, **kw):
    proc = subprocess.run([taipan] + [str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout, **kw)
    proc.stdout = proc.stdout.decode(errors="replace")
    proc.stderr = proc.stderr.decode(errors="replace")
    return proc


def error_lines(stderr):
    """taipan's error lines in its stderr."""
    return [l for l in stderr.splitlines() if l.startswith("taipan: error:")]


def run_on_sleeper(taipan, args):
    """Runs taipan ARGS -p PID, PID a `sleep` process (not Python) that is
    killed afterwards. Returns (the finished taipan, PID)."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        return run_taipan(taipan, list(args) + ["-p", sleeper.pid]), sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()


class Recording:
    """`taipan record -v ARGS` running, from the moment it samples (its
    "sampling at" line) until the with block ends, which stops it with
    Ctrl-C (SIGINT) and checks that it wrote its profile and exited 0. Its
    standard error is in err (lines), as it comes."""

    def __init__(self, taipan, args, timeout=60):
        self.proc = subprocess.Popen([taipan, "record", "-v"] + [str(a) for a in args],
                                     stderr=subprocess.PIPE, text=True)
        self.err = []
        self.reader = threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True)
        self.reader.start()
        self.timeout = timeout

    def stderr(self):
        return "".join(self.err)

    def __enter__(self):
        deadline = time.time() + self.timeout
        try:
            while not any("sampling at" in line for line in self.err):
                assert self.proc.poll() is None and time.time() < deadline, self.stderr()
                time.sleep(0.05)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, kind, value, tb):
        try:
            if kind is None:
                self.proc.send_signal(signal.SIGINT)
                assert self.proc.wait(timeout=self.timeout) == 0, self.stderr()
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(5)
        return False


def record_args(out, target, seconds=2, rate=500, extra=(), quiet=True):
    """The arguments of `taipan record` into out. target: a pid, a list of
    pids, a command (a list of its words) to start and profile, or None for
    every process (-a). seconds None: until the command ends."""
    args = ["record", "-r", rate, "-o", out] + (["-q"] if quiet else []) + list(extra)
    if seconds is not None:
        args += ["-d", seconds]
    if target is None:
        return args + ["-a"]
    if isinstance(target, int):
        target = [target]
    if target and all(isinstance(t, int) for t in target):
        for pid in target:
            args += ["-p", pid]
        return args
    return args + ["--"] + list(target)


def record(taipan, out, target, seconds=2, rate=500, extra=(), quiet=True, timeout=60, **kw):
    """Runs `taipan record` (record_args()) and checks that it succeeded and
    wrote a profile to out; kw go to run_taipan() (env=...). Returns the
    finished process (run_taipan())."""
    res = run_taipan(taipan, record_args(out, target, seconds, rate, extra, quiet), timeout=timeout, **kw)
    assert res.returncode == 0, res.stderr
    assert os.path.exists(out) and os.path.getsize(out) > 0, res.stderr
    return res


def record_folded(taipan, tmp_path, target, seconds=2, rate=500, extra=(), **kw):
    """record() into tmp_path/out.folded with --folded-lines and
    --folded-threads. Returns (its stacks, the finished process)."""
    out = tmp_path / "out.folded"
    res = record(taipan, out, target, seconds, rate, ["--folded-lines", "--folded-threads"] + list(extra),
                 **kw)
    return parse_folded(out), res


@dataclass
class Frame:
    text: str
    name: str
    file: str = None
    line: int = None
    kernel: bool = False
    marker: bool = False
    native: bool = False


FRAME_RE = re.compile(r"^(?P<name>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def parse_frame(text):
    if text.endswith("_[k]"):
        return Frame(text, text[:-4], kernel=True)
    if text.endswith("_[n]"):
        return Frame(text, text[:-4], native=True)
    if text.startswith("[") and text.endswith("]"):
        return Frame(text, text, marker=True)
    m = FRAME_RE.match(text)
    if not m:
        return Frame(text, text)
    return Frame(text, m.group("name"), m.group("file"),
                 int(m.group("line")) if m.group("line") else None)


@dataclass
class Stack:
    pid: int
    tid: int
    comm: str
    thread: str
    frames: list
    count: int

    @property
    def python(self):
        return [f for f in self.frames if not f.kernel and not f.marker and not f.native]

    @property
    def native(self):
        return [f for f in self.frames if f.native]

    @property
    def kernel(self):
        return [f for f in self.frames if f.kernel]


THREAD_ROOT = re.compile(r"^(?P<name>.*) \[(?P<kind>pid|tid) (?P<id>\d+)\]$")


def parse_folded(path, threads=True):
    """Stacks of a folded file written with --folded-threads (and usually --folded-lines)."""
    stacks = []
    with open(path) as f:
        for raw in f:
            raw = raw.rstrip("\n")
            if not raw:
                continue
            body, _, count = raw.rpartition(" ")
            parts = body.split(";")
            pid = tid = 0
            comm = thread = ""
            if threads:
                p, t = THREAD_ROOT.match(parts[0]), THREAD_ROOT.match(parts[1])
                assert p and t and p.group("kind") == "pid" and t.group("kind") == "tid", raw
                comm, pid, thread, tid = p.group("name"), int(p.group("id")), t.group("name"), int(t.group("id"))
                parts = parts[2:]
            stacks.append(Stack(pid, tid, comm, thread, [parse_frame(x) for x in parts], int(count)))
    return stacks


def stats(stderr):
    """{'frame unreadable': 12, 'unreadable code objects': 3, ...} from --stats.

    Each walk failure site has its own line, "N samples: [marker] key: what";
    the counts are summed by marker (what the profile shows) and kept by key."""
    out = {}
    for m in re.finditer(r"^taipan: stats: (\d+) samples: \[(.+?)\] (\w+): .+$", stderr, re.M):
        out[m.group(2)] = out.get(m.group(2), 0) + int(m.group(1))
        out[m.group(3)] = int(m.group(1))
    m = re.search(r"(\d+) frames of unreadable code objects", stderr)
    if m:
        out["unreadable code objects"] = int(m.group(1))
    m = re.search(r"(\d+) frames of code objects freed", stderr)
    if m:
        out["code objects freed"] = int(m.group(1))
    m = re.search(r"(\d+) code objects described by BPF at first sight, (\d+) of them named from "
                  r"that copy", stderr)
    if m:
        out["described"], out["named from that copy"] = int(m.group(1)), int(m.group(2))
    return out


def marked_lines(path):
    """{'loop': 12, ...} from '# LINE:loop' comments in a workload."""
    out = {}
    with open(path) as f:
        for i, line in enumerate(f, 1):
            m = re.search(r"# LINE:([\w-]+)", line)
            if m:
                out[m.group(1)] = i
    return out


def total(stacks):
    return sum(s.count for s in stacks)


def assert_deep_recursion(stacks, depth=1000):
    """deep.py DEPTH's stacks: <module>, main, rec depth + 1 times, spin;
    nothing marked but the native part's cut (native frames stop at 512 per
    sample, and before 3.11 a Python call is several native frames)."""
    assert total(stacks) >= 50
    for s in stacks:
        assert not any(f.marker and f.text != "[native: truncated]" for f in s.frames), \
            [f.text for f in s.frames[:3]]
        names = [f.name for f in s.python]
        assert names[:2] == ["<module>", "main"], names[:3]
        assert names[2:-1] == ["rec"] * (depth + 1), "depth %d" % names.count("rec")
        assert names[-1] == "spin"
