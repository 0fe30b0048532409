"""make install puts the binary and the man page under PREFIX (and DESTDIR),
and the man page renders; make uninstall takes back exactly that; the binary
is built hardened."""

import os
import shutil
import subprocess

from conftest import ROOT, require


def make_install(taipan, target="install", **env_vars):
    """Runs make install (or target) for the binary under test; -o keeps
    make from rebuilding it (others may be editing sources)."""
    build = os.path.dirname(os.path.abspath(taipan))
    args = ["make", "-s", "-C", ROOT, target, "BUILD=" + build, "-o", os.path.join(build, "taipan")]
    args += ["%s=%s" % kv for kv in env_vars.items()]
    res = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res


def check_tree(top, prefix_inside, taipan):
    binary = os.path.join(top, prefix_inside.lstrip("/"), "bin", "taipan")
    page = os.path.join(top, prefix_inside.lstrip("/"), "share", "man", "man1", "taipan.1")
    assert os.path.isfile(binary) and os.access(binary, os.X_OK), binary
    assert os.stat(binary).st_mode & 0o777 == 0o755
    with open(binary, "rb") as a, open(taipan, "rb") as b:
        assert a.read() == b.read()
    assert os.stat(page).st_mode & 0o777 == 0o644
    res = subprocess.run([binary, "version"], stdout=subprocess.PIPE, text=True)
    assert res.returncode == 0 and res.stdout.startswith("taipan ")
    return page


def test_install_prefix_and_destdir(taipan, tmp_path):
    require(shutil.which("make"), "make")
    prefix = tmp_path / "prefix"
    make_install(taipan, PREFIX=str(prefix))
    page = check_tree("/", str(prefix), taipan)

    stage = tmp_path / "stage"
    make_install(taipan, PREFIX="/usr", DESTDIR=str(stage))
    check_tree(str(stage), "/usr", taipan)
    assert sorted(os.listdir(stage)) == ["usr"]
    # The unit starts the binary that was installed, not /usr/local's.
    with open(stage / "usr" / "lib" / "systemd" / "system" / "taipan-agent.service") as f:
        unit = f.read()
    execs = [l for l in unit.splitlines() if l.startswith("ExecStart=")]
    assert execs and all(l.startswith("ExecStart=/usr/bin/taipan ") for l in execs), execs
    assert "/usr/local" not in unit, unit

    # The page renders without warnings, and covers every command.
    man = shutil.which("man")
    require(man, "man (man-db)")
    env = dict(os.environ, MANWIDTH="80", LANG="C.UTF-8")
    res = subprocess.run([man, "--warnings", "-l", page], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, timeout=60)
    assert res.returncode == 0 and not res.stderr.strip(), res.stderr
    text = res.stdout
    for heading in ["NAME", "SYNOPSIS", "RECORD OPTIONS", "TOP OPTIONS AND KEYS", "DUMP OPTIONS", "FORMATS",
                    "EXIT STATUS", "PRIVILEGES", "EXAMPLES"]:
        assert "\n" + heading in text, heading
    for opt in ["--duration", "--rate", "--output", "--format", "--no-kernel", "--folded-lines",
                "--folded-threads", "--stats", "--window", "--json", "taipan dump -p 4242"]:
        assert opt in text, opt


def files_under(top):
    return sorted(os.path.relpath(os.path.join(d, f), top) for d, _, fs in os.walk(top) for f in fs)


def test_uninstall_removes_what_install_put(taipan, tmp_path):
    require(shutil.which("make"), "make")
    stage = tmp_path / "stage"
    where = dict(PREFIX="/opt/tp", DESTDIR=str(stage), MANDIR="/opt/tp/man")
    make_install(taipan, **where)
    assert files_under(str(stage)) == ["opt/tp/bin/taipan", "opt/tp/lib/systemd/system/taipan-agent.service",
                                       "opt/tp/man/man1/taipan.1"]
    # Something else in the same directories stays, and so do the directories.
    (stage / "opt/tp/bin/other").write_text("not ours\n")
    make_install(taipan, target="uninstall", **where)
    assert files_under(str(stage)) == ["opt/tp/bin/other"]
    assert (stage / "opt/tp/man/man1").is_dir()
    # Twice is not an error.
    make_install(taipan, target="uninstall", **where)


def test_binary_is_hardened(taipan):
    """Stack canaries and FORTIFY's checked calls (-fstack-protector-strong,
    -D_FORTIFY_SOURCE=2) show as imports of the binary."""
    nm = shutil.which("nm")
    require(nm, "nm (binutils)")
    res = subprocess.run([nm, "-D", "--undefined-only", taipan], stdout=subprocess.PIPE, text=True, check=True)
    names = {line.split()[-1].split("@")[0] for line in res.stdout.splitlines() if line.strip()}
    assert "__stack_chk_fail" in names
    assert any(n.startswith("__") and n.endswith("_chk") and n != "__stack_chk_fail" for n in names), names
