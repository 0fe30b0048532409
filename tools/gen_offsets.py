#!/usr/bin/env python3
"""gen_offsets.py - writes taipan's CPython layout tables from the DWARF of real builds.

No offset in taipan is typed by hand (doc/design/python-stacks.md, decision 2).
This tool asks gdb for `&((T *)0)->member` and `sizeof(T)` against the DWARF
of each pyenv-built libpython, which evaluates the expressions from debug
info alone and never runs the interpreter. It writes three files:

  layouts     src/cpython/gen/pyoffsets_table.c: one struct py_layout row per minor version
              that has no _Py_DebugOffsets (2.7, 3.6-3.12), and the capability
              flags of every version (CAPS), checked against each build's DWARF.
  debug       src/cpython/gen/debugoffsets_table.c: for 3.13+, the position of every
              _Py_DebugOffsets member listed in src/cpython/debugoffsets.h, per minor.
  asyncio     src/cpython/gen/pyasync_table.c: the _asyncio extension's TaskObj, per
              minor version before 3.14 (3.14+ says it in its .AsyncioDebug section).
  dwarf-test  tests/unit/pyoffsets_dwarf_gen.h: the struct py_layout of each
              3.13+ build read from DWARF, which the unit test compares with
              what the _Py_DebugOffsets reader makes of the same build.

The fields of struct py_layout are read from src/cpython/pyoffsets.h and the
_Py_DebugOffsets members from src/cpython/debugoffsets.h, so a field added there without
a rule here is an error rather than a silent gap.

Usage:
  gen_offsets.py [--kind layouts|debug|dwarf-test] [--output PATH | --check PATH]
  gen_offsets.py --all [--check]      every kind, at its path in the repo
"""

import argparse
import difflib
import glob
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PYENV = "/root/.pyenv/versions"
DEFAULT_ROOTS = os.environ.get("TAIPAN_ROOTS", "/var/cache/taipan-test")
ROOTS = DEFAULT_ROOTS
KINDS = {
    "layouts": "src/cpython/gen/pyoffsets_table.c",
    "debug": "src/cpython/gen/debugoffsets_table.c",
    "dwarf-test": "tests/unit/pyoffsets_dwarf_gen.h",
    "asyncio": "src/cpython/gen/pyasync_table.c",
}
# The first minor version whose _PyRuntime starts with _Py_DebugOffsets; from
# here on the offsets come from the target, not from a table.
DEBUG_OFFSETS_SINCE = (3, 13)

RT = "_PyRuntimeState"
IS = "PyInterpreterState"
TS = "PyThreadState"
FO = "PyFrameObject"
IF = "_PyInterpreterFrame"
CO = "PyCodeObject"
SIZEOF = None  # marks a sizeof(type) rule
# The py_layout fields whose HOW is TABLE: 3.13+ takes them from the
# supplementary rows (py_layout_supp_table), as _Py_DebugOffsets lacks them.
TABLE_FIELDS = []

