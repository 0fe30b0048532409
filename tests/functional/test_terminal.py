"""Names a target chose reach root's terminal as text. An unprivileged process
names a function, its file and itself with terminal control sequences
(tests/workloads/hostile.py evil-names): a window title, a cleared screen, a
forged traceback line, a clipboard write. taipan dump, record (folded stacks
to the terminal) and top run in tmux; the pane's title, its paste buffers
and its text show whether any sequence got through. Every profile format
carries the names escaped the same way, since their readers print them too
(go tool pprof -top, a browser, jq -r)."""

import gzip
import json
import re

import pytest

from conftest import go_pprof, pyenv, record, run_taipan

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


def test_dump_json_keeps_the_names_as_they_are(taipan, evil, tmp_path):
    """dump --json is read by programs: it keeps each name exactly (JSON's
    own escapes carry the control characters). speedscope, which a browser
    draws, has them escaped like every profile format."""
    res = run_taipan(taipan, ["dump", "--json", "-p", evil.pid])
    assert res.returncode == 0, res.stderr
    frames = [f for f in json.loads(res.stdout)["threads"][0]["frames"] if f["kind"] == "python"]
    assert (frames[1]["name"], frames[1]["file"]) == (RAW_NAME, RAW_FILE), frames
    out = tmp_path / "x.json"
    record(taipan, out, evil.pid, seconds=1, extra=["--no-kernel"])
    names = {(f["name"], f.get("file")) for f in json.load(open(out))["shared"]["frames"]}
    assert (EVIL_NAME, EVIL_FILE) in names, names


# What hostile.py evil-everywhere puts in every name (function, file, Python
# and OS thread names, comm), as it is and escaped; the comm is cut to fit.
EVERY_RAW = "\x1b]0;pwned\x07\x1b[2J\x9b1m\u202e\u061c\u200b"
EVERY_ESC = "\\x1b]0;pwned\\x07\\x1b[2J\\u009b1m\\u202e\\u061c\\u200b"
EVERY_COMM_ESC = "\\x1b[2J\\u009b\\u202e\\u061cp"
# None of these may be left in a profile: the terminal's controls, a C1 CSI,
# the right-to-left override, the Arabic letter mark, the zero-width space.
RAW_CHARS = ["\x1b", "\x07", "\x9b", "\u202e", "\u061c", "\u200b"]


def pprof_string_table(path):
    """The string table of a pprof file, read from the protobuf itself
    (Profile field 6), not through a reader that might escape it."""
    data = gzip.decompress(path.read_bytes())
    strings, i = [], 0

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7f) << shift
            shift += 7
            if b < 0x80:
                return v

    while i < len(data):
        key = varint()
        wire = key & 7
        if wire == 0:
            varint()
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n = varint()
            if key >> 3 == 6:
                strings.append(data[i:i + n].decode("utf-8"))
            i += n
        else:
            raise AssertionError("pprof: wire type %d at %d" % (wire, i))
    return strings


def assert_no_raw(what, texts):
    for t in texts:
        for c in RAW_CHARS:
            at = t.find(c)
            if at >= 0:
                raise AssertionError("%s: U+%04X raw in %s" % (what, ord(c), ascii(t[max(0, at - 60):at + 20])))


def json_strings(j):
    """Every string in a parsed JSON document, keys included."""
    if isinstance(j, str):
        yield j
    elif isinstance(j, list):
        for v in j:
            yield from json_strings(v)
    elif isinstance(j, dict):
        for k, v in j.items():
            yield k
            yield from json_strings(v)


def test_every_format_escapes_names(taipan, attacker, workload, tmp_path):
    """A process of an unprivileged user puts control sequences, C1 and
    invisible bidi characters in its function, file, thread and process
    names. No format taipan writes as root keeps one of them raw, and each
    name is still there, escaped as folded stacks escape it."""
    w = workload(pyenv("debian-3.11-static"), "hostile.py", "evil-everywhere", 60, user=attacker,
                 cwd="/")
    fn, file, thread = "fn" + EVERY_ESC, "/tmp/file" + EVERY_ESC + ".py", "thread" + EVERY_ESC

    out = tmp_path / "p.folded"
    record(taipan, out, w.pid, seconds=1, extra=["--no-kernel", "--folded-threads"])
    text = out.read_text(encoding="utf-8")
    assert_no_raw("folded", [text])
    semi = lambda s: s.replace(";", "\\x3b")
    assert "%s [pid %d];%s [tid " % (EVERY_COMM_ESC, w.pid, semi(thread)) in text, ascii(text)
    assert "%s (%s)" % (semi(fn), semi(file)) in text, ascii(text)

    out = tmp_path / "p.pb.gz"
    record(taipan, out, w.pid, seconds=1, extra=["--no-kernel"])
    strings = pprof_string_table(out)
    assert_no_raw("pprof string table", strings)
    assert {fn, file, thread, EVERY_COMM_ESC} <= set(strings), ascii(strings)
    for view in ("-top", "-raw"):
        text = go_pprof(view, out)
        assert_no_raw("go tool pprof " + view, [text])
        assert fn in text, ascii(text)
    assert thread in text and file in text, ascii(text)  # -raw has the labels and files

    out = tmp_path / "p.json"
    record(taipan, out, w.pid, seconds=1, extra=["--no-kernel"])
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert_no_raw("speedscope", json_strings(doc))
    assert (fn, file) in {(f["name"], f.get("file")) for f in doc["shared"]["frames"]}, ascii(doc)
    title = "%s (tid " % thread
    assert any(p["name"].startswith(title) for p in doc["profiles"]), ascii(doc["profiles"])

    out = tmp_path / "p.html"
    record(taipan, out, w.pid, seconds=1, extra=["--no-kernel"])
    m = re.search(r'<script type="application/json" id="taipan-data">(.*?)</script>',
                  out.read_text(encoding="utf-8"), re.S)
    assert m, "no data in the page"
    strings = json.loads(m.group(1))["strings"]
    assert_no_raw("html", strings)
    assert {fn, file, thread, EVERY_COMM_ESC} <= set(strings), ascii(strings)
