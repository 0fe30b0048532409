"""taipan record -o: what it refuses to replace, refused before sampling
starts and named; a directory reached through another user's symbolic link
refused; profiles written 0600; -o - for standard output; a full disk that
loses nothing; the temporary files of a killed taipan cleaned up."""

import glob
import os
import pty
import re
import shutil
import signal
import stat
import subprocess
import time

import pytest

from conftest import as_user, error_lines, go_pprof, parse_folded, pyenv, record, run_taipan, total

# Far longer than any test may take: a check made only after the recording
# times the test out.
FOREVER = 600


@pytest.fixture
def chain(workload):
    return workload(pyenv("pyenv-3.12"), "chain.py", 120)


def refused(taipan, pid, out, *extra):
    """record -o out: it must fail at once, with one error line."""
    try:
        res = run_taipan(taipan, ["record", "-p", pid, "-d", FOREVER, "-o", out] + list(extra),
                         timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("-o %s was not refused before recording" % out)
    assert res.returncode == 1, res.stderr
    errs = error_lines(res.stderr)
    assert len(errs) == 1, res.stderr
    return errs[0]


def make_other_users(path):
    path.write_text("theirs\n")
    os.chown(path, 1000, 1000)


@pytest.mark.parametrize("kind, make, reason", [
    ("device", lambda p: os.mknod(p, 0o666 | 0o020000, os.makedev(1, 3)), "it is a character device"),
    ("fifo", lambda p: os.mkfifo(p), "it is a FIFO"),
    ("symlink", lambda p: os.symlink("/etc/passwd", p), "it is a symbolic link"),
    ("directory", lambda p: os.mkdir(p), "it is a directory"),
    ("other-user", make_other_users, "it is owned by uid 1000"),
])
def test_refused_before_recording(taipan, chain, tmp_path, kind, make, reason):
    out = tmp_path / "fakenull"
    make(out)
    before = os.lstat(out)
    err = refused(taipan, chain.pid, out, "-f", "folded")
    assert reason in err and str(out) in err, err
    after = os.lstat(out)
    assert (after.st_mode, after.st_uid, after.st_rdev) == (before.st_mode, before.st_uid, before.st_rdev)
    assert os.readlink(out) == "/etc/passwd" if kind == "symlink" else True
    assert sorted(os.listdir(tmp_path)) == ["fakenull"], "left behind: %s" % os.listdir(tmp_path)


def test_missing_directory_refused_before_recording(taipan, chain, tmp_path):
    out = tmp_path / "no" / "such" / "x.folded"
    err = refused(taipan, chain.pid, out)
    assert "directory %s does not exist" % out.parent in err, err


def test_directory_through_another_users_symlink_refused(taipan, chain, tmp_path, attacker):
    """An unprivileged user makes /tmp/X/dir a symbolic link to a directory of
    root's that they cannot write, and waits for root to record into
    /tmp/X/dir/out.folded. taipan refuses before recording, naming the link,
    and root's file of that name is left as it was."""
    victim = tmp_path / "victimdir"
    victim.mkdir()
    precious = victim / "out.folded"
    precious.write_text("root's own\n")
    res = subprocess.run(as_user(attacker, ["sh", "-c", 'd=$(mktemp -d /tmp/taipan-attack-XXXXXX) && '
                                            'ln -s "$1" "$d/dir" && echo "$d"', "sh", victim]),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    base = res.stdout.strip()
    try:
        link = os.path.join(base, "dir")
        assert os.lstat(link).st_uid == attacker.pw_uid
        err = refused(taipan, chain.pid, link + "/out.folded")
        assert "will not write %s/out.folded: %s is a symbolic link owned by uid %d" % (
            link, link, attacker.pw_uid) in err, err
        assert precious.read_text() == "root's own\n"
        assert os.listdir(victim) == ["out.folded"], os.listdir(victim)
        # Through a link of root's own in a directory only root writes, the
        # same directory is fine.
        mine = tmp_path / "mine"
        mine.symlink_to(victim)
        out = mine / "new.folded"
        record(taipan, out, chain.pid, seconds=1)
        assert (victim / "new.folded").exists()
    finally:
        shutil.rmtree(base)


def test_profile_is_private(taipan, chain, tmp_path):
    """A profile names what its processes run (with -a, every user's): it is
    written 0600 (under umask 022, which would allow 0644), also over an
    older file that was readable."""
    out = tmp_path / "p.pb.gz"
    old = os.umask(0o022)
    try:
        out.write_bytes(b"old")
        os.chmod(out, 0o644)
        record(taipan, out, chain.pid, seconds=1)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert os.stat(out).st_uid == 0


def test_stdout_to_a_pipe(taipan, chain, tmp_path):
    # pprof, binary, through a pipe into a file go tool pprof reads.
    res = subprocess.run([taipan, "record", "-q", "-p", str(chain.pid), "-d", "1", "-f", "pprof", "-o", "-"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert res.returncode == 0, res.stderr
    out = tmp_path / "piped.pb.gz"
    out.write_bytes(res.stdout)
    assert "Worker.run" in go_pprof("-raw", out)
    # Folded without --format; a command's own output goes to stderr, not
    # into the profile.
    res = subprocess.run([taipan, "record", "-q", "-r", "500", "-o", "-", "--folded-threads", "--",
                          pyenv("pyenv-3.12"), "-c",
                          "print('not a stack'); import time; t = time.time() + 1\n"
                          "while time.time() < t: pass"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, text=True)
    assert res.returncode == 0, res.stderr
    assert "not a stack" in res.stderr and "not a stack" not in res.stdout, res
    out = tmp_path / "piped.folded"
    out.write_text(res.stdout)
    stacks = parse_folded(out)
    assert total(s for s in stacks if [f.text for f in s.python] == ["<module> (<string>)"]) >= 20, res.stdout


def test_binary_pprof_to_a_terminal_refused(taipan, chain):
    master, slave = pty.openpty()
    try:
        res = subprocess.run([taipan, "record", "-p", str(chain.pid), "-d", str(FOREVER), "-f", "pprof",
                              "-o", "-"], stdout=slave, stderr=subprocess.PIPE, timeout=60, text=True)
    finally:
        os.close(slave)
        os.close(master)
    assert res.returncode == 1, res.stderr
    errs = error_lines(res.stderr)
    assert len(errs) == 1 and "to a terminal: it is binary" in errs[0], res.stderr


@pytest.fixture
def full_disk(tmp_path):
    """A 256 KiB tmpfs, filled up."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                         stderr=subprocess.PIPE, text=True)
    if res.returncode:
        pytest.skip("cannot mount a tmpfs: " + res.stderr)
    try:
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"x" * 4096)
        except OSError as e:
            assert e.errno == 28, e  # ENOSPC: full
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def test_full_disk_keeps_the_profile(taipan, chain, tmp_path, full_disk):
    rescue = tmp_path / "rescue"
    rescue.mkdir()
    out = full_disk / "x.folded"
    res = run_taipan(taipan, ["record", "-p", chain.pid, "-d", "1", "-r", "500", "-o", out, "--folded-threads"],
                     env=dict(os.environ, TMPDIR=str(rescue)))
    assert res.returncode == 1, res.stderr
    errs = error_lines(res.stderr)
    assert len(errs) == 2 and "No space left on device" in errs[0], res.stderr
    m = re.search(r"the profile is kept in (\S+)$", errs[1])
    assert m, res.stderr
    kept = m.group(1)
    assert os.path.dirname(kept) == str(rescue) and kept.endswith(".folded"), kept
    mine = [s for s in parse_folded(kept) if s.pid == chain.pid]
    assert total(mine) >= 20 and any(f.name == "Worker.run" for s in mine for f in s.python), kept
    # Nothing half-written stays on the full disk.
    assert sorted(os.listdir(full_disk)) == ["filler"]


def test_temporary_file_of_a_killed_taipan_is_removed(taipan, chain, tmp_path):
    out = tmp_path / "x.folded"
    proc = subprocess.Popen([taipan, "record", "-q", "-p", str(chain.pid), "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mine = str(tmp_path / (".taipan-%d-*.tmp" % proc.pid))
    deadline = time.time() + 30
    while not glob.glob(mine):
        assert time.time() < deadline and proc.poll() is None, "no temporary file"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stale = glob.glob(mine)
    assert len(stale) == 1
    # Look-alikes that are not taipan's, or not of a dead process, stay.
    keep = [".taipan-%d-0123456789abcdef.tmp" % os.getpid(), ".taipan-%d-0123456789abcdef.tmp.bak" % proc.pid,
            ".taipan-%d-0123456789abcdeX.tmp" % proc.pid, "taipan-%d-0123456789abcdef.tmp" % proc.pid]
    for name in keep:
        (tmp_path / name).write_text("keep")
    res = run_taipan(taipan, ["record", "-q", "-p", chain.pid, "-d", "1", "-o", out])
    assert res.returncode == 0, res.stderr
    assert not os.path.exists(stale[0])
    assert sorted(os.listdir(tmp_path)) == sorted(keep + ["x.folded"])
