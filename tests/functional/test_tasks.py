"""taipan dump --tasks: every asyncio task of a process with its coroutines'
frames and the tasks that await it. On 3.14 and 3.15 the tree is the one
`python3.X -m asyncio pstree PID` prints, line for line; on 3.8 to 3.13,
where CPython has no such tool, it is the tree the process itself builds
from asyncio.all_tasks(); and a hostile graph (a cycle, 100,000 tasks) is
marked and bounded."""

import json
import os
import re
import shutil
import subprocess
import time

import pytest

from agent_fixtures import agents  # noqa: F401 (a fixture)
from conftest import ROOT_WORKLOADS, WORKLOADS, Recording, copy_workloads, go_pprof, interpreter, marked_lines, \
    parse_folded, record, run_taipan, tag_values


@pytest.fixture
def tasks(talker):
    """tasks(ident, script, *args): tests/workloads/SCRIPT under interpreter
    ident (a Talker, with it and the tree it printed), ready; in a root, in
    a mount namespace of its own with /proc mounted, so that a tool run in
    the root (pstree) can read it."""

    def start(ident, script, *args):
        it = interpreter(ident)
        if it.root:
            copy_workloads(it.root)
            argv = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                    'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"', it.root, it.path,
                    os.path.join(ROOT_WORKLOADS, script)]
        else:
            argv = [it.path, os.path.join(WORKLOADS, script)]
        t = talker(argv + list(args), script)
        t.it = it
        t.tree = next((json.loads(line[5:]) for line in t.lines if line.startswith("tree ")), None)
        return t
    return start


def dump_tasks(taipan, pid, *extra):
    res = run_taipan(taipan, ["dump", "-p", pid, "--tasks"] + list(extra), timeout=120)
    assert res.returncode == 0, res.stderr
    return res


@pytest.mark.parametrize("ident", ["sid-3.14", "sid-3.15"])
def test_tree_equals_asyncio_pstree(taipan, tasks, ident):
    """The text tree equals CPython's own `python -m asyncio pstree` of the
    same process, line for line: task names, coroutine frames with their
    lines, tasks under the innermost frame of each task that awaits them
    (a task awaiting another, a gather, a TaskGroup)."""
    w = tasks(ident, "async_tasks.py")
    ours = dump_tasks(taipan, w.pid).stdout.splitlines()
    assert ours[0].startswith("Process %d (" % w.pid) and ", %d tasks" % len(w.tree) in ours[0], ours[0]
    tool = subprocess.run(["nsenter", "-t", str(w.pid), "-m", "chroot", w.it.root, w.it.path, "-m", "asyncio",
                           "pstree", str(w.pid)], capture_output=True, text=True, timeout=120)
    assert tool.returncode == 0, tool.stdout + tool.stderr
    assert ours[1:] == tool.stdout.splitlines(), "\n".join(ours) + "\n---\n" + tool.stdout
    assert any("(T) tg-worker-1" in line for line in ours), ours


@pytest.mark.parametrize("ident,mode", [(i, "c") for i in (
    "pyenv-3.8", "pyenv-3.9", "pyenv-3.10", "pyenv-3.11", "pyenv-3.12", "pyenv-3.13", "debian-3.11-static",
    "bullseye-3.9", "sid-3.13")] + [(i, "py") for i in (
    "pyenv-3.8", "pyenv-3.10", "pyenv-3.11", "pyenv-3.12", "pyenv-3.13", "sid-3.14", "sid-3.15")])
