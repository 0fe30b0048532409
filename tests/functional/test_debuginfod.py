"""Debug files fetched by build-id from a debuginfod server (issue 30).

A shared library whose work runs in a function that only its debug file
names (hidden: not in .dynsym; stripped: no .symtab) is called from Python
through ctypes. Debian's own `debuginfod` serves, on loopback, the debug
file the test made of it with `objcopy --only-keep-debug`. With
DEBUGINFOD_URLS naming that server, taipan fetches it in a thread of its
own while it records, and names the function from then on; with
--no-debuginfod, or with a server that is down, the frames keep their
module+offset name and the recording goes on as before.
"""
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import interpreter, parse_folded, record, require

HIDDEN_C = r"""
static volatile unsigned long sink;
__attribute__((noinline, visibility("hidden"))) void taipan_hidden_work(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * i;
}
void hidden_entry(unsigned long n)
{
	taipan_hidden_work(n);
}
"""
LIBDEBUGINFOD = "/usr/lib/x86_64-linux-gnu/libdebuginfod.so.1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def hidden_lib(tmp_path):
    """(the stripped library, its build-id, the folder of its debug file)."""
    for tool in ("gcc", "objcopy", "strip"):
        require(shutil.which(tool), tool)
    src, lib, srv = tmp_path / "hidden.c", tmp_path / "libhidden.so", tmp_path / "srv"
    srv.mkdir()
    src.write_text(HIDDEN_C)
    subprocess.run(["gcc", "-O1", "-g", "-fPIC", "-shared", "-Wl,--build-id", "-o", str(lib), str(src)],
                   check=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(lib), str(srv / "libhidden.debug")], check=True)
    subprocess.run(["strip", "--strip-all", str(lib)], check=True)
    notes = subprocess.run(["readelf", "-n", str(lib)], stdout=subprocess.PIPE, text=True, check=True).stdout
    build_id = [line.split()[-1] for line in notes.splitlines() if "Build ID" in line][0]
    syms = subprocess.run(["nm", "-D", str(lib)], stdout=subprocess.PIPE, text=True, check=True).stdout
    assert "taipan_hidden_work" not in syms and "hidden_entry" in syms
    return lib, build_id, srv


@pytest.fixture
def server(tmp_path, hidden_lib):
    """A debuginfod serving the debug file, on loopback: its URL, once it
    answers for the build-id."""
    require(shutil.which("debuginfod"), "debuginfod (the server)")
    _, build_id, srv = hidden_lib
    port = free_port()
    proc = subprocess.Popen(["debuginfod", "-F", "-p", str(port), "-d", str(tmp_path / "db.sqlite"), str(srv)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d" % port
    try:
        deadline = time.time() + 60
        while True:
            assert proc.poll() is None, "debuginfod exited"
            try:
                with urllib.request.urlopen("%s/buildid/%s/debuginfo" % (url, build_id), timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            assert time.time() < deadline, "debuginfod did not serve the debug file in 60 s"
            time.sleep(0.2)
        yield url
    finally:
        proc.kill()
        proc.wait()


def record_hidden(taipan, tmp_path, workload, lib, env, extra=()):
    """Records the library's caller 3 s; returns (samples in its work named
    by the function, those named by module+offset, --stats)."""
    it = interpreter("debian-3.11-static")
    w = workload(it, "call_lib.py", str(lib), "hidden_entry", "2000000")
    out = tmp_path / ("out%d.folded" % len(os.listdir(tmp_path)))
    res = record(taipan, out, w.pid, seconds=3, rate=200,
                 extra=["--folded-threads", "--stats"] + list(extra), quiet=True,
                 env=dict(os.environ, **env))
    named = unnamed = 0
    for s in parse_folded(out):
        names = [f.name for f in s.frames]
        if "taipan_hidden_work" in names:
            named += s.count
        elif any(n.startswith("libhidden.so+0x") for n in names):
            unnamed += s.count
    return named, unnamed, res.stderr


def test_debug_file_fetched_names_the_function(taipan, tmp_path, workload, hidden_lib, server):
    require(LIBDEBUGINFOD, "libdebuginfod1")
    lib = hidden_lib[0]
    env = {"DEBUGINFOD_URLS": server, "DEBUGINFOD_CACHE_PATH": str(tmp_path / "cache")}
    named, unnamed, err = record_hidden(taipan, tmp_path, workload, lib, env)
    # 3 s at 200 Hz; the fetch takes milliseconds, then every later sample
    # is named.
    assert named + unnamed >= 200, err
    assert named >= 0.9 * (named + unnamed), (named, unnamed, err)
    assert "debuginfod: " in err and " 1 fetched" in err.replace(",", ""), err
    # In libdebuginfod's cache now: a second recording names it from its
    # first sample, the server gone or not.
    assert os.listdir(tmp_path / "cache")
    named, unnamed, err = record_hidden(taipan, tmp_path, workload, lib,
                                        dict(env, DEBUGINFOD_URLS="http://127.0.0.1:%d" % free_port()))
    assert named >= 200 and unnamed == 0, (named, unnamed, err)


def test_no_debuginfod_and_a_server_that_is_down(taipan, tmp_path, workload, hidden_lib, server):
    require(LIBDEBUGINFOD, "libdebuginfod1")
    lib = hidden_lib[0]
    env = {"DEBUGINFOD_URLS": server, "DEBUGINFOD_CACHE_PATH": str(tmp_path / "cache")}
    named, unnamed, err = record_hidden(taipan, tmp_path, workload, lib, env, ["--no-debuginfod"])
    assert named == 0 and unnamed >= 200, (named, unnamed, err)
    assert "debuginfod:" not in err
    assert not os.path.exists(tmp_path / "cache") or not os.listdir(tmp_path / "cache")
    # Nothing listens there: every fetch fails, the recording does not.
    env["DEBUGINFOD_URLS"] = "http://127.0.0.1:%d" % free_port()
    named, unnamed, err = record_hidden(taipan, tmp_path, workload, lib, env)
    assert named == 0 and unnamed >= 200, (named, unnamed, err)
    assert " 0 fetched" in err.replace(",", ""), err