# For each struct py_layout field, where it lives in each range of versions, as
# (first, last, type, member path); last None means "and every later version".
# A version outside every range has no such field (-1). A version inside a
# range whose expression DWARF cannot evaluate is an error: the rule is wrong.
RULES = {
    "rt_interp_head": [((3, 7), None, RT, "interpreters.head")],
    # 3.12 moved tstate_current out of gilstate (gh-59956) and then into the
    # _Py_tss_tstate thread-local (gh-103323).
    "rt_tstate_current": [((3, 7), (3, 11), RT, "gilstate.tstate_current")],
    # 3.12 moved autoTSSkey out of gilstate to the top of _PyRuntimeState
    # (gh-59956).
    "rt_autotss_key": [
        ((3, 7), (3, 11), RT, "gilstate.autoTSSkey"),
        ((3, 12), None, RT, "autoTSSkey"),
    ],
    "interp_next": [((2, 7), None, IS, "next")],
    # 3.11 grouped the thread list into a `threads` sub-struct (bpo-46008).
    "interp_tstate_head": [
        ((2, 7), (3, 10), IS, "tstate_head"),
        ((3, 11), None, IS, "threads.head"),
    ],
    "ts_next": [((2, 7), None, TS, "next")],
    "ts_interp": [((2, 7), None, TS, "interp")],
    # 3.11 replaced tstate->frame by cframe->current_frame (bpo-44590), and 3.13
    # dropped _PyCFrame for tstate->current_frame (gh-108035). 3.10 has a
    # cframe too, but it holds no frame pointer, so it is not recorded.
    "ts_frame": [((2, 7), (3, 10), TS, "frame")],
    "ts_cframe": [((3, 11), (3, 12), TS, "cframe")],
    "cframe_current_frame": [((3, 11), (3, 12), "_PyCFrame", "current_frame")],
    "ts_current_frame": [((3, 13), None, TS, "current_frame")],
    "ts_thread_id": [((2, 7), None, TS, "thread_id")],
    "ts_native_thread_id": [((3, 11), None, TS, "native_thread_id")],
    # 3.11 split the frame into PyFrameObject and _PyInterpreterFrame
    # (bpo-44590); the sampler walks the latter from then on.
    "frame_back": [((2, 7), (3, 10), FO, "f_back"), ((3, 11), None, IF, "previous")],
    # 3.13 renamed f_code to f_executable (gh-100987).
    "frame_code": [
        ((2, 7), (3, 10), FO, "f_code"),
        ((3, 11), (3, 12), IF, "f_code"),
        ((3, 13), None, IF, "f_executable"),
    ],
    # 3.11 replaced the f_lasti index by the prev_instr pointer (bpo-47177);
    # 3.13 replaced prev_instr by instr_ptr (gh-109094).
    "frame_lasti": [
        ((2, 7), (3, 10), FO, "f_lasti"),
        ((3, 11), (3, 12), IF, "prev_instr"),
        ((3, 13), None, IF, "instr_ptr"),
    ],
    "frame_owner": [((3, 11), None, IF, "owner")],
    # The generator or coroutine that runs the frame, a borrowed pointer
    # (record --async); 3.11 moved the frame into the generator.
    "frame_gen": [((3, 6), (3, 10), FO, "f_gen")],
    # 3.12 dropped is_entry for entry shim frames marked by owner (gh-96421).
    "frame_is_entry": [((3, 11), (3, 11), IF, "is_entry")],
    "frame_localsplus": [((2, 7), (3, 10), FO, "f_localsplus"), ((3, 11), None, IF, "localsplus")],
    # Thread-local bytecode (gh-123926, 3.14t): only free-threaded builds have
    # these, and only _Py_DebugOffsets gives them (0 in a GIL build).
    "frame_tlbc_index": [],
    "code_argcount": [((2, 7), None, CO, "co_argcount")],
    # 3.11 merged co_varnames/co_cellvars/co_freevars into co_localsplusnames
    # (bpo-43693).
    "code_varnames": [((2, 7), (3, 10), CO, "co_varnames"), ((3, 11), None, CO, "co_localsplusnames")],
    # The kind of each name of co_localsplusnames: local, cell, free.
    "code_localspluskinds": [((3, 11), None, CO, "co_localspluskinds")],
    "code_nlocals": [((2, 7), (3, 10), CO, "co_nlocals")],
    "code_cellvars": [((2, 7), (3, 10), CO, "co_cellvars")],
    "code_freevars": [((2, 7), (3, 10), CO, "co_freevars")],
    "code_filename": [((2, 7), None, CO, "co_filename")],
    "code_name": [((2, 7), None, CO, "co_name")],
    # bpo-44530.
    "code_qualname": [((3, 11), None, CO, "co_qualname")],
    "code_firstlineno": [((2, 7), None, CO, "co_firstlineno")],
    # 3.10 replaced co_lnotab by co_linetable (PEP 626); 3.11 changed its
    # format again (PEP 657) under the same name.
    "code_linetable": [((2, 7), (3, 9), CO, "co_lnotab"), ((3, 10), None, CO, "co_linetable")],
    # 3.11 moved the bytecode inline, to the end of the code object (bpo-46841).
    "code_adaptive": [((3, 11), None, CO, "co_code_adaptive")],
    "code_tlbc": [],
    "obj_type": [((2, 7), None, "PyObject", "ob_type")],
    "type_name": [((2, 7), None, "PyTypeObject", "tp_name")],
    "type_flags": [((2, 7), None, "PyTypeObject", "tp_flags")],
    "tuple_item": [((2, 7), None, "PyTupleObject", "ob_item")],
    "var_size": [((2, 7), None, "PyVarObject", "ob_size")],
    "bytes_sval": [((2, 7), (2, 7), "PyStringObject", "ob_sval"), ((3, 0), None, "PyBytesObject", "ob_sval")],
    # PEP 393 (3.3) compact strings.
    "unicode_length": [((3, 3), None, "PyASCIIObject", "length")],
    "unicode_state": [((3, 3), None, "PyASCIIObject", "state")],
    "unicode_ascii_size": [((3, 3), None, "PyASCIIObject", SIZEOF)],
    "unicode_compact_size": [((3, 3), None, "PyCompactUnicodeObject", SIZEOF)],
    # Thread names (src/cpython/pythreads.c): sys.modules, dicts, instance
    # attributes and ints. 3.12 grouped the import state into `imports`
    # (gh-101660).
    "interp_modules": [((2, 7), (3, 11), IS, "modules"), ((3, 12), None, IS, "imports.modules")],
    "module_dict": [((2, 7), None, "PyModuleObject", "md_dict")],
    # 3.6 made dicts compact: an index table, then the entries in insertion
    # order (bpo-27350).
    "dict_mask": [((2, 7), (2, 7), "PyDictObject", "ma_mask")],
    "dict_table": [((2, 7), (2, 7), "PyDictObject", "ma_table")],
    "dict_keys": [((3, 6), None, "PyDictObject", "ma_keys")],
    "dict_values": [((3, 6), None, "PyDictObject", "ma_values")],
    # 3.11 keeps log2 sizes and a kind, with unicode-only entries that have
    # no hash (bpo-46675, bpo-44914).
    "dk_size": [((3, 6), (3, 10), "PyDictKeysObject", "dk_size")],
    "dk_log2_size": [((3, 11), None, "PyDictKeysObject", "dk_log2_size")],
    "dk_log2_index_bytes": [((3, 11), None, "PyDictKeysObject", "dk_log2_index_bytes")],
    "dk_kind": [((3, 11), None, "PyDictKeysObject", "dk_kind")],
    "dk_nentries": [((3, 6), None, "PyDictKeysObject", "dk_nentries")],
    "dk_indices": [((3, 6), None, "PyDictKeysObject", "dk_indices")],
    "entry_size": [((2, 7), (2, 7), "PyDictEntry", SIZEOF), ((3, 6), None, "PyDictKeyEntry", SIZEOF)],
    "entry_key": [((2, 7), (2, 7), "PyDictEntry", "me_key"), ((3, 6), None, "PyDictKeyEntry", "me_key")],
    "entry_value": [((2, 7), (2, 7), "PyDictEntry", "me_value"),
                    ((3, 6), None, "PyDictKeyEntry", "me_value")],
    "uentry_size": [((3, 11), None, "PyDictUnicodeEntry", SIZEOF)],
    "uentry_key": [((3, 11), None, "PyDictUnicodeEntry", "me_key")],
    "uentry_value": [((3, 11), None, "PyDictUnicodeEntry", "me_value")],
    # Before 3.11 ma_values is the PyObject *[] itself.
    "values_values": [((3, 11), None, "PyDictValues", "values")],
    # 3.13 embeds the values in the object, with their capacity and a valid
    # flag (gh-115776).
    "values_capacity": [((3, 13), None, "PyDictValues", "capacity")],
    "values_valid": [((3, 13), None, "PyDictValues", "valid")],
    "type_basicsize": [((2, 7), None, "PyTypeObject", "tp_basicsize")],
    "type_dictoffset": [((2, 7), None, "PyTypeObject", "tp_dictoffset")],
    "heaptype_cached_keys": [((3, 6), None, "PyHeapTypeObject", "ht_cached_keys")],
    "int_ival": [((2, 7), (2, 7), "PyIntObject", "ob_ival")],
    # 3.12 replaced ob_size by lv_tag (gh-101291).
    "long_digit": [((3, 0), (3, 11), "PyLongObject", "ob_digit"),
                   ((3, 12), None, "PyLongObject", "long_value.ob_digit")],
    "long_tag": [((3, 12), None, "PyLongObject", "long_value.lv_tag")],
    "long_digit_size": [((3, 0), None, "digit", SIZEOF)],
    # dump --locals: a float's value, a cell's, a dict's and a set's size.
    "float_fval": [((2, 7), None, "PyFloatObject", "ob_fval")],
    "cell_ref": [((2, 7), None, "PyCellObject", "ob_ref")],
    "dict_used": [((2, 7), None, "PyDictObject", "ma_used")],
    "set_used": [((2, 7), None, "PySetObject", "used")],
    # dump --tasks: sets (the registries of tasks before 3.14), weak
    # references (WeakSet), base types (Task subclasses), coroutines and what
    # each awaits (Objects/genobject.c, _PyGen_yf).
    "list_item": [((2, 7), None, "PyListObject", "ob_item")],
    "set_mask": [((2, 7), None, "PySetObject", "mask")],
    "set_table": [((2, 7), None, "PySetObject", "table")],
    "weakref_object": [((2, 7), None, "PyWeakReference", "wr_object")],
    "type_base": [((2, 7), None, "PyTypeObject", "tp_base")],
    # 3.11 embedded the frame in the generator (bpo-44032, gh-93252).
    "gen_frame": [((2, 7), (3, 10), "PyGenObject", "gi_frame")],
    "gen_iframe": [((3, 11), None, "PyGenObject", "gi_iframe")],
    "gen_frame_state": [((3, 11), None, "PyGenObject", "gi_frame_state")],
    "code_code": [((2, 7), (3, 10), CO, "co_code")],
    # 3.10 replaced f_stacktop by f_stackdepth and f_state (bpo-43933).
    "frame_stacktop": [((2, 7), (3, 9), FO, "f_stacktop")],
    "frame_stackdepth": [((3, 10), (3, 10), FO, "f_stackdepth")],
    "frame_valuestack": [((2, 7), (3, 10), FO, "f_valuestack")],
    "frame_state": [((3, 10), (3, 10), FO, "f_state")],
    # 3.14 replaced the stacktop index by a pointer (gh-117045).
    "iframe_stacktop": [((3, 11), (3, 13), IF, "stacktop")],
    "iframe_stackpointer": [((3, 14), None, IF, "stackpointer")],
    # The GIL, for the gil= label: in _PyRuntime until 3.11; 3.12 gave each
    # interpreter a pointer to the GIL it uses, its own or the main one's
    # (gh-104210). 2.7 and 3.6 keep it in static variables, and have none.
    "rt_gil": [((3, 7), (3, 11), RT, "ceval.gil")],
    "interp_gil": [((3, 12), None, IS, "ceval.gil")],
    "gil_locked": [((3, 7), None, "struct _gil_runtime_state", "locked")],
    "gil_holder": [((3, 7), None, "struct _gil_runtime_state", "last_holder")],
}