def test_tree_equals_the_process_own(taipan, tasks, ident, mode):
    """Before 3.14 CPython has no tool to compare with: the process builds
    its own tree from asyncio.all_tasks() once every task waits (each
    task's frames, innermost first, from cr_await, and who awaits whom from
    each task's _fut_waiter: a task, or a gather), and dump --tasks --json
    gives the same tasks, frames and edges. Stripped Debian builds (3.11,
    sid's 3.13) are read with the layouts of the same minor. Mode py: the
    tasks are pure-Python ones (asyncio.tasks._PyTask, from a task factory),
    read through their attributes, on 3.14 and 3.15 too, where CPython's
    own tool does not show them."""
    w = tasks(ident, "async_tasks.py", *(["py"] if mode == "py" else []))
    doc = json.loads(dump_tasks(taipan, w.pid, "--json").stdout)
    assert doc["tasks_error"] is None and doc["cycles"] == [], doc
    by_id = {t["id"]: t["name"] for t in doc["tasks"]}
    ours = {t["name"]: {"stack": t["stack"], "awaited_by": sorted(by_id[i] for i in t["awaited_by"])}
            for t in doc["tasks"]}
    want = {name: {"stack": t["stack"], "awaited_by": sorted(t["awaited_by"])} for name, t in w.tree.items()}
    assert ours == want, json.dumps({"ours": ours, "want": want}, indent=1)
    assert want["awaited-child"]["awaited_by"] == ["awaiter"], want
    # Exactly one task runs nothing (none is stepping: the loop is idle).
    assert not any(t["running"] for t in doc["tasks"]), doc["tasks"]


@pytest.mark.parametrize("ident", ["pyenv-3.12", "sid-3.14"])
def test_await_cycle_is_marked(taipan, tasks, ident):
    """Two tasks awaiting each other: the tree says so once, in a line of
    its own, draws each task of the cycle, and stops where it would loop."""
    w = tasks(ident, "async_hostile.py", "cycle")
    out = dump_tasks(taipan, w.pid).stdout
    assert "[await cycle: cycle-a → cycle-b → cycle-a]" in out or \
        "[await cycle: cycle-b → cycle-a → cycle-b]" in out, out
    assert "[awaits itself: an await cycle]" in out, out
    doc = json.loads(dump_tasks(taipan, w.pid, "--json").stdout)
    names = {t["id"]: t["name"] for t in doc["tasks"]}
    assert [sorted(set(names[i] for i in c)) for c in doc["cycles"]] == [["cycle-a", "cycle-b"]], doc["cycles"]


@pytest.mark.parametrize("ident", ["pyenv-3.12", "sid-3.14"])
def test_hundred_thousand_tasks_are_cut(taipan, tasks, ident):
    """100,000 waiting tasks: 65,536 are listed, the list says it was cut,
    and the read ends (bounded reads, no quadratic step)."""
    w = tasks(ident, "async_hostile.py", "many")
    t0 = time.time()
    res = dump_tasks(taipan, w.pid)
    took = time.time() - t0
    head = res.stdout.splitlines()[:2]
    assert head[0].endswith(", 65536 tasks"), head
    assert head[1] == "[task list cut: more than 65536 tasks, or a list that loops]", head
    # The main task and 65,535 of the sleepers.
    assert res.stdout.count("(T) ") == 65536 and res.stdout.count("(T) many-") >= 65535, res.stdout[:300]
    print("100,000 tasks (%s): dump --tasks took %.1f s" % (ident, took))


def test_refusals_are_one_clear_line(taipan, tasks):
    """No asyncio imported, or a free-threaded build before 3.14: a
    sentence, exit status 1."""
    w = tasks("pyenv-3.12", "async_hostile.py", "none")
    res = run_taipan(taipan, ["dump", "-p", w.pid, "--tasks"])
    assert res.returncode == 1 and "has not imported asyncio" in res.stderr, res.stderr
    if shutil.which("unshare"):
        w = tasks("sid-3.13t", "async_hostile.py", "cycle")
        res = run_taipan(taipan, ["dump", "-p", w.pid, "--tasks"])
        assert res.returncode == 1 and "free-threaded" in res.stderr, res.stderr


@pytest.mark.parametrize("ident,mode", [(i, "c") for i in (
    "pyenv-3.8", "pyenv-3.9", "pyenv-3.10", "bullseye-3.9", "pyenv-3.11", "debian-3.11-static", "pyenv-3.12",
    "pyenv-3.13", "sid-3.14", "sid-3.15")] + [(i, "py") for i in ("pyenv-3.9", "pyenv-3.12", "sid-3.14")])
