#!/usr/bin/env python3
# make_seeds.py - seed corpora for the file-format fuzzers, from this machine's real files.
#
# Usage: tests/fuzz/make_seeds.py OUTDIR FIXTURES_DIR CC
#
# Writes OUTDIR/elf, OUTDIR/procmaps, OUTDIR/linetable, OUTDIR/ksyms, OUTDIR/unwtab and
# OUTDIR/perfmap. The
# fuzzers for target memory (symbolize, pywalk) and for _Py_DebugOffsets write
# their own seeds (TAIPAN_FUZZ_SEEDS; see tests/fuzz/run.sh), since they need
# the layout tables compiled into taipan.
#
#   elf        small real ELF files whole (pyenv's libpython3.so stubs, small
#              extension modules), the first 64 KiB of the real interpreters
#              (truncated files are input taipan must refuse cleanly), and a
#              tiny library built here with the symbols, sections and dynamic
#              entries taipan looks for;
#   procmaps   lines of real /proc/PID/maps files;
#   linetable  records of the line-table fixtures of every installed Python
#              (tests/fixtures/dump_linetables.py), in the fuzzer's format;
#   ksyms      slices of /proc/kallsyms, module symbols included;
#   unwtab     whole small ELF files with CFI: pyenv's small extension modules,
#              and tests/fixtures/unwtab built here (.eh_frame with a PLT,
#              .debug_frame, frame pointers); fuzz_unwtab corrupts their CFI;
#   perfmap    perf maps as CPython -X perf, bcc and Node write them, a last
#              line cut short, and broken lines.
import glob
import os
import struct
import subprocess
import sys
import tempfile

ELF_HEAD = 64 * 1024


def write(dirname, name, data):
    os.makedirs(dirname, exist_ok=True)
    with open(os.path.join(dirname, name), "wb") as f:
        f.write(data)


def safe(path):
    return path.strip("/").replace("/", "_")


def elf_seeds(out, cc):
    d = os.path.join(out, "elf")
    small = glob.glob("/root/.pyenv/versions/*/lib/libpython3.so")
    small += sorted(glob.glob("/root/.pyenv/versions/*/lib/python*/lib-dynload/_testimportmultiple*.so"))
    for p in small:
        if os.path.getsize(p) <= ELF_HEAD:
            with open(p, "rb") as f:
                write(d, safe(p), f.read())
    heads = glob.glob("/root/.pyenv/versions/*/lib/libpython*.so.1.0")
    heads += ["/usr/bin/python3.11"]
    heads += glob.glob("/var/cache/taipan-test/*/usr/bin/python3.1[3-9]")
    heads += glob.glob("/var/cache/taipan-test/*/usr/lib/x86_64-linux-gnu/libpython3.*.so.1.0")
    for p in heads:
        if os.path.isfile(p):
            with open(p, "rb") as f:
                write(d, safe(p) + ".head", f.read(ELF_HEAD))
    # A libpython in miniature: what pyproc.c looks up, in a file of a few KiB.
    src = r'''
const char version_string[] = "3.12.1 (main, Jan  1 2024, 00:00:00) [GCC 12.2.0]";
const unsigned long Py_Version = 0x030c01f0;
struct { char cookie[8]; unsigned long version; unsigned long rest[8]; }
    _PyRuntime = {"xdebugpy", 0x030d00f0, {0}};
void *PyCode_Type[32];
static int counter;
int Py_GetVersion(void) { return ++counter; }
'''
    with tempfile.TemporaryDirectory() as tmp:
        c = os.path.join(tmp, "mini.c")
        with open(c, "w") as f:
            f.write(src)
        for name, extra in (("mini-libpython", []), ("mini-libpython-stripped", ["-s"])):
            so = os.path.join(tmp, name + ".so")
            cmd = [cc, "-shared", "-fPIC", "-nostdlib", "-O1", c, "-o", so,
                   "-Wl,-soname,libpython3.12.so.1.0", "-Wl,--build-id=sha1",
                   "-Wl,-z,max-page-size=4096", "-Wl,-z,noseparate-code", "-lc"] + extra
            if subprocess.run(cmd).returncode == 0:
                with open(so, "rb") as f:
                    write(d, name, f.read())
            else:
                print("make_seeds: could not build the miniature libpython", file=sys.stderr)


def procmaps_seeds(out):
    d = os.path.join(out, "procmaps")
    seen = set()
    for pid in ["self", "1"] + sorted(p for p in os.listdir("/proc") if p.isdigit())[:50]:
        try:
            with open("/proc/%s/maps" % pid, "rb") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            # One seed per shape: the path's kind, not every library.
            parts = line.split(None, 5)
            path = parts[5] if len(parts) > 5 else b""
            key = (parts[1], path[:1], path.endswith(b"(deleted)"), path.startswith(b"["))
            if key in seen:
                continue
            seen.add(key)
            write(d, "line%03d" % len(seen), line)
    extra = [
        b"7f0000000000-7f0000001000 r-xp 00000000 fd:01 1234                       /usr/lib/libpython3.12.so.1.0 (deleted)",
        b"00400000-00401000 r--p 00000000 103:02 4242 /opt/py with space/bin/python3",
        b"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]",
        b"55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0",
    ]
    for i, line in enumerate(extra):
        write(d, "extra%d" % i, line)