# What changed between versions that the offsets alone do not say: the walker's
# flags (TP_LF_* in src/cpython/abi.h), the line-table format and the unit of
# the frame position. A row applies from its version up to the next row, and
# to every later minor of the same major (a new 3.x is read through its
# _Py_DebugOffsets with the newest row). Each row is checked against the
# DWARF of every build it covers (check_caps), so a flag cannot drift from
# the layout it describes.
CAPS = [
    # PyFrameObject chain; co_lnotab with unsigned line increments.
    ((2, 7), ["TP_LF_SELF_CLASS"], "PY_LT_LNOTAB_U8", False, "PY_OD_DICTOFFSET"),
    # co_lnotab line increments become signed (What's New in 3.6).
    ((3, 6), ["TP_LF_SELF_CLASS"], "PY_LT_LNOTAB", False, "PY_OD_DICTOFFSET"),
    # PEP 626 replaces co_lnotab by co_linetable, and f_lasti counts code
    # units instead of bytes (bpo-27129).
    ((3, 10), ["TP_LF_SELF_CLASS"], "PY_LT_LINETABLE", True, "PY_OD_DICTOFFSET"),
    # Frames become _PyInterpreterFrame, reached through tstate->cframe; the
    # position is the prev_instr pointer; PEP 657's location table;
    # co_qualname exists, so no class lookup (bpo-44590, bpo-44530).
    # Instance attributes in a managed dict or values array (bpo-45340).
    ((3, 11), ["TP_LF_INTERP_FRAME", "TP_LF_CFRAME", "TP_LF_LASTI_PTR", "TP_LF_IS_ENTRY"],
     "PY_LT_LOCATIONS", False, "PY_OD_MANAGED_VALUES_PTR"),
    # is_entry is gone; the eval loop pushes shim frames owned by the C
    # stack, owner 3 (gh-96421). The managed dict and values share one
    # tagged pointer (gh-95245).
    ((3, 12), ["TP_LF_INTERP_FRAME", "TP_LF_CFRAME", "TP_LF_LASTI_PTR", "TP_LF_OWNER"],
     "PY_LT_LOCATIONS", False, "PY_OD_MANAGED_TAGGED"),
    # _PyCFrame is gone: tstate->current_frame (gh-108035); instr_ptr.
    # Values inline in the object (gh-115776).
    ((3, 13), ["TP_LF_INTERP_FRAME", "TP_LF_LASTI_PTR", "TP_LF_OWNER"], "PY_LT_LOCATIONS", False,
     "PY_OD_MANAGED_INLINE"),
    # f_executable is a tagged _PyStackRef (gh-117139).
    ((3, 14), ["TP_LF_INTERP_FRAME", "TP_LF_LASTI_PTR", "TP_LF_OWNER", "TP_LF_STACKREF"],
     "PY_LT_LOCATIONS", False, "PY_OD_MANAGED_INLINE"),
]


