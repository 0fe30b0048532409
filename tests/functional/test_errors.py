"""Bad input gets a clear one-line error, and a recording that ends early still
writes its profile."""

import os
import re
import select
import shutil
import signal
import struct
import subprocess
import time

from conftest import (cpu_seconds, error_lines, go_pprof, parse_folded, pyenv, record, require, run_on_sleeper,
                      run_taipan, total)

PY311 = "/usr/bin/python3.11"


def test_pid_that_does_not_exist(taipan, tmp_path):
    res = run_taipan(taipan, ["record", "-p", "999999999"[:7], "-d", "1", "-o", tmp_path / "x.folded"])
    assert res.returncode != 0
    errs = error_lines(res.stderr)
    assert len(errs) == 1 and "no such process" in errs[0], res.stderr
    assert not (tmp_path / "x.folded").exists()


def test_pid_that_is_not_python(taipan, tmp_path):
    res, pid = run_on_sleeper(taipan, ["record", "-d", "1", "-o", tmp_path / "x.folded"])
    assert res.returncode != 0
    errs = error_lines(res.stderr)
    assert len(errs) == 1 and "not a Python process" in errs[0] and str(pid) in errs[0], res.stderr


def test_target_exits_during_recording_keeps_partial_profile(taipan, workload, tmp_path):
    w = workload(pyenv("pyenv-3.12"), "chain.py", 4)
    out = tmp_path / "x.folded"
    t0 = time.time()
    res = run_taipan(taipan, ["record", "-p", w.pid, "-d", "30", "-o", out, "--folded-threads"])
    assert res.returncode == 0, res.stderr
    assert time.time() - t0 < 15, "did not stop when the target exited"
    assert "target exited" in res.stderr
    stacks = parse_folded(out)
    assert total(stacks) > 20
    assert any(f.name == "Worker.run" for s in stacks for f in s.python)


def _patch_py_version(src, dst, hexversion):
    """Copies an executable, setting its Py_Version constant (a root profiler
    reads it; the interpreter itself never does)."""
    syms = subprocess.run(["nm", "-D", "--defined-only", src], stdout=subprocess.PIPE, check=True, text=True).stdout
    vaddr = next(int(l.split()[0], 16) for l in syms.splitlines() if l.endswith(" Py_Version"))
    phdrs = subprocess.run(["readelf", "-lW", src], stdout=subprocess.PIPE, check=True, text=True).stdout
    for line in phdrs.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            off, va, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if va <= vaddr < va + filesz:
                fileoff = off + vaddr - va
                break
    else:
        raise AssertionError("Py_Version not in a loaded segment")
    shutil.copy2(src, dst)
    with open(dst, "r+b") as f:
        f.seek(fileoff)
        f.write(struct.pack("<Q", hexversion))


def test_unsupported_version_is_refused(taipan, workload, tmp_path):
    require(PY311, "Debian python3.11")
    fake = str(tmp_path / "python3.11")
    _patch_py_version(PY311, fake, 0x030500F0)  # 3.5.0
    w = workload(fake, "chain.py", 20)
    res = run_taipan(taipan, ["record", "-p", w.pid, "-d", "1", "-o", tmp_path / "x.folded"])
    assert res.returncode != 0
    errs = error_lines(res.stderr)
    assert len(errs) == 1 and "Python 3.5.0 is not supported" in errs[0], res.stderr


def test_debug_offsets_that_do_not_validate_are_refused(taipan, workload, tmp_path):
    py = pyenv("pyenv-3.13")
    script = tmp_path / "corrupt.py"
    script.write_text(
        "import ctypes, sys, time\n"
        "rt = ctypes.c_char.in_dll(ctypes.pythonapi, '_PyRuntime')\n"
        "ctypes.memmove(ctypes.addressof(rt), b'Xdebugpy', 8)  # the cookie\n"
        "print('ready', flush=True)\n"
        "end = time.time() + 20\n"
        "while time.time() < end: pass\n")
    w = workload(py, str(script))
    res = run_taipan(taipan, ["record", "-p", w.pid, "-d", "1", "-o", tmp_path / "x.folded"])
    assert res.returncode != 0
    errs = error_lines(res.stderr)
    assert len(errs) == 1 and "cookie" in errs[0], res.stderr


