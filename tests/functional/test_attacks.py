"""Attacks by an unprivileged local user on the root profiler (issue 28):
files cut short while taipan reads them, thousands of mapped files, line
tables shared a thousand times, huge symbol tables, and debug files in a
private mount namespace that point at the host. Each attack runs as a user
that the suite makes (conftest.attacker), beside a healthy Python process;
taipan must keep running, keep sampling the healthy process (its samples
within 10% of its CPU time), stay within its memory budget, and write its
profile."""

import os
import re
import secrets
import shutil
import struct
import subprocess
import sys
import threading
import time

import pytest

from conftest import (ROOT, WORKLOADS, cpu_seconds, parse_folded, pyenv, require, run_taipan, total,
                      user_copy)

sys.path.insert(0, WORKLOADS)
import elfgen  # noqa: E402

# The attacker's interpreter: Debian's own, which any user may run (the
# pyenv ones live under /root).
ATTACKER_PY = "/usr/bin/python3.11"
RATE = 200


@pytest.fixture
def lair(attacker):
    """A directory of the attacker's, emptied afterwards, with her copy of
    the attack workload."""
    require(ATTACKER_PY, "Debian's python3.11")
    d = os.path.join(attacker.pw_dir, "attack-%s" % secrets.token_hex(4))
    os.mkdir(d)
    os.chown(d, attacker.pw_uid, attacker.pw_gid)
    for name in ("attacker.py", "elfgen.py"):
        dst = user_copy(attacker, os.path.join(WORKLOADS, name))
        shutil.move(dst, os.path.join(d, name))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def attack(workload, attacker, lair, *args):
    """The attack workload as the attacker, ready."""
    return workload(ATTACKER_PY, os.path.join(lair, "attacker.py"), *args, user=attacker, cwd=lair)


def healthy(workload):
    return workload(pyenv("pyenv-3.11"), "chain.py", 120)