def caps_for(version):
    """The CAPS row that covers version, or None."""
    rows = [c for c in CAPS if c[0] <= version and c[0][0] == version[0]]
    return rows[-1] if rows else None


def check_caps(b, layout):
    """Each flag that the layout can show must agree with it."""
    row = caps_for(b.version)
    if row is None:
        raise GenError(f"{b.name}: no CAPS row covers {b.version}")
    flags, lt = set(row[1]), row[2]
    facts = [
        ("TP_LF_CFRAME", layout["ts_cframe"] >= 0, "tstate->cframe"),
        ("TP_LF_IS_ENTRY", layout["frame_is_entry"] >= 0, "is_entry"),
        ("TP_LF_INTERP_FRAME", layout["ts_frame"] < 0, "no tstate->frame"),
        ("TP_LF_SELF_CLASS", layout["code_qualname"] < 0, "no co_qualname"),
        ("TP_LF_LASTI_PTR", layout["code_adaptive"] >= 0, "co_code_adaptive"),
    ]
    for flag, fact, what in facts:
        if (flag in flags) != fact:
            raise GenError(f"{b.name}: CAPS row {row[0]} says {flag} is "
                           f"{'set' if flag in flags else 'clear'}, but the DWARF "
                           f"{'shows' if fact else 'lacks'} {what}")
    od = row[4]
    od_facts = [
        ("PY_OD_DICTOFFSET", layout["values_values"] < 0, "no PyDictValues"),
        ("PY_OD_MANAGED_INLINE", layout["values_valid"] >= 0, "PyDictValues.valid"),
        ("PY_OD_MANAGED_TAGGED", layout["long_tag"] >= 0 and layout["values_valid"] < 0,
         "lv_tag and no PyDictValues.valid"),
    ]
    for kind, fact, what in od_facts:
        if (od == kind) != fact:
            raise GenError(f"{b.name}: CAPS row {row[0]} says {od}, but the DWARF "
                           f"{'shows' if fact else 'lacks'} {what}")
    if (lt in ("PY_LT_LNOTAB_U8", "PY_LT_LNOTAB")) != (b.version < (3, 10)):
        raise GenError(f"{b.name}: CAPS row {row[0]} says {lt}, RULES read co_"
                       f"{'lnotab' if b.version < (3, 10) else 'linetable'}")


class GenError(Exception):
    pass


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def layout_fields():
    """The members of struct py_layout, in declaration order: the
    PY_LAYOUT_FIELDS list the struct is made from."""
    text = read(os.path.join(REPO, "src/cpython/pyoffsets.h"))
    m = re.search(r"#define PY_LAYOUT_FIELDS\(X\)(.*?)\n\n", text, re.S)
    if not m:
        raise GenError("src/cpython/pyoffsets.h: PY_LAYOUT_FIELDS not found")
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    fields = re.findall(r"\bX\((\w+),", body)
    global TABLE_FIELDS
    TABLE_FIELDS = re.findall(r"\bX\((\w+),\s*TABLE\b", body)
    if not fields:
        raise GenError("src/cpython/pyoffsets.h: struct py_layout has no int32_t fields")
    missing = [f for f in fields if f not in RULES]
    if missing:
        raise GenError("no rule in tools/gen_offsets.py for py_layout field(s): " + ", ".join(missing))
    stale = [f for f in RULES if f not in fields]
    if stale:
        raise GenError("rules for fields struct py_layout does not have: " + ", ".join(stale))
    return fields


def debug_members():
    """The (ID, sub_struct, member) list of PY_DO_MEMBERS in src/cpython/debugoffsets.h."""
    text = read(os.path.join(REPO, "src/cpython/debugoffsets.h"))
    m = re.search(r"#define PY_DO_MEMBERS\(X\)((?:.*\\\n)*.*\n)", text)
    if not m:
        raise GenError("src/cpython/debugoffsets.h: PY_DO_MEMBERS not found")
    members = re.findall(r"X\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)", m.group(1))
    if not members:
        raise GenError("src/cpython/debugoffsets.h: PY_DO_MEMBERS is empty")
    return members


def patchlevel_hex(path):
    """PY_VERSION_HEX computed from patchlevel.h, exactly as the header does."""
    defs = dict(re.findall(r"^#define\s+(PY_\w+)\s+(\S+)", read(path), re.M))

    def value(name):
        v = defs.get(name)
        if v is None:
            raise GenError(f"{path}: no #define {name}")
        if v in defs:  # PY_RELEASE_LEVEL PY_RELEASE_LEVEL_FINAL
            return value(v)
        return int(v, 0)

    major, minor, micro = value("PY_MAJOR_VERSION"), value("PY_MINOR_VERSION"), value("PY_MICRO_VERSION")
    level, serial = value("PY_RELEASE_LEVEL"), value("PY_RELEASE_SERIAL")
    return major << 24 | minor << 16 | micro << 8 | level << 4 | serial


