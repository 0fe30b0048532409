"""test_offsets_table.py - the committed layout tables must be what tools/gen_offsets.py
reads from the DWARF of the pyenv builds today.

Needs no root and no taipan binary: it only runs the generator with --check.
Skips when a pyenv interpreter named in a table, or gdb, is missing; under
CI=true that is a failure instead, because CI is where drift must be caught.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GEN = os.path.join(ROOT, "tools", "gen_offsets.py")
PYENV = os.environ.get("TAIPAN_PYENV", "/root/.pyenv/versions")
IN_CI = os.environ.get("CI") == "true"

# What --kind writes, and where the committed copy lives.
KINDS = {
    "layouts": "src/cpython/gen/pyoffsets_table.c",
    "debug": "src/cpython/gen/debugoffsets_table.c",
    "dwarf-test": "tests/unit/pyoffsets_dwarf_gen.h",
}


def skip_or_fail(msg):
    if IN_CI:
        pytest.fail("CI=true, so not skipping: " + msg)
    pytest.skip(msg)


def builds_named_in(path):
    """The pyenv builds ("3.8.18") whose DWARF the committed file says it came from."""
    with open(path, encoding="utf-8") as f:
        return re.findall(r'\.source = "DWARF of pyenv (\S+) ', f.read())


def require_inputs(path):
    if shutil.which("gdb") is None:
        skip_or_fail("gdb is not installed")
    names = builds_named_in(path)
    assert names, f"{path} names no pyenv build in its .source strings"
    missing = [n for n in names if not os.path.isdir(os.path.join(PYENV, n))]
    if missing:
        skip_or_fail(f"pyenv interpreters missing under {PYENV}: {', '.join(missing)}")


def run_check(kind, path):
    return subprocess.run(
        [sys.executable, GEN, "--kind", kind, "--pyenv", PYENV, "--check", path],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_committed_table_matches_dwarf(kind):
    path = os.path.join(ROOT, KINDS[kind])
    require_inputs(path)
    p = run_check(kind, path)
    assert p.returncode == 0, (
        f"{KINDS[kind]} is stale or hand-edited; run `make offsets` (gen_offsets.py --all)\n"
        f"{p.stdout}{p.stderr}")


def test_check_catches_an_edit(tmp_path):
    """--check must notice a single changed number and show it."""
    path = os.path.join(ROOT, KINDS["layouts"])
    require_inputs(path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    edited, n = re.subn(r"(\.ts_thread_id = )(\d+)", lambda m: m.group(1) + str(int(m.group(2)) + 8),
                        text, count=1)
    assert n == 1
    copy = tmp_path / "pyoffsets_table.c"
    copy.write_text(edited, encoding="utf-8")
    p = run_check("layouts", str(copy))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "ts_thread_id" in p.stdout


def test_caps_rows_checked_against_dwarf():
    """A capability flag that contradicts a build's DWARF stops the generator:
    dropping TP_LF_CFRAME from 3.12's row, whose thread state has a cframe, or
    claiming co_qualname's absence (TP_LF_SELF_CLASS) for 3.11."""
    path = os.path.join(ROOT, KINDS["layouts"])
    require_inputs(path)
    sys.path.insert(0, os.path.dirname(GEN))
    try:
        import gen_offsets as g
    finally:
        sys.path.pop(0)
    bs = {b.version: b for b in g.builds(PYENV)}
    fields = g.layout_fields()
    for version, flag, drop in (((3, 12), "TP_LF_CFRAME", True), ((3, 11), "TP_LF_SELF_CLASS", False)):
        if version not in bs:
            skip_or_fail("no pyenv %d.%d" % version)
        layout = g.read_layout(bs[version], fields)
        g.check_caps(bs[version], layout)  # the committed rows agree
        saved = list(g.CAPS)
        try:
            i = [c[0] for c in g.CAPS].index(version)
            row = g.CAPS[i]
            flags = [f for f in row[1] if f != flag] if drop else row[1] + [flag]
            g.CAPS[i] = (row[0], flags) + tuple(row[2:])
            with pytest.raises(g.GenError, match=flag):
                g.check_caps(bs[version], layout)
        finally:
            g.CAPS[:] = saved