class Measured:
    """taipan ARGS run with -v, the healthy process's CPU time measured from
    when sampling started (taipan's "sampling at" line) to its exit, and
    taipan's peak RSS (VmHWM) and descriptors as it ran."""

    def __init__(self, taipan, args, healthy_pid=None, timeout=120, env=None):
        self.proc = subprocess.Popen([taipan] + [str(a) for a in args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.healthy_pid = healthy_pid
        self.lines = []
        self.cpu0 = None
        self.peak_rss_kb = 0
        self.max_fds = 0
        self.t0 = time.time()
        reader = threading.Thread(target=self._read, daemon=True)
        reader.start()
        deadline = time.time() + timeout
        while self.proc.poll() is None and time.time() < deadline:
            self._sample()
            time.sleep(0.1)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        reader.join(10)
        self.seconds = time.time() - self.t0
        self.cpu1 = cpu_seconds(healthy_pid) if healthy_pid else None
        self.stdout = self.proc.stdout.read().decode(errors="replace")
        self.stderr = "".join(self.lines)
        self.returncode = self.proc.returncode

    def _read(self):
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace")
            if self.cpu0 is None and "sampling at" in line and self.healthy_pid:
                self.cpu0 = cpu_seconds(self.healthy_pid)
            self.lines.append(line)

    def _sample(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                m = re.search(r"VmHWM:\s+(\d+) kB", f.read())
            if m:
                self.peak_rss_kb = max(self.peak_rss_kb, int(m.group(1)))
            self.max_fds = max(self.max_fds, len(os.listdir("/proc/%d/fd" % self.proc.pid)))
        except OSError:
            pass

    def healthy_cpu(self):
        assert self.cpu0 is not None, "no 'sampling at' line:\n" + self.stderr
        return self.cpu1 - self.cpu0


def assert_healthy_sampled(stacks, pid, cpu, rate=RATE):
    """The healthy process's samples are within 10% of its CPU time."""
    mine = total([s for s in stacks if s.pid == pid])
    want = cpu * rate
    assert abs(mine - want) <= 0.1 * want, "healthy process: %d samples for %.2f s of CPU (%d)" % (
        mine, cpu, want)
    return mine


def record_beside(taipan, tmp_path, pids, healthy_pid, seconds=4, extra=()):
    out = tmp_path / "out.folded"
    m = Measured(taipan, ["record", "-v", "-r", RATE, "-d", seconds, "-o", out, "--folded-threads",
                          "--no-kernel", "--stats"] + list(extra) + [a for p in pids for a in ("-p", p)],
                 healthy_pid=healthy_pid)
    assert m.returncode == 0, m.stderr[-3000:]
    assert "Sanitizer" not in m.stderr and "runtime error" not in m.stderr, m.stderr[-3000:]
    return m, parse_folded(out)


class UnixAgent:
    """taipan agent on a Unix socket of its own (root's: no token), its
    command line prefixed by prefix (prlimit), -v logging to a file."""

    def __init__(self, taipan, tmp_path, *args, prefix=()):
        from agent_fixtures import UnixHTTPConnection, wait_for
        self._conn = UnixHTTPConnection
        self.sock = str(tmp_path / "agent.sock")
        self.log = tmp_path / "agent.log"
        self.proc = subprocess.Popen(list(prefix) + [taipan, "agent", "-v", "--socket", self.sock, "--rate",
                                                      str(RATE), "--window", "2", "--log", str(self.log)] +
                                     [str(a) for a in args], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)
        wait_for(lambda: self.alive() and self.healthz(), 30, "the agent's /healthz")

    def alive(self):
        if self.proc.poll() is not None:
            raise AssertionError("agent exited with %s:\n%s" % (self.proc.returncode, self.logs()))
        return True

    def get(self, path, timeout=10):
        conn = self._conn(self.sock, timeout)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def healthz(self, timeout=2):
        try:
            return self.get("/healthz", timeout) == (200, b"ok\n")
        except OSError:
            return False

    def fds(self):
        return len(os.listdir("/proc/%d/fd" % self.proc.pid))

    def logs(self):
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self):
        self.proc.terminate()
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


def agent_stats(agent):
    import json
    status, body = agent.get("/stats")
    assert status == 200, body
    return json.loads(body)


def pprof_samples(path, pid):
    """The samples of pid in a pprof file (go tool pprof -raw)."""
    from conftest import go_pprof
    raw = go_pprof("-raw", "-sample_index=0", "-tagfocus=pid=^%d$" % pid, str(path))
    body = raw.split("Samples:", 1)[1].split("Locations", 1)[0]
    return sum(int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s+\d+:", body, re.M))


def stat_line(stderr, prefix):
    m = re.search(r"^taipan: stats: %s.*$" % re.escape(prefix), stderr, re.M)
    assert m, "no '%s' stats line:\n%s" % (prefix, stderr[-2000:])
    return m.group(0)


# --- 1. a file cut short while taipan reads it (SIGBUS) -----------------------

NSYMS = 2_000_000


def test_file_cut_while_read_record(taipan, workload, tmp_path, attacker, lair):
    """She maps a large ELF of hers and runs code in it; each time another
    process opens the file she cuts it to one page 50 ms later. taipan read
    it through a mapping and died of SIGBUS (rc 135, no profile); now a
    read fails, and the file's frames are named as unknown code."""
    big = os.path.join(lair, "big.so")
    bad = attack(workload, attacker, lair, "truncate", big, NSYMS, 60)
    good = healthy(workload)
    m, stacks = record_beside(taipan, tmp_path, [bad.pid, good.pid], good.pid)
    assert_healthy_sampled(stacks, good.pid, m.healthy_cpu())
    assert total([s for s in stacks if s.pid == bad.pid]) > 0
    # She did cut it under taipan.
    bad.proc.kill()
    assert b"cut " in bad.proc.stderr.read()


def test_file_cut_while_read_dump_and_agent(taipan, workload, tmp_path, attacker, lair):
    big = os.path.join(lair, "big.so")
    bad = attack(workload, attacker, lair, "truncate", big, NSYMS, 60)
    for _ in range(3):
        res = run_taipan(taipan, ["dump", "-p", bad.pid], timeout=60)
        assert res.returncode in (0, 1), (res.returncode, res.stderr)
        assert "Sanitizer" not in res.stderr
    agent = UnixAgent(taipan, tmp_path)
    try:
        status, body = agent.get("/debug/pprof/profile?seconds=2", timeout=30)
        assert status == 200 and body[:2] == b"\x1f\x8b", (status, body[:200])
        assert agent.alive(), agent.logs()
    finally:
        rc = agent.stop()
    assert rc == 0, agent.logs()
    bad.proc.kill()
    assert b"cut " in bad.proc.stderr.read()


# --- 2. descriptors: a process that maps 1,100 files ---------------------------

def test_many_mapped_files_do_not_take_every_descriptor(taipan, workload, tmp_path, attacker, lair):
    """Under the 1,024 descriptors of a service's default limit, her 1,100
    mapped copies of a small library took one descriptor each for good: no
    new process was seen, /healthz timed out. taipan now holds a bounded
    number, and a process that starts afterwards is profiled."""
    prlimit = shutil.which("prlimit")
    require(prlimit, "prlimit (util-linux)")
    # Her files are mapped before the agent starts: it reads them as it
    # finds her process (where the kernel has no syscall tracepoints,
    # code mapped later is read when a sample runs into it).
    bad = attack(workload, attacker, lair, "files", os.path.join(lair, "libs"), 1100, 120)
    agent = UnixAgent(taipan, tmp_path, prefix=[prlimit, "--nofile=1024:1024", "--"])
    try:
        # The agent reads her 1,100 mappings and builds tables for 768
        # of them (a process's bound): wait until their number stops
        # growing.
        from agent_fixtures import wait_for
        seen = []

        def settled():
            seen.append(agent_stats(agent).get("native_table_files", 0))
            return len(seen) > 10 and seen[-1] >= 700 and seen[-1] == seen[-11]
        try:
            wait_for(settled, 120, "her files read", step=0.3)
        except AssertionError:
            raise AssertionError("tables over time: %s" % seen[::10])
        good = healthy(workload)
        cpu0 = cpu_seconds(good.pid)
        status, body = agent.get("/debug/pprof/profile?seconds=3", timeout=30)
        cpu = cpu_seconds(good.pid) - cpu0
        assert status == 200, body[:300]
        assert agent.healthz(), agent.logs()[-2000:]
        assert agent.fds() < 200, "the agent holds %d descriptors" % agent.fds()
        # The new process is in the profile, fully.
        out = tmp_path / "p.pb.gz"
        out.write_bytes(body)
        mine = pprof_samples(out, good.pid)
        assert abs(mine - cpu * RATE) <= 0.1 * cpu * RATE, (mine, cpu)
        bad.stop()
        # Her process gone, its files go too (kept are the most recent 64
        # descriptors at most, of files no one maps).
        wait_for(lambda: agent.fds() < 120, 30, "descriptors let go")
    finally:
        rc = agent.stop()
    assert rc == 0, agent.logs()[-3000:]


# --- 3. thousands of files: one RCU grace period each --------------------------

def test_thousands_of_files_do_not_stall(taipan, workload, tmp_path, attacker, lair):
    """Each unwind table given to BPF waited for an RCU grace period (8-11 ms
    here), on taipan's only thread: her 4,200 mapped files stalled it for
    tens of seconds, a process that started meanwhile got no samples, and
    -d was not kept. Tables now go to BPF in batches, and one turn of the
    loop does a bounded part of a process's mappings."""
    bad = attack(workload, attacker, lair, "files", os.path.join(lair, "libs"), 4200, 120)
    out = tmp_path / "out.folded"
    seconds = 5
    proc = subprocess.Popen([str(a) for a in (taipan, "record", "-a", "-v", "-r", RATE, "-d", seconds, "-o",
                                              out, "--folded-threads", "--no-kernel", "--stats")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines = []
    t0 = None
    for raw in proc.stderr:
        lines.append(raw.decode(errors="replace"))
        if "sampling at" in lines[-1]:
            t0 = time.time()
            break
    assert t0, "".join(lines)
    # A process that starts while taipan reads her files.
    time.sleep(1)
    good = healthy(workload)
    rest = proc.stderr.read().decode(errors="replace")
    proc.wait(60)
    took = time.time() - t0
    cpu = cpu_seconds(good.pid)
    err = "".join(lines) + rest
    assert proc.returncode == 0, err[-3000:]
    assert took < seconds + 5, "record -d %d took %.1f s" % (seconds, took)
    stacks = parse_folded(out)
    # Started late, it lost its first moments to the chain's start-up: its
    # CPU time counts from its first sample's process start, so allow the
    # interpreter's start-up (under 0.1 s) on top of the 10%.
    mine = total([s for s in stacks if s.pid == good.pid])
    assert mine >= 0.9 * (cpu - 0.1) * RATE and mine <= 1.1 * cpu * RATE, (mine, cpu, err[-2000:])
    assert re.search(r" 0 lost \(ring full\)", err), stat_line(err, "")
    assert total([s for s in stacks if s.pid == bad.pid]) >= 0  # she is profiled, asleep
    scans = re.search(r"(\d+) reads of a process's mappings that left files for the next turn", err)
    assert scans and int(scans.group(1)) > 0, err[-2000:]


# --- 4. memory: one line table, shared by hundreds of code objects -------------

def test_shared_line_table_is_kept_once(taipan, workload, tmp_path, attacker, lair):
    """300 functions whose code objects share one 1 MiB line table made
    taipan copy it 300 times, per process: four such processes (40 MB of
    RSS in all) took taipan to 1.05 GB. The table is now kept once."""
    bad = [attack(workload, attacker, lair, "linetable", 300, 1000, 120) for _ in range(4)]
    m, stacks = record_beside(taipan, tmp_path, [b.pid for b in bad], None, seconds=5)
    named = {f.name for s in stacks for f in s.python if f.name.startswith("shared_")}
    assert len(named) >= 200, sorted(named)[:10]
    shared = int(re.search(r"\((\d+) sharing another's line table\)", m.stderr).group(1))
    assert shared >= len(named) - 8, stat_line(m.stderr, "memory")
    peak = re.search(r"at most ([\d.]+) MiB", stat_line(m.stderr, "memory"))
    assert float(peak.group(1)) < 64, stat_line(m.stderr, "memory")
    assert m.peak_rss_kb < 200 * 1024, "taipan's peak RSS: %d MiB" % (m.peak_rss_kb // 1024)


# --- 5. memory: a symbol table of millions -------------------------------------

def test_huge_symbol_table_is_cut_before_it_is_allocated(taipan, workload, tmp_path, attacker, lair):
    """One ELF of millions of symbols grew taipan's symbol index past every
    bound (490 MB for 10 M symbols: the newest file was exempt). An index
    is now cut at 64 MiB before it is allocated, and the table is read in
    chunks."""
    big = os.path.join(lair, "syms.so")
    elfgen.write(big, 4_000_000, first_names=["attacker_spin"])
    os.chown(big, attacker.pw_uid, attacker.pw_gid)
    bad = attack(workload, attacker, lair, "spin", big, 120)
    good = healthy(workload)
    m, stacks = record_beside(taipan, tmp_path, [bad.pid, good.pid], good.pid, seconds=5)
    assert_healthy_sampled(stacks, good.pid, m.healthy_cpu())
    line = stat_line(m.stderr, "memory")
    assert re.search(r"; 1 indexes cut at their 64 MiB bound", line), line
    # The first symbols were kept: her spinning function is named.
    assert any(f.name == "attacker_spin" for s in stacks if s.pid == bad.pid for f in s.native), \
        [[f.text for f in s.frames] for s in stacks if s.pid == bad.pid][:3]
    assert m.peak_rss_kb < 300 * 1024, "taipan's peak RSS: %d MiB" % (m.peak_rss_kb // 1024)


# --- 6. a container's root: symlinks to the host, FIFOs --------------------------

def test_debug_file_symlinked_to_a_host_file_is_not_read(taipan, workload, tmp_path, attacker, lair):
    """With only unshare -Urm she mounts a tmpfs over her /usr/lib/debug and
    links her library's debug file (by build-id) to a root-only host file,
    and another's to a FIFO. taipan resolved the link against the host and
    put the root-only file's symbols in her profile, and opened the FIFO.
    Now a path in her root resolves there, is opened for reading only once
    it is known to be a regular file, and only if she may read it."""
    unshare = shutil.which("unshare")
    require(unshare, "unshare (util-linux)")
    secret_dir = "/root/taipan-secret-%s" % secrets.token_hex(4)
    os.mkdir(secret_dir, 0o700)
    try:
        bid, bid2 = secrets.token_bytes(20), secrets.token_bytes(20)
        secret = os.path.join(secret_dir, "secret.debug")
        elfgen.write(secret, 1, build_id=bid, first_names=["root_only_secret_symbol"], sym_size=4096)
        os.chmod(secret, 0o600)
        libs = []
        for i, b in enumerate((bid, bid2)):
            p = os.path.join(lair, "lib%d.so" % i)
            elfgen.write(p, 0, build_id=b)
            os.chown(p, attacker.pw_uid, attacker.pw_gid)
            libs.append(p)
        h, h2 = bid.hex(), bid2.hex()
        script = ("set -e; mount -t tmpfs none /usr/lib/debug; mkdir -p /usr/lib/debug/.build-id/{a} "
                  "/usr/lib/debug/.build-id/{c}; ln -s {secret} /usr/lib/debug/.build-id/{a}/{b}.debug; "
                  "mkfifo /usr/lib/debug/.build-id/{c}/{d}.debug; exec {py} {lair}/attacker.py spin {libs} 120"
                  ).format(a=h[:2], b=h[2:], c=h2[:2], d=h2[2:], secret=secret, py=ATTACKER_PY, lair=lair,
                           libs=" ".join(libs))
        bad = subprocess.Popen(as_user_argv(attacker, [unshare, "-Urm", "sh", "-c", script]),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=lair)
        try:
            assert bad.stdout.readline().strip() == b"ready", bad.stderr.read()
            fifo = "/proc/%d/root/usr/lib/debug/.build-id/%s/%s.debug" % (bad.pid, h2[:2], h2[2:])
            opened = watch_opens(fifo)
            # Nothing else opens it (another profiler of every process
            # would: the test could not tell taipan's open from its).
            deadline = time.time() + 10
            while opened() and time.time() < deadline:
                time.sleep(1)
            assert opened() == [], "something other than taipan keeps opening her FIFO"
            m, stacks = record_beside(taipan, tmp_path, [bad.pid], None, seconds=3)
            mine = [s for s in stacks if s.pid == bad.pid]
            names = {f.name for s in mine for f in s.native}
            assert total(mine) > 50
            assert "root_only_secret_symbol" not in names and \
                "root_only_secret_symbol" not in (tmp_path / "out.folded").read_text(), names
            # Her libraries' frames are there, unnamed.
            assert {"lib0.so+0x800", "lib1.so+0x800"} <= names, names
            assert opened() == [], "taipan opened her FIFO"
        finally:
            bad.kill()
            bad.wait()
    finally:
        shutil.rmtree(secret_dir)


def as_user_argv(user, argv):
    from conftest import as_user
    return as_user(user, argv)


def watch_opens(path):
    """Starts watching path for opens (inotify IN_OPEN: an O_PATH open is
    none); returns a function that says whether one happened since."""
    import ctypes
    import select
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert fd >= 0
    assert libc.inotify_add_watch(fd, path.encode(), 0x20) >= 0, ctypes.get_errno()

    def opened():
        """The masks of the events since (IN_OPEN is 0x20)."""
        r, _, _ = select.select([fd], [], [], 0.2)
        if not r:
            return []
        buf = os.read(fd, 65536)
        masks = []
        while buf:
            _, mask, _, n = struct.unpack_from("iIII", buf)
            masks.append(mask)
            buf = buf[16 + n:]
        return [m for m in masks if m & 0x20]
    return opened


# --- 7. work hidden past the 256th thread ---------------------------------------

def test_work_past_the_256th_thread_is_seen(taipan, workload, tmp_path, attacker, lair):
    """The thread-state search visited 256 threads of an interpreter: a
    thread started before 300 idle ones (CPython lists the newest first)
    got no Python stack. Where the search is a bpf_loop it now visits
    16,384."""
    bad = attack(workload, attacker, lair, "threads", 300, 120)
    m, stacks = record_beside(taipan, tmp_path, [bad.pid], None, seconds=3)
    mine = [s for s in stacks if s.pid == bad.pid]
    hidden = total([s for s in mine if any(f.name == "hidden_work" for f in s.python)])
    assert hidden >= 0.9 * total(mine), [[f.text for f in s.frames][:3] for s in mine][:5]
    assert "thread_limit" not in m.stderr, stat_line(m.stderr, "")