class Build:
    """One pyenv interpreter: its version and the libpython that holds its DWARF."""

    def __init__(self, root, name):
        self.name = name  # "3.8.18"
        d = os.path.join(root, name)
        libs = sorted(glob.glob(os.path.join(d, "lib", "libpython*.so.1.0")))
        pls = sorted(glob.glob(os.path.join(d, "include", "python*", "patchlevel.h")))
        if len(libs) != 1 or len(pls) != 1:
            raise GenError(f"{d}: expected one lib/libpython*.so.1.0 and one patchlevel.h, "
                           f"found {len(libs)} and {len(pls)}")
        self.lib = libs[0]
        self.librel = os.path.relpath(self.lib, d)  # "lib/libpython3.8.so.1.0"
        # The _asyncio extension (3.4+), whose DWARF has TaskObj.
        so = sorted(glob.glob(os.path.join(d, "lib", "python*", "lib-dynload", "_asyncio.*.so")))
        self.asyncio_so = so[0] if so else None
        self.hexversion = patchlevel_hex(pls[0])
        self.version = (self.hexversion >> 24, (self.hexversion >> 16) & 0xFF)
        micro = (self.hexversion >> 8) & 0xFF
        if self.hexversion & 0xFF != 0xF0 or name != f"{self.version[0]}.{self.version[1]}.{micro}":
            raise GenError(f"{d}: patchlevel.h says {self.hexversion:#010x}, "
                           f"which is not the final release {name}")

    def source(self):
        return f"DWARF of pyenv {self.name} {self.librel}, read with gdb"

    def eval(self, exprs, path=None):
        """Evaluates integer expressions in one gdb run against path (the
        libpython by default): {expr: int or None}.

        Each expression is preceded by a marker line, so one that gdb cannot
        evaluate (an error on stderr, nothing on stdout) leaves its own slot
        empty and cannot shift the others.
        """
        args = ["gdb", "-nx", "-batch"]
        for i, e in enumerate(exprs):
            args += ["-ex", f"echo @@{i}\\n", "-ex", f'printf "%ld\\n", (long)({e})']
        args.append(path or self.lib)
        try:
            p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=300, env=dict(os.environ, LC_ALL="C"))
        except FileNotFoundError:
            raise GenError("gdb not found; install it (apt-get install gdb)")
        out = {}
        cur = None
        for line in p.stdout.splitlines():
            m = re.fullmatch(r"@@(\d+)", line)
            if m:
                cur = int(m.group(1))
                continue
            if cur is not None and re.fullmatch(r"-?\d+", line):
                if cur in out:
                    raise GenError(f"{self.lib}: gdb printed two values for {exprs[cur]}")
                out[cur] = int(line)
        if not out:
            raise GenError(f"{self.lib}: gdb evaluated nothing:\n{p.stderr.strip()}")
        self.gdb_errors = p.stderr.strip()
        return {e: out.get(i) for i, e in enumerate(exprs)}


class HeaderBuild:
    """A 3.14+ interpreter known only by its installed headers (Debian's
    libpython3.X-dev in a root made by scripts/make-roots.sh): expressions are
    evaluated by compiling them as C constant expressions against those headers
    and running the result. Only the _Py_DebugOffsets positions come from here;
    the interpreter itself is never run."""

    def __init__(self, root, incdir, free_threaded=False):
        self.root = root
        self.incdir = incdir  # .../usr/include/python3.14
        self.hexversion = patchlevel_hex(os.path.join(incdir, "patchlevel.h"))
        self.version = (self.hexversion >> 24, (self.hexversion >> 16) & 0xFF)
        micro = (self.hexversion >> 8) & 0xFF
        # The free-threaded build's layout (PEP 703): the same headers with
        # Py_GIL_DISABLED defined, as ./configure --disable-gil defines it.
        self.free_threaded = free_threaded
        self.name = f"{self.version[0]}.{self.version[1]}.{micro}" + ("t" if free_threaded else "")
        self.lib = incdir
        self.gdb_errors = ""

    def source(self):
        suite = os.path.basename(self.root.rstrip("/"))
        return (f"offsetof against the headers of Debian {suite} libpython{self.version[0]}."
                f"{self.version[1]}-dev {self.name[:-1] if self.free_threaded else self.name}, compiled with gcc"
                + (" and Py_GIL_DISABLED defined" if self.free_threaded else ""))

    def eval(self, exprs):
        """{expr: int or None}: one program prints them all; an expression the
        compiler rejects (a member this version lacks) is dropped and the rest
        compiled again."""
        import tempfile
        live = list(range(len(exprs)))
        with tempfile.TemporaryDirectory() as tmp:
            src, exe = os.path.join(tmp, "do.c"), os.path.join(tmp, "do")
            for _ in range(len(exprs) + 1):
                # 3.13 keeps _Py_DebugOffsets in pycore_runtime.h, which
                # Python.h's internal headers bring in.
                dbg = os.path.exists(os.path.join(self.incdir, "internal", "pycore_debug_offsets.h"))
                lines = ["#define Py_BUILD_CORE 1", "#include <Python.h>"]
                lines += ["#include <internal/pycore_debug_offsets.h>"] if dbg else [
                    "#include <internal/pycore_runtime.h>"]
                lines += ["#include <internal/pycore_dict.h>",
                         "#include <internal/pycore_moduleobject.h>", "#include <stdio.h>",
                         "int main(void)", "{"]
                first = len(lines) + 1
                for i in live:
                    lines.append(f'\tprintf("@@{i} %ld\\n", (long)({exprs[i]}));')
                lines += ["\treturn 0;", "}", ""]
                with open(src, "w") as f:
                    f.write("\n".join(lines))
                ft = ["-DPy_GIL_DISABLED=1"] if self.free_threaded else []
                p = subprocess.run(["gcc", "-w"] + ft + ["-I", self.incdir, "-idirafter",
                                    os.path.join(self.root, "usr/include"), src, "-o", exe],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if p.returncode == 0:
                    break
                bad = {int(n) - first for n in re.findall(r"do\.c:(\d+):\d+: error", p.stderr)}
                bad = {live[b] for b in bad if 0 <= b < len(live)}
                if not bad:
                    raise GenError(f"{self.incdir}: cannot compile against the headers:\n{p.stderr}")
                self.gdb_errors += p.stderr
                live = [i for i in live if i not in bad]
            out = subprocess.run([exe], stdout=subprocess.PIPE, text=True, check=True).stdout
        vals = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"@@(\d+) (-?\d+)", out)}
        return {e: vals.get(i) for i, e in enumerate(exprs)}


