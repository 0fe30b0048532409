"""make install puts the binary and the man page under PREFIX (and DESTDIR),
and the man page renders."""

import os
import shutil
import subprocess

from conftest import ROOT, require


def make_install(taipan, **env_vars):
    """Runs make install for the binary under test; -o keeps make from
    rebuilding it (others may be editing sources)."""
    build = os.path.dirname(os.path.abspath(taipan))
    args = ["make", "-s", "-C", ROOT, "install", "BUILD=" + build, "-o", os.path.join(build, "taipan")]
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
