"""taipan dump --locals against every interpreter of the matrix: the
arguments, locals, cells and free variables of known frames, with values
for the simple types and type and length for containers."""

import json

from conftest import run_taipan

import pytest


def frame_locals(doc, name):
    """{variable: (kind, type, value, len)} of the innermost frame called
    name (or ending in '.name', a qualified name)."""
    for t in doc["threads"]:
        for f in t["frames"]:
            if f["kind"] == "python" and (f["name"] == name or f["name"].endswith("." + name)):
                assert f["locals_error"] is None and not f["locals_cut"], f
                return {v["name"]: (v["kind"], v["type"], v["value"], v["len"]) for v in f["locals"]}
    raise AssertionError("no frame %s in %s" % (name, doc))


def test_locals_of_known_frames(taipan, interp, workload):
    """Every kind of value dump --locals reads, at the frames of
    tests/workloads/locals.py, as the interpreter's own repr() gives it:
    ints (and one past 64 bits, whose value is not given), a float, a bool,
    None, a str and bytes; lists, dicts and tuples with their length; an
    instance by its type; the variables that an inner function uses as
    cells in the outer frame and as free variables in the inner one."""
    w = workload(interp, "locals.py")
    res = run_taipan(taipan, ["dump", "-p", w.pid, "--locals", "--json", "--native", "none"])
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    py2 = interp.version < (3, 0)
    outer = frame_locals(doc, "outer")
    s = "str"
    want = {
        "n": ("cell", "int", "7", None),
        "label": ("local", s, "'hello'", None),
        "count": ("cell", "int", "42", None),
        "ratio": ("local", "float", "2.5", None),
        "neg": ("local", "int", "-7", None),
        "flag": ("local", "bool", "True", None),
        "nothing": ("local", "NoneType", "None", None),
        "words": ("local", "list", None, 3),
        "table": ("local", "dict", None, 2),
        "pair": ("local", "tuple", None, 2),
    }
    for name, value in want.items():
        assert outer.get(name) == value, (name, outer.get(name), value, interp.id)
    # bytes: a str on 2.7 (no b prefix), with its length on 3.x.
    assert outer["raw"] == (("local", "str", "\"ab\\x00'\"", None) if py2 else
                            ("local", "bytes", "b\"ab\\x00'\"", 4)), outer["raw"]
    # 2 ** 70: on 3.x an int past 64 bits, said so; 2.7's long by its type.
    assert outer["big"][:2] == ("local", "long" if py2 else "int"), outer["big"]
    assert py2 or outer["big"][2] == "(beyond 64 bits)", outer["big"]
    assert outer["thing"][:3] == ("local", "Thing", None), outer["thing"]
    assert outer["inner"][1] == "function", outer["inner"]
    inner = frame_locals(doc, "inner")
    assert inner == {
        "extra": ("local", s, "'more'", None),
        "here": ("local", "int", "49", None),
        "count": ("free", "int", "42", None),
        "n": ("free", "int", "7", None),
    }, (inner, interp.id)

    # The same as text, under the frame's line.
    res = run_taipan(taipan, ["dump", "-p", w.pid, "--locals", "--native", "none"])
    assert res.returncode == 0, res.stderr
    text = res.stdout.split("in outer\n", 1)[1] if " in outer\n" in res.stdout else \
        res.stdout.split(".outer\n", 1)[1]
    assert "      label = 'hello'\n" in text, res.stdout
    assert "      words = <list, len 3>\n" in text, res.stdout
    assert "      count = 42  (cell)\n" in text, res.stdout