def test_record_async_samples_carry_their_task(taipan, tasks, ident, mode, tmp_path):
    """record --async: each sample in a coroutine that a task runs has, just
    above that coroutine's frame, the task and the tasks that await it, the
    outermost first ([task alpha];[task alpha-child];compute;spin), and the
    pprof samples a task label; each task's share of those samples is its
    share of the CPU time it measured itself, within 3 points. Mode py:
    pure-Python tasks (asyncio.tasks._PyTask)."""
    w = tasks(ident, "async_compute.py", *(["py"] if mode == "py" else []))

    def cpu():
        line = w.ask()
        assert line.startswith("cpu "), line
        return json.loads(line[4:])
    before = cpu()
    out = tmp_path / "out.folded"
    record(taipan, out, w.pid, seconds=2, rate=1000, extra=["--async"])
    after = cpu()
    counts, spin, wrong = {}, 0, []
    for line in open(out):
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")
        if not frames[-1].startswith("spin (") and not any(f.startswith("spin (") for f in frames):
            continue
        n = int(n)
        spin += n
        chain = tuple(f[6:-1] for f in frames if f.startswith("[task "))
        at = next((i for i, f in enumerate(frames) if f.startswith("compute (")), -1)
        if chain not in (("alpha", "alpha-child"), ("beta",)) or not frames[at - 1].startswith("[task "):
            wrong.append(stack)
            continue
        counts[chain[-1]] = counts.get(chain[-1], 0) + n
    assert spin >= 100, (spin, counts)
    assert sum(len(s) and 1 for s in wrong) <= 0.02 * spin, wrong[:3]
    used = {k: after[k] - before.get(k, 0) for k in ("alpha-child", "beta")}
    share = counts.get("alpha-child", 0) / (counts.get("alpha-child", 0) + counts.get("beta", 0))
    truth = used["alpha-child"] / (used["alpha-child"] + used["beta"])
    print("%s %s: alpha-child %.1f%% of the task samples, %.1f%% of the tasks' CPU"
          % (ident, mode, 100 * share, 100 * truth))
    assert abs(share - truth) <= 0.03, (share, truth, counts, used)
    # The label, in pprof.
    pb = tmp_path / "out.pb.gz"
    record(taipan, pb, w.pid, seconds=1, rate=200, extra=["--async"])
    assert {"alpha-child", "beta"} <= set(tag_values(go_pprof("-tags", pb), "task")), go_pprof("-tags", pb)


@pytest.mark.parametrize("ident", ["pyenv-3.12", "sid-3.14"])
def test_record_async_reads_tasks_once_for_a_plain_generator(taipan, tasks, ident, tmp_path):
    """record --async where every sample's outermost generator frame is a
    plain generator's, no task's, in a process with 1,000 tasks: the tasks
    are read once, not again at each sample nor every 250 ms, and the
    generator's samples carry no task."""
    w = tasks(ident, "async_hostile.py", "gen")
    out = tmp_path / "out.folded"
    res = record(taipan, out, w.pid, seconds=4, rate=500, extra=["--async", "--stats"])
    churn = [line for line in open(out) if "churn (" in line]
    assert sum(int(line.rsplit(" ", 1)[1]) for line in churn) >= 100, open(out).read()[:2000]
    assert not any("[task " in line for line in churn), churn[:3]
    m = re.search(r"--async: (\d+) reads of the processes' tasks, (\d+) ms in all, (\d+) of them finding none",
                  res.stderr)
    assert m, res.stderr
    print("%s: %s reads of 1,000 tasks in 4 s, %s ms" % (ident, m.group(1), m.group(2)))
    assert int(m.group(1)) == 1 and int(m.group(3)) == 0, res.stderr