def header_builds(roots, have, free_threaded=False):
    """HeaderBuilds for the minors that no pyenv build in have covers, the
    newest headers of each. free_threaded: the layouts of the free-threaded
    builds (./configure --disable-gil) of every 3.13+ minor a root has
    headers of, which no Debian package is."""
    if not os.path.isdir(roots):
        raise GenError(f"{roots}: no such directory; make it with scripts/make-roots.sh (--roots)")
    found = {}
    for pl in sorted(glob.glob(os.path.join(roots, "*", "usr", "include", "python3.*", "patchlevel.h"))):
        inc = os.path.dirname(pl)
        if not free_threaded and not os.path.exists(os.path.join(inc, "internal", "pycore_debug_offsets.h")):
            continue
        b = HeaderBuild(os.path.dirname(os.path.dirname(os.path.dirname(inc))), inc, free_threaded)
        if b.version < DEBUG_OFFSETS_SINCE or b.version in have or (
                b.version in found and found[b.version].hexversion >= b.hexversion):
            continue
        found[b.version] = b
    return [found[v] for v in sorted(found)]


def in_range(v, first, last):
    return first <= v and (last is None or v <= last)


def expr_for(typ, member):
    if member is SIZEOF:
        return f"sizeof({typ})"
    return f"&(({typ} *)0)->{member}"


def read_layout(b, fields, only=None):
    """{field: offset or -1} for one build, following RULES; with only, just
    those fields (the others -1)."""
    want = {}
    for f in fields:
        if only is not None and f not in only:
            continue
        rules = [r for r in RULES[f] if in_range(b.version, r[0], r[1])]
        if len(rules) > 1:
            raise GenError(f"field {f}: overlapping rules for {b.name}")
        if rules:
            want[f] = expr_for(rules[0][2], rules[0][3])
    # Cross-checks of the version: the interpreter's own record of it, read
    # from the file's initialised data, must agree with patchlevel.h.
    checks = []
    # Headers only (HeaderBuild): there is no data to cross-check.
    if b.version >= (3, 11) and not isinstance(b, HeaderBuild):
        checks.append("Py_Version")
    if b.version >= DEBUG_OFFSETS_SINCE and not isinstance(b, HeaderBuild):
        checks.append("_PyRuntime.debug_offsets.version")
    vals = b.eval(list(want.values()) + checks)
    for c in checks:
        if vals[c] is None or vals[c] & 0xFFFFFFFF != b.hexversion:
            raise GenError(f"{b.lib}: {c} is {vals[c]}, patchlevel.h says {b.hexversion:#010x}")
    layout = {}
    for f in fields:
        if f not in want:
            layout[f] = -1
            continue
        v = vals[want[f]]
        if v is None:
            raise GenError(f"{b.lib}: gdb cannot evaluate {want[f]} (field {f}); "
                           f"the rule for {b.name} is wrong:\n{b.gdb_errors}")
        if not 0 <= v < 1 << 20:
            raise GenError(f"{b.lib}: {want[f]} = {v} is not a plausible offset")
        layout[f] = v
    return layout


def read_debug_row(b, members):
    """Positions of the _Py_DebugOffsets members in one 3.13+ build."""
    top = {
        "struct_size": "sizeof(_Py_DebugOffsets)",
        "cookie": "&((_Py_DebugOffsets *)0)->cookie",
        "version": "&((_Py_DebugOffsets *)0)->version",
        "free_threaded": "&((_Py_DebugOffsets *)0)->free_threaded",
    }
    exprs = {m[0]: f"&((_Py_DebugOffsets *)0)->{m[1]}.{m[2]}" for m in members}
    vals = b.eval(list(top.values()) + list(exprs.values()))
    t = {k: vals[e] for k, e in top.items()}
    if None in t.values():
        raise GenError(f"{b.lib}: _Py_DebugOffsets lacks a cookie, version or free_threaded "
                       f"member:\n{b.gdb_errors}")
    # The reader relies on these two positions before it knows the version.
    if t["cookie"] != 0 or t["version"] != 8:
        raise GenError(f"{b.lib}: _Py_DebugOffsets cookie at {t['cookie']} and version at "
                       f"{t['version']}, the reader expects 0 and 8")
    pos = {}
    for ident, sub, member in members:
        v = vals[exprs[ident]]
        pos[ident] = -1 if v is None else v
    absent = [f"{sub}.{member}" for ident, sub, member in members if pos[ident] < 0]
    if absent:
        print(f"gen_offsets: {b.name}: _Py_DebugOffsets has no " + ", ".join(absent),
              file=sys.stderr)
    return t, pos


