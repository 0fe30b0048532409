#!/usr/bin/env python3
"""bench/attacks.py - what a hostile local user costs taipan (issue 28).

Each attack of tests/functional/test_attacks.py, run as an unprivileged
user (taipan-mallory, made if missing) beside a healthy Python process,
under `taipan record -a` (the agent's view of the host): taipan's exit
status, how long `-d 5` took, the healthy process's samples against its CPU
time, taipan's peak RSS and the most descriptors it held. With --baseline
OTHER, the same for another build, one after the other, in one run.

  bench/attacks.py --taipan build/taipan [--baseline OLD/taipan] [--only NAME]

Needs root. Prints figures; asserts nothing about them.
"""
import argparse
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS = os.path.join(ROOT, "tests", "workloads")
sys.path.insert(0, WORKLOADS)
import elfgen  # noqa: E402

USER = "taipan-mallory"
PY = "/usr/bin/python3.11"
RATE = 200
SECONDS = 5


def user():
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--create-home", "--home-dir", "/var/tmp/" + USER,
                        "--shell", "/bin/sh", "--user-group", USER], check=True)
        return pwd.getpwnam(USER)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Proc:
    def __init__(self, argv, cwd=None):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd)
        line = self.p.stdout.readline()
        assert line.strip() == b"ready", (argv, line)
        self.pid = self.p.pid

    def stop(self):
        self.p.kill()
        self.p.wait()


def as_user(u, argv):
    return ["setpriv", "--reuid=%d" % u.pw_uid, "--regid=%d" % u.pw_gid, "--clear-groups",
            "--inh-caps=-all", "--"] + [str(a) for a in argv]


def healthy_chain():
    return Proc([PY, os.path.join(WORKLOADS, "chain.py"), "120"])


def folded_samples(path, pid):
    n = 0
    with open(path, errors="replace") as f:
        for line in f:
            if "[pid %d]" % pid in line.split(";", 1)[0]:
                n += int(line.rsplit(" ", 1)[1])
    return n


def record(taipan, out, late_healthy=False, prefix=()):
    """record -a -d SECONDS: (rc, wall s, peak RSS MiB, most fds, healthy
    (samples, expected) or None, stderr)."""
    argv = list(prefix) + [taipan, "record", "-a", "-v", "-r", str(RATE), "-d", str(SECONDS), "-o", out,
                           "--folded-threads", "--no-kernel", "--stats"]
    t0 = time.time()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines, state = [], {"cpu0": None, "good": None, "rss": 0, "fds": 0}

    def read():
        for raw in p.stderr:
            line = raw.decode(errors="replace")
            lines.append(line)
            if "sampling at" in line and state["cpu0"] is None:
                if late_healthy:
                    time.sleep(1)
                    state["good"] = healthy_chain()
                    state["cpu0"] = 0.0
                else:
                    state["cpu0"] = cpu_seconds(state["good0"].pid)

    state["good0"] = None if late_healthy else healthy_chain()
    t = threading.Thread(target=read, daemon=True)
    t.start()
    while p.poll() is None and time.time() - t0 < 300:
        try:
            with open("/proc/%d/status" % p.pid) as f:
                m = re.search(r"VmHWM:\s+(\d+)", f.read())
            state["rss"] = max(state["rss"], int(m.group(1)) if m else 0)
            state["fds"] = max(state["fds"], len(os.listdir("/proc/%d/fd" % p.pid)))
        except OSError:
            pass
        time.sleep(0.1)
    if p.poll() is None:
        p.kill()
    p.wait()
    took = time.time() - t0
    t.join(10)
    good = state["good"] or state["good0"]
    health = None
    if good and state["cpu0"] is not None and p.returncode == 0 and os.path.exists(out):
        cpu = cpu_seconds(good.pid) - state["cpu0"]
        health = (folded_samples(out, good.pid), cpu * RATE)
    if good:
        good.stop()
    return p.returncode, took, state["rss"] / 1024, state["fds"], health, "".join(lines)


