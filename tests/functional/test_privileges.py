"""Least privilege: taipan records with CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE
alone, and without one of them fails with a message that names it. The
optional capabilities (CAP_SYSLOG for kernel symbols, CAP_CHECKPOINT_RESTORE
for deleted binaries) and what taipan never does to a target: write into it,
run its files, or write its own output through a symlink or over another
user's file.

Capabilities are cut with setpriv (util-linux): for root, an exec gets the
bounding set, so `setpriv --bounding-set=-all,+bpf,... --inh-caps=-all taipan`
runs taipan as root with exactly those capabilities."""

import os
import pwd
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import ROOT, WORKLOADS, parse_folded, pyenv, require

MIN = ["bpf", "perfmon", "sys_ptrace"]
CAP_NUMBERS = {"sys_ptrace": 19, "sys_admin": 21, "syslog": 34, "perfmon": 38, "bpf": 39,
               "checkpoint_restore": 40, "dac_read_search": 2, "kill": 5}
CHAIN = os.path.join(WORKLOADS, "chain.py")


def need(tool):
    path = shutil.which(tool)
    require(path, tool)
    return path


def caps_argv(keep):
    need("setpriv")
    return ["setpriv", "--bounding-set=" + "".join(["-all"] + [",+" + c for c in keep]), "--inh-caps=-all"]


