"""Names a target chose reach root's terminal as text. An unprivileged process
names a function, its file and itself with terminal control sequences
(tests/workloads/hostile.py evil-names): a window title, a cleared screen, a
forged traceback line, a clipboard write. taipan dump, record (folded stacks
to the terminal) and top run in tmux; the pane's title, its paste buffers
and its text show whether any sequence got through."""

import json
import re

import pytest

from conftest import pyenv, record, run_taipan

# The escaped forms (src/util/strutil.c str_escape) of the workload's names.
EVIL_NAME = ("\\x1b]0;PWNED-TITLE\\x07\\x1b[2J\\x1b[H\\x0a"
             "  File \"/etc/shadow\", line 1, in forged\\x0a"
             "\\x1b]52;c;cHduZWQ=\\x07\\u009b31mred")
EVIL_FILE = "/tmp/\\x1b]2;PWNED-FILE\\x07evil.py"
EVIL_COMM = "\\x1b]0;PWN\\x07\\x1b[2J"
# The names as they are.
RAW_NAME = ("\x1b]0;PWNED-TITLE\x07\x1b[2J\x1b[H\n  File \"/etc/shadow\", line 1, in forged\n"
            "\x1b]52;c;cHduZWQ=\x07\x9b31mred")
RAW_FILE = "/tmp/\x1b]2;PWNED-FILE\x07evil.py"


@pytest.fixture
def evil(workload):
    return workload(pyenv("pyenv-3.12"), "hostile.py", "evil-names", 60)


def assert_untouched(s, title):
    """Nothing reached tmux as a sequence: the title is the one before, no
    clipboard write made a buffer, and no forged frame line stands alone."""
    assert s.title() == title, s.text()
    assert "PWN" not in s.title()
    assert s.buffers() == "", s.buffers()
    text = s.text(joined=True)
    assert not re.search(r'^\s*File "/etc/shadow"', text, re.M), text
    return text


def test_dump_prints_names_as_text(taipan, screen, evil):
    s = screen([taipan, "dump", "-v", "-p", evil.pid])
    title = s.title()
    assert s.exit_status() == 0, s.text()
    text = assert_untouched(s, title)
    # The screen was not cleared: the header is still there, and the frame
    # line shows the names, escaped.
    assert "Process %d (%s): Python 3.12" % (evil.pid, EVIL_COMM) in text, text
    # hostile.py imports threading: the thread has its Python name.
    assert 'Thread %d "MainThread"' % evil.pid in text, text
    assert '  File "%s", line ' % EVIL_FILE in text, text
    assert ", in %s\n" % EVIL_NAME in text, text
    # -v's log line names the process too.
    assert "taipan: pid %d (%s): Python 3.12" % (evil.pid, EVIL_COMM) in text, text


def test_record_folded_to_the_terminal(taipan, screen, evil):
    s = screen([taipan, "record", "-v", "-p", evil.pid, "-d", "1", "-r", 200, "--no-kernel",
                "--folded-threads", "-o", "-"])
    title = s.title()
    assert s.exit_status(timeout=30) == 0, s.text()
    text = assert_untouched(s, title)
    # ';' separates frames: the name's own are \x3b, so the line splits into
    # the process, the thread and the Python frames, nothing more.
    def folded(s):
        return s.replace(";", "\\x3b")
    comm = folded(EVIL_COMM)
    line = next((l for l in text.splitlines() if l.startswith(comm + " [pid")), None)
    assert line, text
    # The Python frames (busy() may be in C code it calls: native frames).
    frames = [f for f in line.rpartition(" ")[0].split(";") if not f.endswith("_[n]")]
    assert frames == ["%s [pid %d]" % (comm, evil.pid), "MainThread [tid %d]" % evil.pid,
                      "<module> (%s)" % evil.script, "main (%s)" % evil.script,
                      "evil_names (%s)" % evil.script,
                      "%s (%s)" % (folded(EVIL_NAME), folded(EVIL_FILE)),
                      "busy (%s)" % evil.script], line


def test_top_shows_names_as_text(taipan, screen, evil):
    s = screen([taipan, "top", "-p", evil.pid, "-r", 200])
    title = s.title()
    s.wait_for(lambda t: EVIL_NAME[:40] in t, what="the victim's row")
    text = assert_untouched(s, title)
    assert "pid %d (%s), Python 3.12" % (evil.pid, EVIL_COMM) in text, text
    s.keys("q")
    assert s.exit_status() == 0


def test_json_keeps_the_names_as_they_are(taipan, evil, tmp_path):
    """JSON is read by programs, not terminals: dump --json and speedscope
    keep each name exactly."""
    res = run_taipan(taipan, ["dump", "--json", "-p", evil.pid])
    assert res.returncode == 0, res.stderr
    frames = [f for f in json.loads(res.stdout)["threads"][0]["frames"] if f["kind"] == "python"]
    assert (frames[1]["name"], frames[1]["file"]) == (RAW_NAME, RAW_FILE), frames
    out = tmp_path / "x.json"
    record(taipan, out, evil.pid, seconds=1, extra=["--no-kernel"])
    names = {(f["name"], f.get("file")) for f in json.load(open(out))["shared"]["frames"]}
    assert (RAW_NAME, RAW_FILE) in names, names
