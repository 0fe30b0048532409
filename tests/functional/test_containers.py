"""Where the process lives: roots, pid and mount namespaces, deleted or
replaced binaries, embedders, and several Python versions at once."""

import os
import shutil
import subprocess
import time

import pytest

from conftest import (CHAIN_NAMES, ROOT_WORKLOADS, WORKLOADS, Workload, copy_workloads, go_pprof, interpreter,
                      record, record_folded, require, total)

# How these tests record: 300 Hz, and not quiet (some check what -v says).
RECORD = dict(rate=300, quiet=False)


def assert_chain(stacks, pid, file_path=None):
    mine = [s for s in stacks if s.pid == pid]
    assert total(mine) >= 50, "%d samples of pid %d" % (total(mine), pid)
    for s in mine:
        names = [f.name for f in s.python]
        assert names[:3] == CHAIN_NAMES, names
        if file_path:
            assert all(f.file == file_path for f in s.python), [f.file for f in s.python]


def child_of(pid, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        out = subprocess.run(["pgrep", "-P", str(pid)], stdout=subprocess.PIPE, text=True).stdout.split()
        if out:
            return int(out[0])
        time.sleep(0.05)
    raise AssertionError("no child of %d" % pid)


def test_root_process_has_its_own_file_names(taipan, tmp_path):
    it = interpreter("sid-3.14")
    # The interpreter exists only inside the root: taipan must reach it
    # through /proc/PID/root or map_files.
    assert not os.path.exists(it.path), "%s exists on the host too" % it.path
    w = Workload(it, "chain.py", 30).wait_ready()
    try:
        stacks, res = record_folded(taipan, tmp_path, w.pid, extra=["--no-kernel", "-v"], **RECORD)
    finally:
        w.stop()
    assert_chain(stacks, w.pid, ROOT_WORKLOADS + "/chain.py")
    assert "3.14" in res.stderr


def test_315_runs_on_debug_offsets_alone(taipan, tmp_path):
    """The generated layout table stops at 3.12; 3.15's offsets can only come
    from the process's own _Py_DebugOffsets."""
    table = open(os.path.join(os.path.dirname(WORKLOADS), "..", "src", "cpython", "gen", "pyoffsets_table.c")).read()
    # The walk's table; the supplementary one after it holds only what
    # _Py_DebugOffsets lacks (the dict layouts thread names need).
    table = table.split("py_layout_supp_table")[0]
    assert ".hexversion = 0x030f" not in table and ".hexversion = 0x030d" not in table
    it = interpreter("sid-3.15")
    w = Workload(it, "chain.py", 30).wait_ready()
    try:
        stacks, res = record_folded(taipan, tmp_path, w.pid, extra=["--no-kernel", "-v"], **RECORD)
    finally:
        w.stop()
    assert_chain(stacks, w.pid)
    assert "Python 3.15" in res.stderr and "offsets from _Py_DebugOffsets read from the process" in res.stderr


@pytest.mark.parametrize("ident", ["pyenv-3.12", "sid-3.15"])
def test_own_pid_and_mount_namespace(taipan, tmp_path, ident):
    it = interpreter(ident)
    if it.root:
        # a new mount namespace with the root's own /proc, then chroot
        inner = 'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"'
        script = os.path.join(ROOT_WORKLOADS, "chain.py")
        copy_workloads(it.root)
        cmd = ["unshare", "--mount", "--pid", "--fork", "sh", "-c", inner, it.root, it.path, script, "30"]
    else:
        cmd = ["unshare", "--mount", "--pid", "--fork", "--mount-proc", it.path,
               os.path.join(WORKLOADS, "chain.py"), "30"]
    outer = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = outer.stdout.readline()
        assert line.strip() == b"ready", line + outer.stderr.read()
        pid = child_of(outer.pid)
        stacks, _ = record_folded(taipan, tmp_path, pid, extra=["--no-kernel"], **RECORD)
        assert_chain(stacks, pid)
        pprof = tmp_path / "out.pb.gz"
        record(taipan, pprof, pid, seconds=1, rate=100)
        raw = go_pprof("-raw", pprof)
        # labelled with the host pid, and the pid inside the namespace (1)
        assert "pid:[%d]" % pid in raw.replace(" ", "") and "ns_pid:[1]" in raw.replace(" ", ""), raw[-2000:]
    finally:
        outer.kill()
        outer.wait()
        subprocess.run(["pkill", "-KILL", "-f", "chain.py 30"])


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_binary_deleted_or_replaced_after_start(taipan, tmp_path, how):
    src = "/usr/bin/python3.11"
    require(src, "Debian python3.11")
    exe = str(tmp_path / "python3.11")
    shutil.copy2(src, exe)
    w = Workload(exe, "chain.py", 30).wait_ready()
    try:
        if how == "deleted":
            os.unlink(exe)
        else:
            with open(exe + ".new", "w") as f:
                f.write("#!/bin/sh\necho not python\n")
            os.chmod(exe + ".new", 0o755)
            os.rename(exe + ".new", exe)
        assert os.readlink("/proc/%d/exe" % w.pid).endswith("(deleted)")
        stacks, _ = record_folded(taipan, tmp_path, w.pid, extra=["--no-kernel"], **RECORD)
    finally:
        w.stop()
    assert_chain(stacks, w.pid)


def test_c_program_embedding_libpython(taipan, tmp_path):
    config = "/usr/bin/python3.11-config"
    require(config, "libpython3.11-dev (python3.11-config)")
    flags = subprocess.run([config, "--cflags", "--ldflags", "--embed"], stdout=subprocess.PIPE,
                           text=True, check=True).stdout.split()
    exe = str(tmp_path / "embedder")
    subprocess.run(["gcc", "-o", exe, os.path.join(WORKLOADS, "embed.c"), "-Wno-deprecated-declarations"]
                   + flags, check=True)
    proc = subprocess.Popen([exe, os.path.join(WORKLOADS, "chain.py"), "30"], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        maps = open("/proc/%d/maps" % proc.pid).read()
        assert "libpython3.11.so" in maps
        stacks, _ = record_folded(taipan, tmp_path, proc.pid, extra=["--no-kernel"], **RECORD)
        assert_chain(stacks, proc.pid)
        assert {s.comm for s in stacks if s.pid == proc.pid} == {"embedder"}
    finally:
        proc.kill()
        proc.wait()


def test_two_versions_in_one_recording(taipan, tmp_path):
    old, new = interpreter("pyenv-3.8"), interpreter("sid-3.15")
    a = " ".join(old.argv(os.path.join(WORKLOADS, "chain.py"), 2))
    b = " ".join(new.argv(os.path.join(WORKLOADS, "chain.py"), 2))
    out = tmp_path / "out.pb.gz"
    record(taipan, out, ["sh", "-c", "%s & %s & wait" % (a, b)], seconds=None, rate=300)
    raw = go_pprof("-raw", out).replace(" ", "")
    assert "python_version:[3.8.18]" in raw and "python_version:[3.15." in raw, raw[-3000:]
    top = go_pprof("-top", "-cum", out)  # by cum: native frames make many nodes
    assert "Worker.run" in top