def with_caps(keep, argv, timeout=60):
    res = subprocess.run(caps_argv(keep) + [str(a) for a in argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=timeout)
    res.stdout = res.stdout.decode(errors="replace")
    res.stderr = res.stderr.decode(errors="replace")
    return res


def test_setpriv_leaves_exactly_those_capabilities(taipan):
    res = with_caps(MIN, ["grep", "^CapEff", "/proc/self/status"])
    want = sum(1 << CAP_NUMBERS[c] for c in MIN)
    assert int(res.stdout.split()[1], 16) == want, res.stdout


@pytest.mark.parametrize("version", ["2.7", "3.12"])
def test_record_with_the_minimum(taipan, workload, tmp_path, version):
    w = workload(pyenv("pyenv-" + version), "chain.py", 60)
    out = tmp_path / "out.folded"
    res = with_caps(MIN, [taipan, "record", "-q", "--no-kernel", "-p", w.pid, "-d", 2, "-o", out,
                          "--folded-threads"])
    assert res.returncode == 0, res.stderr
    stacks = [s for s in parse_folded(out) if s.pid == w.pid]
    assert sum(s.count for s in stacks) >= 50
    assert all("Worker.run" in [f.name for f in s.python] for s in stacks)


def test_record_a_command_with_the_minimum(taipan, tmp_path):
    out = tmp_path / "out.folded"
    res = with_caps(MIN, [taipan, "record", "-q", "-o", out, "--", pyenv("pyenv-3.9"), CHAIN, 1])
    assert res.returncode == 0, res.stderr
    assert "Worker.run" in out.read_text()


def test_dump_needs_only_ptrace(taipan, workload):
    w = workload(pyenv("pyenv-3.12"), "chain.py", 60)
    res = with_caps(["sys_ptrace"], [taipan, "dump", "-p", w.pid])
    assert res.returncode == 0, res.stderr
    assert "Worker.run" in res.stdout


@pytest.mark.parametrize("missing", MIN)
def test_record_without_one_names_it(taipan, workload, tmp_path, missing):
    w = workload(pyenv("pyenv-3.12"), "chain.py", 60)
    keep = [c for c in MIN if c != missing]
    res = with_caps(keep, [taipan, "record", "-q", "-p", w.pid, "-d", 1, "-o", tmp_path / "out.folded"])
    assert res.returncode == 1, res.stderr
    assert "CAP_" + missing.upper() in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_dump_without_ptrace_names_it(taipan, workload):
    w = workload(pyenv("pyenv-3.12"), "chain.py", 60)
    res = with_caps([], [taipan, "dump", "-p", w.pid])
    assert res.returncode == 1, res.stderr
    assert "CAP_SYS_PTRACE" in res.stderr, res.stderr


def kernel_frames_with(taipan, w, tmp_path, keep, env_prefix=()):
    out = tmp_path / "out.folded"
    res = with_caps(keep, list(env_prefix) + [taipan, "record", "-p", w.pid, "-d", 1, "-o", out])
    assert res.returncode == 0, res.stderr
    frames = [x for line in out.read_text().splitlines()
              for x in line.rpartition(" ")[0].split(";") if x.endswith("_[k]")]
    assert frames, out.read_text()[:500]
    return frames, res.stderr


def syscalls_workload(workload):
    py = "/usr/bin/python3.11"
    if not os.path.exists(py):
        pytest.skip("no /usr/bin/python3.11")
    return workload(py, "syscalls.py", 60)


def test_kernel_symbols_named_by_the_kernel_need_no_syslog(taipan, workload, tmp_path):
    """Where the kernel names kernel addresses itself (a BPF syscall program,
    5.14+), CAP_BPF and CAP_PERFMON are enough: names, no addresses, and
    /proc/kallsyms is not read."""
    w = syscalls_workload(workload)
    frames, err = kernel_frames_with(taipan, w, tmp_path, MIN)
    assert not any(f.startswith("0x") for f in frames), frames[:5]
    assert any(f.startswith(("do_syscall_64", "entry_SYSCALL_64")) for f in frames), frames[:20]
    assert "kallsyms" not in err, err


def test_kernel_symbols_from_kallsyms_need_syslog(taipan, workload, tmp_path):
    """TAIPAN_BPF_KSYMS=0 (and kernels before 5.14) read /proc/kallsyms,
    whose addresses need CAP_SYSLOG while kernel.perf_event_paranoid > 1."""
    with open("/proc/sys/kernel/perf_event_paranoid") as f:
        if int(f.read()) <= 1:
            pytest.skip("kernel.perf_event_paranoid <= 1 shows kallsyms to everyone")
    w = syscalls_workload(workload)
    env = ["env", "TAIPAN_BPF_KSYMS=0"]
    frames, err = kernel_frames_with(taipan, w, tmp_path, MIN, env)
    assert all(re.match(r"^0x[0-9a-f]+_\[k\]$", f) for f in frames), frames[:5]
    assert "kallsyms" in err, err
    frames, err = kernel_frames_with(taipan, w, tmp_path, MIN + ["syslog"], env)
    assert not any(f.startswith("0x") for f in frames), frames[:5]
    assert "kallsyms" not in err, err


def test_deleted_binary_needs_checkpoint_restore(taipan, workload, tmp_path):
    """A static interpreter whose file is gone is read through
    /proc/PID/map_files, which the kernel opens only with
    CAP_CHECKPOINT_RESTORE (or CAP_SYS_ADMIN)."""
    py = "/usr/bin/python3.11"
    if not os.path.exists(py):
        pytest.skip("no /usr/bin/python3.11")
    copy = tmp_path / "python3.11"
    shutil.copy(py, copy)
    w = workload(str(copy), "chain.py", 60)
    os.unlink(copy)
    res = with_caps(MIN, [taipan, "dump", "-p", w.pid])
    assert res.returncode == 1, res.stderr
    assert "was deleted" in res.stderr and "CAP_CHECKPOINT_RESTORE" in res.stderr, res.stderr
    res = with_caps(MIN + ["checkpoint_restore"], [taipan, "dump", "-p", w.pid])
    assert res.returncode == 0, res.stderr


def test_private_directory_needs_dac_read_search(taipan, tmp_path):
    """Another user's interpreter in a directory only that user can enter:
    root without CAP_DAC_READ_SEARCH cannot reach it, by any path."""
    py = "/usr/bin/python3.11"
    if not os.path.exists(py):
        pytest.skip("no /usr/bin/python3.11")
    need("setpriv")
    nobody = pwd.getpwnam("nobody")
    with tempfile.TemporaryDirectory(prefix="taipan-private-") as d:
        for src in (py, CHAIN):
            shutil.copy(src, d)
        for f in [d] + [os.path.join(d, x) for x in os.listdir(d)]:
            os.chown(f, nobody.pw_uid, nobody.pw_gid)
        os.chmod(d, 0o700)
        w = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=%d" % nobody.pw_gid,
                              "--clear-groups", os.path.join(d, "python3.11"),
                              os.path.join(d, "chain.py"), "60"], stdout=subprocess.PIPE)
        try:
            assert w.stdout.readline().strip() == b"ready"
            res = with_caps(MIN, [taipan, "dump", "-p", w.pid])
            assert res.returncode == 1, res.stderr
            assert "CAP_DAC_READ_SEARCH" in res.stderr, res.stderr
            res = with_caps(MIN + ["dac_read_search"], [taipan, "dump", "-p", w.pid])
            assert res.returncode == 0 and "Worker.run" in res.stdout, res.stderr
        finally:
            w.kill()
            w.wait()
            w.stdout.close()