@pytest.mark.parametrize("ident", ["pyenv-3.8", "pyenv-3.12", "sid-3.14"])
def test_wall_async_waiting_task_weighs_its_await(taipan, tasks, ident, tmp_path):
    """record --mode wall --async: a task that awaits a 2 s sleep, twice,
    weighs the time it measured in those awaits (within 5%) under its
    await line, below its [task napper] frame and above an [awaiting]
    leaf; the half second it awaits its queue between the naps weighs
    under that line. Before 3.11 too: a waiting task is read from user
    space."""
    w = tasks(ident, "async_wait.py", 2)
    lines = marked_lines(os.path.join(WORKLOADS, "async_wait.py"))
    out = tmp_path / "out.folded"
    with Recording(taipan, ["--stats", "-r", "200", "--mode", "wall", "--async", "--folded-lines",
                            "--folded-threads", "-o", out, "-p", w.pid]) as rec:
        naps, idle = [], []
        for i in range(2):
            if i:
                time.sleep(0.5)  # the time awaited on the queue, measured by the task
            line = w.ask().split()
            assert line[0] == "nap", line
            naps.append(float(line[1]))
            idle.append(float(line[3]))
    err = rec.err
    stacks = [s for s in parse_folded(out) if s.pid == w.pid]
    at = {}
    for s in stacks:
        if s.frames[-1].text != "[awaiting]":
            continue
        chain = [f.text for f in s.frames if f.text.startswith("[task ")]
        napper = [f for f in s.python if f.name == "napper"]
        if chain == ["[task napper]"] and napper:
            at[napper[0].line] = at.get(napper[0].line, 0) + s.count
    weighed = at.get(lines["nap"], 0) / 1e6
    queued = at.get(lines["idle"], 0) / 1e6
    print("%s: the naps took %.3f s by the task's clock, %.3f s under its await line; %.3f s awaiting "
          "its queue between them, %.3f s under that line" % (ident, sum(naps), weighed, idle[1], queued))
    assert abs(weighed - sum(naps)) <= 0.05 * sum(naps), (at, naps, "".join(err)[-2000:])
    # The first wait on the queue began before the recording: the second
    # one whole, and a part of the first.
    assert queued >= 0.95 * idle[1] - 0.01, (at, idle)
    # The spinner's compute is its thread's, running, never awaiting.
    assert not any(s.frames[-1].text == "[awaiting]" and any(f.name == "spin" for f in s.python) for s in stacks)
    m = re.search(r"(\d+) await stacks of waiting tasks weighed", "".join(err))
    assert m and int(m.group(1)) > 0, "".join(err)[-2000:]


def test_wall_async_hundred_thousand_waiting_tasks(taipan, tasks, tmp_path):
    """--mode wall --async over 100,000 waiting tasks: the reads are spaced
    by their cost, and yet each of the 65,536 tasks listed weighs the whole
    recording (from its start, to a last read at the stop)."""
    w = tasks("pyenv-3.12", "async_hostile.py", "many")
    out = tmp_path / "out.folded"
    res = record(taipan, out, w.pid, seconds=3, rate=100, extra=["--mode", "wall", "--async", "--stats"],
                 timeout=120)
    # The main task and the sleepers, or the sleepers alone when the main
    # one is past the cut.
    weights = [int(line.rsplit(" ", 1)[1]) for line in open(out) if "[task " in line]
    m = re.search(r"--async: (\d+) reads of the processes' tasks, (\d+) ms in all, \d+ of them finding none "
                  r"[^;]*; (\d+) await stacks", res.stderr)
    assert m, res.stderr
    print("100,000 tasks, wall: %d stacks of waiting tasks, %d reads in %s ms, %.3f-%.3f s each"
          % (len(weights), int(m.group(1)), m.group(2), min(weights) / 1e6, max(weights) / 1e6))
    assert len(weights) == 65536, len(weights)
    assert 2.9e6 <= min(weights) and max(weights) <= 3.3e6, (min(weights), max(weights))
    # A read of them takes a second or more: far fewer than one a period.
    assert int(m.group(1)) <= 4, res.stderr


def test_agent_async_serves_the_task_label(taipan, tasks, agents, tmp_path):
    """agent --async (every Python process of the host): the pprof it serves
    has the task label, and the [task NAME] frames above the coroutines, as
    record's does."""
    w = tasks("pyenv-3.12", "async_compute.py")
    a = agents("--async", window=1)
    pb = a.fetch("/debug/pprof/profile?seconds=2", tmp_path / "a.pb.gz")
    assert {"alpha-child", "beta"} <= set(tag_values(go_pprof("-tags", pb), "task")), go_pprof("-tags", pb)
    top = go_pprof("-top", "-show_from", r"^\[task alpha\]$", pb)
    assert "[task alpha-child]" in top and "compute" in top, top