def lair(u):
    d = tempfile.mkdtemp(prefix="bench-", dir=u.pw_dir)
    for name in ("attacker.py", "elfgen.py", "chain.py"):
        shutil.copy(os.path.join(WORKLOADS, name), d)
    subprocess.run(["chown", "-R", "%d:%d" % (u.pw_uid, u.pw_gid), d], check=True)
    return d


def attack(u, d, *args):
    return Proc(as_user(u, [PY, os.path.join(d, "attacker.py")] + [str(a) for a in args]), cwd=d)


def scenarios(u):
    """(name, set-up returning the attacker processes, record's kwargs)."""
    def truncate(d):
        return [attack(u, d, "truncate", os.path.join(d, "big.so"), 2_000_000, 120)]

    def files(n):
        return lambda d: [attack(u, d, "files", os.path.join(d, "libs"), n, 120)]

    def linetable(d):
        return [attack(u, d, "linetable", 300, 1000, 120) for _ in range(4)]

    def symtab(d):
        p = os.path.join(d, "syms.so")
        elfgen.write(p, 4_000_000, first_names=["attacker_spin"])
        os.chown(p, u.pw_uid, u.pw_gid)
        return [attack(u, d, "spin", p, 120)]

    def threads(d):
        return [attack(u, d, "threads", 300, 120)]

    prlimit = shutil.which("prlimit")
    return [
        ("1. ELF cut while read (2 M symbols)", truncate, {}),
        ("2. 1,100 mapped libraries, 1,024 fds", files(1100),
         {"late_healthy": True, "prefix": [prlimit, "--nofile=1024:1024", "--"]}),
        ("3. 4,200 mapped libraries", files(4200), {"late_healthy": True}),
        ("4. 4 x 300 functions, one 1000 KiB line table", linetable, {}),
        ("5. 4 M symbols", symtab, {}),
        ("7. busy thread behind 300 idle ones", threads, {}),
    ]


def hidden_share(path, pids):
    total = hidden = 0
    with open(path, errors="replace") as f:
        for line in f:
            head = line.split(";", 1)[0]
            if not any("[pid %d]" % p in head for p in pids):
                continue
            n = int(line.rsplit(" ", 1)[1])
            total += n
            hidden += n if "hidden_work" in line else 0
    return hidden / total if total else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--taipan", required=True)
    ap.add_argument("--baseline")
    ap.add_argument("--only", help="run the scenarios whose name contains this")
    args = ap.parse_args()
    if os.geteuid() != 0 or not os.path.exists(PY):
        sys.exit("bench/attacks.py: needs root and %s" % PY)
    u = user()
    builds = [("this build", os.path.abspath(args.taipan))]
    if args.baseline:
        builds.append(("baseline", os.path.abspath(args.baseline)))
    print("%-46s %-10s %4s %7s %17s %9s %5s  %s" % ("attack", "build", "rc", "wall s", "healthy samples",
                                                   "peak RSS", "fds", "notes"))
    for name, setup, kw in scenarios(u):
        if args.only and args.only not in name:
            continue
        for label, taipan in builds:
            d = lair(u)
            bad = setup(d)
            out = os.path.join(tempfile.mkdtemp(), "out.folded")
            try:
                rc, took, rss, fds, health, err = record(taipan, out, **kw)
            finally:
                for b in bad:
                    b.stop()
                shutil.rmtree(d, ignore_errors=True)
            hs = "%d / %d" % (health[0], health[1]) if health else "-"
            notes = ""
            if rc == 0 and "idle" in name:
                notes = "busy thread in %.0f%% of her samples" % (100 * hidden_share(out, [b.pid for b in bad]))
            m = re.search(r"(\d+) lost \(ring full\)", err)
            if m:
                notes += (" " if notes else "") + "%s lost" % m.group(1)
            print("%-46s %-10s %4s %7.1f %17s %6.0f MiB %5d  %s" % (name, label, rc, took, hs, rss, fds, notes),
                  flush=True)


main()