def test_ctrl_c_writes_the_profile(taipan, workload, tmp_path):
    w = workload(pyenv("pyenv-3.11"), "chain.py", 60)
    out = tmp_path / "x.pb.gz"
    proc = subprocess.Popen([taipan, "record", "-v", "-p", str(w.pid), "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Ctrl-C once sampling runs (-v says so), then once samples came in.
    seen, deadline = b"", time.time() + 60
    while b"Ctrl-C stops" not in seen and time.time() < deadline and proc.poll() is None:
        if select.select([proc.stderr], [], [], 1)[0]:
            seen += os.read(proc.stderr.fileno(), 65536)
    assert b"Ctrl-C stops" in seen, seen
    # The workload has run 0.3 s on a CPU since, so there are samples.
    start = cpu_seconds(w.pid)
    while cpu_seconds(w.pid) - start < 0.3 and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    err = seen + err
    assert proc.returncode == 0, err
    assert b"interrupted" in err
    assert out.exists() and out.stat().st_size > 0
    raw = go_pprof("-raw", out)
    assert "Worker.run" in raw


def test_usage_errors(taipan, tmp_path):
    res = run_taipan(taipan, ["record", "-o", tmp_path / "x.folded"])
    assert res.returncode == 2 and "needs -p PID, -a or -- COMMAND" in res.stderr
    res = run_taipan(taipan, ["record", "-a", "-p", "1", "-o", tmp_path / "x.folded"])
    assert res.returncode == 2 and "give one of" in res.stderr
    res = run_taipan(taipan, ["record", "--comm", "x", "-p", "1", "-o", tmp_path / "x.folded"])
    assert res.returncode == 2 and "filter -a" in res.stderr
    res = run_taipan(taipan, ["record", "-p", "1", "-o", tmp_path / "x.svg"])
    assert res.returncode == 2 and "cannot tell the format" in res.stderr
    res = run_taipan(taipan, ["record", "-r", "0", "-p", "1"])
    assert res.returncode == 2 and "--rate" in res.stderr
    res = run_taipan(taipan, ["record", "-d", "2", "-o", tmp_path / "x.folded", "--", "/nonexistent/python"])
    assert "cannot run /nonexistent/python" in res.stderr
    res = run_taipan(taipan, ["frobnicate"])
    assert res.returncode == 2 and "unknown command" in res.stderr


def test_option_errors_have_the_documented_prefix(taipan):
    # EXIT STATUS in the manual promises "taipan: error:" on every failure
    # line; getopt's own messages ("record: invalid option -- 'x'") had none.
    cases = [(["record", "--bogus"], "unknown option '--bogus'"),
             (["record", "-r"], "option '-r' needs a value"),
             (["record", "--rate"], "option '--rate' needs a value"),
             (["record", "--quiet=1"], "option '--quiet' takes no value"),
             (["dump", "-x"], "unknown option '-x'"),
             (["top", "-qZ"], "unknown option"),
             (["agent", "--nope=3"], "unknown option '--nope'")]
    for args, want in cases:
        res = run_taipan(taipan, args)
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2, (args, res.stderr)
        assert len(lines) == 1 and lines[0].startswith("taipan: error: %s: " % args[0]), (args, lines)
        assert want in lines[0] and "try 'taipan help %s'" % args[0] in lines[0], (args, lines)


def test_help_explains_every_option(taipan):
    res = run_taipan(taipan, ["help", "record"])
    assert res.returncode == 0
    for opt in ["--pid", "--duration", "--rate", "--output", "--format", "--no-kernel",
                "--folded-lines", "--folded-threads", "--stats", "--quiet", "--service", "examples:"]:
        assert opt in res.stdout, opt
    assert run_taipan(taipan, ["--help"]).returncode == 0


def test_pprof_read_by_go_tool_pprof(taipan, interp, workload, tmp_path):
    w = workload(interp, "chain.py", 30)
    out = tmp_path / "x.pb.gz"
    record(taipan, out, w.pid, seconds=1, rate=1000)
    top = go_pprof("-top", "-cum", out)  # by cum: native frames make many nodes
    inner = "Worker.run.<locals>.inner" if interp.has_qualname else "inner"
    rows = {}
    for line in top.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[1].endswith("%"):
            rows[" ".join(parts[5:])] = (float(parts[1][:-1]), float(parts[4][:-1]))
    # inner is where the time goes: itself, or the C code it runs (cum);
    # its callers carry it all
    assert rows[inner][1] >= 90, top
    for caller in ("Worker.run", "main", "<module>"):
        assert rows[caller][1] >= 95, top
    lines = go_pprof("-lines", "-top", out)
    assert "chain.py:" in lines
    raw = go_pprof("-raw", out)
    assert "pid:[%d]" % w.pid in raw.replace(" ", "") or str(w.pid) in raw


def _py_cmd(code):
    return [pyenv("pyenv-3.12"), "-c", code]


SPIN = "import time\nt = time.time()\nwhile time.time() < t + %s: pass\n"


def test_command_status_is_passed_through(taipan, tmp_path):
    """Like time and perf record: COMMAND's exit code, 128+N for signal N."""
    out = tmp_path / "x.folded"
    res = run_taipan(taipan, ["record", "-o", out, "--"] + _py_cmd(SPIN % 0.3 + "import sys; sys.exit(3)"))
    assert res.returncode == 3, res.stderr
    assert out.exists() and "exited with status 3" in res.stderr
    res = run_taipan(taipan, ["record", "-o", out, "--"] +
                     _py_cmd(SPIN % 0.3 + "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"))
    assert res.returncode == 128 + signal.SIGTERM, res.stderr
    assert "killed by signal 15" in res.stderr


def test_command_that_cannot_start(taipan, tmp_path):
    """127 for a command not found, 126 for one that is not executable, as a
    shell says; an error that names it, and no profile."""
    out = tmp_path / "x.folded"
    res = run_taipan(taipan, ["record", "-o", out, "--", "/nonexistent/python"])
    assert res.returncode == 127, res.stderr
    errs = error_lines(res.stderr)
    assert errs == ["taipan: error: cannot run /nonexistent/python: No such file or directory"], res.stderr
    res = run_taipan(taipan, ["record", "-o", out, "--", "taipan-no-such-command"])
    assert res.returncode == 127 and "not found in PATH" in res.stderr, res.stderr
    script = tmp_path / "script.py"
    script.write_text("print('hi')\n")
    script.chmod(0o644)
    res = run_taipan(taipan, ["record", "-o", out, "--", script])
    assert res.returncode == 126, res.stderr
    assert "cannot run %s: Permission denied" % script in res.stderr
    assert not out.exists()


def _wait_file(path, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError("%s never written" % path)


def test_duration_ends_the_command(taipan, tmp_path):
    """At the end of -d the command gets SIGTERM (SIGKILL after the grace
    period if it ignores that), the profile is written, and taipan exits 0."""
    for ignore in (False, True):
        pidfile = tmp_path / ("pid-%s" % ignore)
        code = ("import os, signal\n" + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore else "") +
                "open(%r, 'w').write(str(os.getpid()))\n" % str(pidfile) + SPIN % 120)
        out = tmp_path / ("x-%s.folded" % ignore)
        t0 = time.time()
        res = run_taipan(taipan, ["record", "-d", "1", "-o", out, "--"] + _py_cmd(code))
        assert res.returncode == 0, res.stderr
        assert time.time() - t0 < 30
        pid = int(_wait_file(pidfile))
        assert not os.path.exists("/proc/%d" % pid), "the command still runs after -d"
        assert out.exists() and total(parse_folded(out, threads=False)) > 0
        assert "sent it SIGTERM" in res.stderr
        assert ("did not end on SIGTERM: sending SIGKILL" in res.stderr) == ignore, res.stderr


def test_thread_id_means_its_process(taipan, workload, tmp_path):
    w = workload(pyenv("pyenv-3.12"), "threads.py", 30)
    tids = [int(t) for t in os.listdir("/proc/%d/task" % w.pid) if int(t) != w.pid]
    out = tmp_path / "x.folded"
    res = record(taipan, out, tids[0], seconds=1, quiet=False, extra=["--folded-threads"])
    assert "%d is a thread of process %d" % (tids[0], w.pid) in res.stderr
    assert {s.pid for s in parse_folded(out)} == {w.pid}
    assert "from 1 profiled process," in res.stderr


def test_same_process_twice_is_one(taipan, workload, tmp_path):
    w = workload(pyenv("pyenv-3.12"), "threads.py", 30)
    tid = next(int(t) for t in os.listdir("/proc/%d/task" % w.pid) if int(t) != w.pid)
    res = record(taipan, tmp_path / "x.folded", [w.pid, w.pid, tid, w.pid], seconds=1, quiet=False)
    assert "from 1 profiled process," in res.stderr, res.stderr


def test_zombie_is_said_to_have_exited(taipan, tmp_path):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
        res = run_taipan(taipan, ["record", "-p", pid, "-d", "1", "-o", tmp_path / "x.folded"])
    finally:
        os.waitpid(pid, 0)
    assert res.returncode == 1
    errs = error_lines(res.stderr)
    assert len(errs) == 1 and "has exited (a zombie" in errs[0], res.stderr


def _terminal(raw):
    """The lines a terminal shows for raw output: \\r goes back to the start
    of the line, ESC[K clears what follows."""
    lines = []
    for text in raw.replace("\r\n", "\n").split("\n"):
        line, col, i = [], 0, 0
        while i < len(text):
            if text[i] == "\r":
                col, i = 0, i + 1
            elif text.startswith("\x1b[K", i):
                del line[col:]
                i += 3
            else:
                line[col:col + 1] = [text[i]]
                col, i = col + 1, i + 1
        lines.append("".join(line))
    return lines


def test_progress_line_ends_clean(taipan, workload, tmp_path):
    """On a terminal the last progress line replaces the ones before it
    entirely ("recording" was longer than "recorded")."""
    require(shutil.which("script"), "script (util-linux), for a terminal")
    # Idle: every line says 0 samples, so only the word differs in length.
    w = workload(pyenv("pyenv-3.12"), "blocked.py", 30, 2)
    cmd = "%s record -p %d -d 2.5 -o %s" % (taipan, w.pid, tmp_path / "x.folded")
    res = subprocess.run(["script", "-qec", cmd, "/dev/null"], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         timeout=60)
    raw = res.stdout.decode(errors="replace")
    assert res.returncode == 0, raw
    assert "\rtaipan: recording" in raw, "no progress line: %r" % raw
    final = [l for l in _terminal(raw) if l.startswith("taipan: recorded")]
    assert len(final) == 1 and re.fullmatch(r"taipan: recorded [\d.]+s, 0 samples, 1 process, 0 lost", final[0]), \
        repr(final)


def test_stats_are_those_of_the_stop(taipan, workload, tmp_path):
    """--stats counts what was sampled until the stop, not while the profile
    was written: every perf sample of one known busy process is a stack."""
    w = workload(pyenv("pyenv-3.12"), "deep.py", 30, 900)
    res = record(taipan, tmp_path / "x.html", w.pid, seconds=1, rate=2000, quiet=False, extra=["--stats"])
    m = re.search(r"stats: (\d+) perf samples in targets, (\d+) stacks recorded, (\d+) lost \(ring full\)", res.stderr)
    assert m, res.stderr
    perf, stacks, ring = (int(x) for x in m.groups())
    assert perf == stacks + ring, res.stderr