def test_not_root_with_bpf_and_perfmon_profiles_its_own_command(taipan, tmp_path):
    """An ordinary user granted CAP_BPF and CAP_PERFMON (ambient, so they
    survive the change of user) profiles a command it starts itself: the
    command runs as that user, so no ptrace capability is needed."""
    need("setpriv")
    nobody = pwd.getpwnam("nobody")
    py = "/usr/bin/python3.11"
    if not os.path.exists(py):
        pytest.skip("no /usr/bin/python3.11")
    # pytest's tmp_path is private to root: a directory nobody can reach.
    with tempfile.TemporaryDirectory(prefix="taipan-nobody-") as outdir:
        os.chown(outdir, nobody.pw_uid, nobody.pw_gid)
        out = os.path.join(outdir, "out.folded")
        res = subprocess.run(["setpriv", "--reuid=nobody", "--regid=%d" % nobody.pw_gid,
                              "--clear-groups", "--inh-caps=+bpf,+perfmon",
                              "--ambient-caps=+bpf,+perfmon",
                              taipan, "record", "-q", "-o", out, "--", py, CHAIN, "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        assert res.returncode == 0, res.stderr.decode()
        with open(out) as f:
            assert "Worker.run" in f.read()
        assert os.stat(out).st_uid == nobody.pw_uid


def test_not_root_profiles_another_users_process(taipan, workload):
    """A non-root user with CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE and
    CAP_DAC_READ_SEARCH (the target's /proc/PID/map_files and its files in
    /root are not readable to it otherwise) profiles root's process."""
    need("setpriv")
    nobody = pwd.getpwnam("nobody")
    w = workload(pyenv("pyenv-3.12"), "chain.py", 60)
    caps = "+bpf,+perfmon,+sys_ptrace,+dac_read_search"
    with tempfile.TemporaryDirectory(prefix="taipan-nobody-") as outdir:
        os.chown(outdir, nobody.pw_uid, nobody.pw_gid)
        out = os.path.join(outdir, "out.folded")
        res = subprocess.run(["setpriv", "--reuid=nobody", "--regid=%d" % nobody.pw_gid,
                              "--clear-groups", "--inh-caps=" + caps, "--ambient-caps=" + caps,
                              taipan, "record", "-p", str(w.pid), "-d", "2", "-o", out],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        err = res.stderr.decode()
        assert res.returncode == 0, err
        assert "duration reached" in err, err


# --- what taipan never does ------------------------------------------------------

# Every source under src/, whatever its stage folder; the vendored kernel
# types are not taipan's code.
SOURCES = sorted(
    os.path.join(d, f) for d, _, files in os.walk(os.path.join(ROOT, "src"))
    if "vmlinux" not in d for f in files if f.endswith((".c", ".h")))
assert len(SOURCES) > 50, SOURCES


def source_hits(pattern):
    hits = []
    for path in SOURCES:
        with open(path) as f:
            for i, line in enumerate(f, 1):
                if re.search(pattern, line):
                    hits.append("%s:%d: %s" % (os.path.relpath(path, ROOT), i, line.strip()))
    return hits


def test_never_writes_into_a_target():
    # Reading is process_vm_readv and bpf_probe_read_user; nothing that writes
    # another process's memory, or signals it, may appear. One thing stops a
    # target: `dump`'s native frames (src/core/nwalk.c) pause each thread with
    # PTRACE_SEIZE and PTRACE_INTERRUPT, which send no signal, to read its
    # registers (PTRACE_GETREGS), and let it go with PTRACE_DETACH; nothing
    # else of ptrace, and nowhere else (--native none never stops a target).
    forbidden = (r"process_vm_writev|PTRACE_(POKE|ATTACH|CONT|SET)|bpf_probe_write_user|bpf_send_signal"
                 r"|bpf_override_return|/proc/%d/mem|\"/mem\"")
    assert source_hits(forbidden) == []
    stops = source_hits(r"PTRACE_\w+|\bptrace\s*\(")
    assert stops
    for h in stops:
        assert h.startswith(("src/core/nwalk.c:", "src/core/nwalk.h:")), h
        assert not re.search(r"PTRACE_(?!SEIZE|INTERRUPT|GETREGS|DETACH)\w+", h), h
    # The only signal sent to a target is kill(pid, 0), which delivers
    # nothing. The one exception is the user's own command of `record --`,
    # which taipan started and ends at the end of -d (c->pid in
    # cmd_record.c's command code).
    kills = source_hits(r"\bkill\s*\(")
    assert kills
    for h in kills:
        assert re.search(r"\bkill\s*\([^,]+,\s*0\s*\)", h) or (
            h.startswith("src/cmd/cmd_record.c:") and re.search(r"\bkill\(c->pid, SIG(TERM|KILL)\)", h)), h


def test_never_runs_a_targets_files():
    # One exec in the tree: `record -- COMMAND`, the user's own command.
    execs = source_hits(r"\b(execv|execvp|execve|execl|execlp|execle|fexecve|system|popen|posix_spawn)\w*\s*\(")
    assert [h.split(":")[0] for h in execs] == ["src/cmd/cmd_record.c"], execs


def test_output_refuses_a_symlink_and_another_users_file(taipan, tmp_path):
    nobody = pwd.getpwnam("nobody")
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "link.folded"
    os.symlink(victim, link)
    theirs = tmp_path / "theirs.folded"
    theirs.write_text("theirs\n")
    os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
    for out in (link, theirs):
        res = subprocess.run([taipan, "record", "-q", "-o", str(out), "--", pyenv("pyenv-3.12"), CHAIN, "0.5"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        assert res.returncode != 0, res.stderr.decode()
        assert str(out) in res.stderr.decode() or "symlink" in res.stderr.decode(), res.stderr.decode()
    assert os.path.islink(link) and victim.read_text() == "precious\n"
    assert theirs.read_text() == "theirs\n" and os.stat(theirs).st_uid == nobody.pw_uid
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".taipan-")], os.listdir(tmp_path)
