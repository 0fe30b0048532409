"""Bad input gets a clear one-line error, and a recording that ends early still
writes its profile."""

import shutil
import signal
import struct
import subprocess
import time

from conftest import error_lines, go_pprof, parse_folded, pyenv, record, require, run_on_sleeper, run_taipan, total

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
    w = workload(pyenv("pyenv-3.12"), "chain.py", 1.5)
    out = tmp_path / "x.folded"
    t0 = time.time()
    res = run_taipan(taipan, ["record", "-p", w.pid, "-d", "30", "-o", out, "--folded-threads"])
    assert res.returncode == 0, res.stderr
    assert time.time() - t0 < 10, "did not stop when the target exited"
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
    proc = subprocess.Popen([taipan, "record", "-p", str(w.pid), "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
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
                "--folded-lines", "--folded-threads", "--stats", "--quiet", "examples:"]:
        assert opt in res.stdout, opt
    assert run_taipan(taipan, ["--help"]).returncode == 0


def test_pprof_read_by_go_tool_pprof(taipan, interp, workload, tmp_path):
    w = workload(interp, "chain.py", 30)
    out = tmp_path / "x.pb.gz"
    record(taipan, out, w.pid)
    top = go_pprof("-top", out)
    inner = "Worker.run.<locals>.inner" if interp.has_qualname else "inner"
    rows = {}
    for line in top.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[1].endswith("%"):
            rows[" ".join(parts[5:])] = (float(parts[1][:-1]), float(parts[4][:-1]))
    # inner is where the time goes (flat); its callers carry it all (cum)
    assert rows[inner][0] >= 90, top
    for caller in ("Worker.run", "main", "<module>"):
        assert rows[caller][1] >= 95, top
    lines = go_pprof("-lines", "-top", out)
    assert "chain.py:" in lines
    raw = go_pprof("-raw", out)
    assert "pid:[%d]" % w.pid in raw.replace(" ", "") or str(w.pid) in raw