def builds(pyenv):
    """The newest patch release of each minor version under pyenv, oldest first."""
    if not os.path.isdir(pyenv):
        raise GenError(f"{pyenv}: no such directory (--pyenv)")
    found = []
    for name in os.listdir(pyenv):
        if re.fullmatch(r"\d+\.\d+\.\d+", name):
            found.append(Build(pyenv, name))
    if not found:
        raise GenError(f"{pyenv}: no pyenv interpreter X.Y.Z found")
    newest = {}
    for b in sorted(found, key=lambda b: b.hexversion):
        if b.version in newest:
            print(f"gen_offsets: {newest[b.version].name} skipped, {b.name} is newer", file=sys.stderr)
        newest[b.version] = b
    return [newest[v] for v in sorted(newest)]


def header(what, out_path):
    return (f"/* {os.path.basename(out_path)} - {what}\n"
            " *\n"
            " * GENERATED by tools/gen_offsets.py from the DWARF of the pyenv interpreter\n"
            " * builds. Do not edit: run `make offsets` (or tools/gen_offsets.py --all) and\n"
            " * commit the result.\n"
            " */\n"
            "\n"
            "/* Generated text is checked byte for byte by --check, so no formatter may\n"
            " * touch it. */\n"
            "/* clang-format off */\n")


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def layout_block(b, fields, layout, indent):
    t = "\t" * indent
    lines = [f"{t}{{", f"{t}\t.hexversion = {b.hexversion:#010x},", f"{t}\t.source = {c_string(b.source())},"]
    if getattr(b, "free_threaded", False):
        lines.append(f"{t}\t.free_threaded = true,")
    lines += [f"{t}\t.layout =", f"{t}\t\t{{"]
    for f in fields:
        lines.append(f"{t}\t\t\t.{f} = {layout[f]},")
    lines += [f"{t}\t\t}},", f"{t}}},"]
    return lines


def gen_layouts(bs, out_path):
    fields = layout_fields()
    rows = [b for b in bs if b.version < DEBUG_OFFSETS_SINCE]
    if not rows:
        raise GenError("no interpreter older than 3.13 found")
    out = [header("CPython struct layouts for versions without _Py_DebugOffsets, and\n"
                  " * what each version's walk needs beyond its offsets.", out_path),
           '#include "taipan_abi.h"', '#include "cpython/pyoffsets.h"', "",
           "const struct py_layout_entry py_layout_table[] = {"]
    for b in bs:
        layout = read_layout(b, fields)
        check_caps(b, layout)
        if b.version < DEBUG_OFFSETS_SINCE:
            out += layout_block(b, fields, layout, 1)
    out += ["};", "",
            "const unsigned int py_layout_table_len = sizeof(py_layout_table) / sizeof(py_layout_table[0]);",
            "", "/* 3.13+: the fields _Py_DebugOffsets lacks (TABLE in PY_LAYOUT_FIELDS). */",
            "const struct py_layout_entry py_layout_supp_table[] = {"]
    supp = [b for b in bs if b.version >= DEBUG_OFFSETS_SINCE]
    supp += header_builds(ROOTS, {b.version for b in supp})
    supp += header_builds(ROOTS, set(), free_threaded=True)
    for b in supp:
        out += layout_block(b, fields, read_layout(b, fields, TABLE_FIELDS), 1)
    out += ["};", "",
            "const unsigned int py_layout_supp_table_len =",
            "\tsizeof(py_layout_supp_table) / sizeof(py_layout_supp_table[0]);",
            "", "/* From tools/gen_offsets.py's CAPS: each row applies from its version on. */",
            "const struct py_caps py_caps_table[] = {"]
    for (major, minor), flags, lt, units, od in CAPS:
        out += ["\t{", f"\t\t.major = {major},", f"\t\t.minor = {minor},",
                f"\t\t.lflags = {' | '.join(flags)},", f"\t\t.linetable = {lt},",
                f"\t\t.lasti_in_units = {'true' if units else 'false'},", f"\t\t.objdict = {od},",
                "\t},"]
    out += ["};", "",
            "const unsigned int py_caps_table_len = sizeof(py_caps_table) / sizeof(py_caps_table[0]);",
            "", "/* clang-format on */", ""]
    return "\n".join(out)


def gen_debug(bs, out_path):
    members = debug_members()
    rows = [b for b in bs if b.version >= DEBUG_OFFSETS_SINCE]
    if not rows:
        raise GenError("no interpreter of 3.13 or later found")
    out = [header("positions of the members of _Py_DebugOffsets, per minor version.", out_path),
           '#include "cpython/debugoffsets.h"', "",
           "const struct py_debug_offsets_row py_debug_offsets_table[] = {"]
    rows += header_builds(ROOTS, {b.version for b in rows})
    for b in rows:
        t, pos = read_debug_row(b, members)
        out += ["\t{", f"\t\t.hexversion = {b.hexversion:#010x},", f"\t\t.source = {c_string(b.source())},",
                f"\t\t.struct_size = {t['struct_size']},", f"\t\t.free_threaded_pos = {t['free_threaded']},",
                "\t\t.pos =", "\t\t\t{"]
        for ident, _, _ in members:
            out.append(f"\t\t\t\t[PY_DO_{ident}] = {pos[ident]},")
        out += ["\t\t\t},", "\t},"]
    out += ["};", "",
            "const unsigned int py_debug_offsets_table_len =",
            "\tsizeof(py_debug_offsets_table) / sizeof(py_debug_offsets_table[0]);", "",
            "/* clang-format on */", ""]
    return "\n".join(out)