KINDS = {"LNOTAB_U8": 0, "LNOTAB": 1, "LINETABLE": 2, "LOCATIONS": 3}


def linetable_seeds(out, fixtures):
    d = os.path.join(out, "linetable")
    n = 0
    for path in sorted(glob.glob(os.path.join(fixtures, "linetables-*.txt"))):
        per_file = 0
        with open(path) as f:
            for line in f:
                if line.startswith("#") or per_file >= 40:
                    continue
                w = line.split()
                if len(w) < 6 or w[0] not in KINDS:
                    continue
                table = b"" if w[4] == "-" else bytes.fromhex(w[4])
                if len(table) > 4000:
                    continue
                pairs = w[6:]
                off = int(pairs[len(pairs) // 2].split(":")[0]) if pairs else 0
                data = struct.pack("<BiI", KINDS[w[0]], int(w[2]), off) + table
                write(d, "%s-%d" % (os.path.basename(path)[11:-4], per_file), data)
                per_file += 1
                n += 1
    if n == 0:
        print("make_seeds: no line-table fixtures in %s" % fixtures, file=sys.stderr)


def ksyms_seeds(out):
    d = os.path.join(out, "ksyms")
    try:
        with open("/proc/kallsyms", "rb") as f:
            lines = f.read().splitlines(True)
    except OSError:
        lines = []
    if lines:
        write(d, "head", b"".join(lines[:200]))
        write(d, "tail", b"".join(lines[-200:]))
        mid = len(lines) // 2
        write(d, "mid", b"".join(lines[mid:mid + 200]))
        # What kptr_restrict makes of it: every address zero.
        write(d, "restricted", b"".join(b"0000000000000000" + l[16:] for l in lines[:50]))
    write(d, "aliases",
          b"ffffffff81000000 T _text\nffffffff81000000 t alias\nffffffff81000000 W weak\n"
          b"ffffffff81000100 D data\nffffffff81000200 t mod_fn\t[mod]\nffffffff80000000 T low")


def unwtab_seeds(out, cc):
    d = os.path.join(out, "unwtab")
    small = sorted(glob.glob("/root/.pyenv/versions/3.1*/lib/python*/lib-dynload/*.so"))
    n = 0
    for p in small:
        if os.path.getsize(p) <= ELF_HEAD and n < 24:
            with open(p, "rb") as f:
                write(d, safe(p), f.read())
            n += 1
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "unwtab")
    with tempfile.TemporaryDirectory() as tmp:
        eh, dbg, so = (os.path.join(tmp, x) for x in ("eh.o", "dbg.o", "mixed.so"))
        base = [cc, "-O1", "-fPIC", "-c"]
        ok = (subprocess.run(base + ["-fasynchronous-unwind-tables", os.path.join(src, "eh.c"),
                                     "-o", eh]).returncode == 0 and
              subprocess.run(base + ["-g", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
                                     os.path.join(src, "dbg.c"), "-o", dbg]).returncode == 0)
        for name, extra in (("mixed", []), ("mixed-fp", ["-fno-omit-frame-pointer"])):
            if ok and subprocess.run([cc, "-shared", "-nostdlib", "-Wl,-z,max-page-size=4096",
                                      eh, dbg, "-o", so] + extra).returncode == 0:
                with open(so, "rb") as f:
                    write(d, name, f.read())
                n += 1
        # The rule forms of realigned stacks and probe loops: CFA on r10,
        # r11 and r13, CFA = *(rbp + N), rbp saved at rbp + N.
        realign = os.path.join(tmp, "realign.so")
        if subprocess.run([cc, "-O2", "-fPIC", "-shared", "-fomit-frame-pointer", "-fstack-clash-protection",
                           os.path.join(src, "..", "..", "workloads", "realign.c"), os.path.join(src, "drap13.S"),
                           "-o", realign]).returncode == 0:
            with open(realign, "rb") as f:
                write(d, "realign", f.read())
            n += 1
    if n == 0:
        print("make_seeds: no ELF seeds for unwtab", file=sys.stderr)


def perfmap_seeds(out):
    """Perf maps as CPython -X perf, bcc and Node write them, and broken ones."""
    d = os.path.join(out, "perfmap")
    write(d, "cpython", b"7f05df0bb000 b py::_find_and_load:<frozen importlib._bootstrap>\n"
                        b"7f05df0bb00b b py::Worker.run.<locals>.inner:/tmp/chain.py\n")
    write(d, "bcc", b"0x7f0000001000 0x20 LazyCompile:*g /b.js:10\r\n0x10 0x10 x\n")
    write(d, "partial", b"1000 100 one\n2000 1")
    write(d, "bad", b"zz 10 bad\n1 0 empty\nffffffffffffff00 1000 wraps\n\n\n1 1\n")


def main():
    if len(sys.argv) != 4:
        print("usage: make_seeds.py OUTDIR FIXTURES_DIR CC", file=sys.stderr)
        return 2
    out, fixtures, cc = sys.argv[1:]
    elf_seeds(out, cc)
    procmaps_seeds(out)
    linetable_seeds(out, fixtures)
    ksyms_seeds(out)
    unwtab_seeds(out, cc)
    perfmap_seeds(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