def gen_dwarf_test(bs, out_path):
    fields = layout_fields()
    rows = [b for b in bs if b.version >= DEBUG_OFFSETS_SINCE]
    if not rows:
        raise GenError("no interpreter of 3.13 or later found")
    out = [header("struct py_layout of each 3.13+ build, read from DWARF, for tests only.", out_path),
           "#ifndef TAIPAN_PYOFFSETS_DWARF_GEN_H", "#define TAIPAN_PYOFFSETS_DWARF_GEN_H", "",
           '#include "cpython/pyoffsets.h"', "",
           "struct py_dwarf_layout {",
           "\tconst char *pyenv_lib; /* the build, relative to the pyenv versions directory */",
           "\tstruct py_layout_entry entry;", "};", "",
           "static const struct py_dwarf_layout py_dwarf_layouts[] = {"]
    for b in rows:
        out += ["\t{", f"\t\t.pyenv_lib = {c_string(b.name + '/' + b.librel)},", "\t\t.entry ="]
        out += layout_block(b, fields, read_layout(b, fields), 2)
        out += ["\t},"]
    out += ["};", "", "/* clang-format on */", "", "#endif /* TAIPAN_PYOFFSETS_DWARF_GEN_H */", ""]
    return "\n".join(out)


# The TaskObj fields dump --tasks reads before 3.14 (_asynciomodule.c), in
# struct py_async_layout's order (src/cpython/pytasks.h).
ASYNC_FIELDS = ["task_loop", "task_state", "task_fut_waiter", "task_coro", "task_name"]
# asyncio keeps its registry of tasks in the C module from 3.8 on (the
# Task's name from 3.8, bpo-34270); 3.14 exports its offsets itself.
ASYNC_SINCE, ASYNC_UNTIL = (3, 8), (3, 13)


def gen_asyncio(bs, out_path):
    rows = [b for b in bs if in_range(b.version, ASYNC_SINCE, ASYNC_UNTIL)]
    if not rows:
        raise GenError("no interpreter of 3.8 to 3.13 found")
    out = [header("the _asyncio extension's TaskObj, per minor version before 3.14.", out_path),
           '#include "cpython/pytasks.h"', "",
           "const struct py_async_layout py_async_table[] = {"]
    for b in rows:
        if not b.asyncio_so:
            raise GenError(f"{b.name}: no lib-dynload/_asyncio*.so")
        exprs = {f: expr_for("TaskObj", f) for f in ASYNC_FIELDS}
        vals = b.eval(list(exprs.values()), b.asyncio_so)
        rel = os.path.relpath(b.asyncio_so, os.path.dirname(os.path.dirname(b.lib)))
        out += ["\t{", f"\t\t.hexversion = {b.hexversion:#010x},",
                f"\t\t.source = {c_string(f'DWARF of pyenv {b.name} {rel}, read with gdb')},"]
        for f in ASYNC_FIELDS:
            v = vals[exprs[f]]
            if v is None or not 0 < v < 4096:
                raise GenError(f"{b.asyncio_so}: TaskObj.{f} is {v}:\n{b.gdb_errors}")
            out.append(f"\t\t.{f} = {v},")
        out.append("\t},")
    out += ["};", "",
            "const unsigned int py_async_table_len = sizeof(py_async_table) / sizeof(py_async_table[0]);",
            "", "/* clang-format on */", ""]
    return "\n".join(out)


GENERATORS = {"layouts": gen_layouts, "debug": gen_debug, "dwarf-test": gen_dwarf_test,
              "asyncio": gen_asyncio}


def emit(kind, bs, output, check):
    """Writes or checks one kind; returns True when a check found no difference."""
    # The header names the file by its place in the repo, wherever it is
    # written, so that a copy elsewhere can be checked too.
    text = GENERATORS[kind](bs, KINDS[kind])
    if check:
        try:
            old = read(check)
        except OSError as e:
            print(f"gen_offsets: {check}: {e.strerror}", file=sys.stderr)
            return False
        if old == text:
            return True
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                   check, "regenerated"))
        print(f"gen_offsets: {check} differs from what the DWARF says; run `make offsets`",
              file=sys.stderr)
        return False
    if output:
        tmp = output + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, output)
    else:
        sys.stdout.write(text)
    return True


def main():
    first, _, rest = __doc__.partition("\n")
    ap = argparse.ArgumentParser(description=first, epilog=rest,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kind", choices=sorted(KINDS), default="layouts", help="which file (default layouts)")
    ap.add_argument("--output", metavar="PATH", help="write here (default stdout)")
    ap.add_argument("--check", metavar="PATH", nargs="?", const="",
                    help="regenerate and compare with PATH; exit 1 with a diff if they differ")
    ap.add_argument("--pyenv", metavar="DIR", default=DEFAULT_PYENV, help=f"default {DEFAULT_PYENV}")
    ap.add_argument("--roots", metavar="DIR", default=DEFAULT_ROOTS,
                    help=f"Debian roots with newer headers (scripts/make-roots.sh), default {DEFAULT_ROOTS}")
    ap.add_argument("--all", action="store_true",
                    help="every kind at its path in the repo; with --check, compare instead of writing")
    a = ap.parse_args()
    global ROOTS
    ROOTS = a.roots
    if a.output and a.check is not None:
        ap.error("--output and --check exclude each other")
    if a.all and a.output:
        ap.error("--all writes to the repo paths; it takes no --output")
    if not a.all and a.check == "":
        ap.error("--check needs a PATH unless --all is given")
    try:
        bs = builds(a.pyenv)
        if a.all:
            ok = True
            for kind, rel in KINDS.items():
                path = os.path.join(REPO, rel)
                if a.check is not None:
                    ok = emit(kind, bs, None, path) and ok
                else:
                    emit(kind, bs, path, None)
            return 0 if ok else 1
        return 0 if emit(a.kind, bs, a.output, a.check or None) else 1
    except GenError as e:
        print(f"gen_offsets: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
