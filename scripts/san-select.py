#!/usr/bin/env python3
"""Which functional tests the sanitizer pass runs: the fewest that reach every
line of taipan's C that the whole suite reaches.

Reads one coverage run of the functional suite (make san-select): under
RUNS, a directory per test holding its id (file "nodeid") and the gcov data
of every taipan it ran (GCOV_PREFIX, set by conftest.py), with the build's
.gcno files under BUILD. Each test's lines are those of src/ with a count.
Then a greedy weighted set cover: take the test with the most lines not yet
reached per second it took (durations from the run's JUnit XML), until no
test adds a line. Writes tests/functional/san-tests.txt's text to stdout:
"+ ID" for a test to run under the sanitizers (with the lines it adds),
"- ID" for one whose every line a "+" test reaches.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET


def gcov_lines(gcdas, root):
    """{(file, line)} with a count, of src/ files, from these .gcda files."""
    lines = set()
    if not gcdas:
        return lines
    out = subprocess.run(["gcov", "-j", "-t"] + gcdas, cwd=root, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    dec = json.JSONDecoder()
    i = 0
    while True:
        while i < len(out) and out[i].isspace():
            i += 1
        if i >= len(out):
            break
        doc, i = dec.raw_decode(out, i)
        for f in doc.get("files", []):
            name = f["file"]
            if not name.startswith("src/"):
                continue
            for ln in f["lines"]:
                if ln["count"] > 0:
                    lines.add((name, ln["line_number"]))
    return lines


def test_lines(run, build, root):
    """The lines one test's taipan processes reached."""
    build = os.path.abspath(build)
    gcdas = []
    for d, _, files in os.walk(run):
        for f in files:
            if not f.endswith(".gcda"):
                continue
            gcda = os.path.join(d, f)
            orig = gcda[len(run):]  # the path the build wrote it for
            gcno = orig[:-len(".gcda")] + ".gcno"
            if not orig.startswith(build + "/") or not os.path.exists(gcno):
                continue
            link = gcda[:-len(".gcda")] + ".gcno"
            if not os.path.exists(link):
                os.symlink(gcno, link)
            gcdas.append(gcda)
    return gcov_lines(sorted(gcdas), root)


def durations(junit):
    """{test id: seconds} from pytest's JUnit XML."""
    times = {}
    if not junit or not os.path.exists(junit):
        return times
    for case in ET.parse(junit).getroot().iter("testcase"):
        path = case.get("classname", "").replace(".", "/")
        name = case.get("name", "")
        # classname "tests.functional.test_x" -> "tests/functional/test_x.py"
        times["%s.py::%s" % (path, name)] = float(case.get("time", "0") or 0)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True, help="the coverage run: a directory per test")
    ap.add_argument("--build", required=True, help="the coverage build (build/cov)")
    ap.add_argument("--junit", help="the run's JUnit XML, for the tests' durations")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    times = durations(args.junit)

    reach = {}
    runs = sorted(os.listdir(args.runs))
    for k, name in enumerate(runs, 1):
        run = os.path.join(args.runs, name)
        try:
            nodeid = open(os.path.join(run, "nodeid")).read().strip()
        except OSError:
            continue
        reach[nodeid] = test_lines(os.path.abspath(run), args.build, root)
        if k % 50 == 0 or k == len(runs):
            print("san-select: %d/%d tests read" % (k, len(runs)), file=sys.stderr)

    everything = set().union(*reach.values()) if reach else set()
    chosen, adds, covered = [], {}, set()
    left = dict(reach)
    while True:
        best, best_score, best_new = None, 0.0, set()
        for nodeid, lines in left.items():
            new = lines - covered
            if not new:
                continue
            score = len(new) / max(times.get(nodeid, 2.0), 0.1)
            if score > best_score or (score == best_score and best and nodeid < best):
                best, best_score, best_new = nodeid, score, new
        if not best:
            break
        chosen.append(best)
        adds[best] = len(best_new)
        covered |= best_new
        del left[best]

    run_time = sum(times.get(t, 0) for t in chosen)
    all_time = sum(times.get(t, 0) for t in reach)
    print("# The functional tests the sanitizer pass runs (+) and leaves out (-):")
    print("# written by make san-select (scripts/san-select.py) from one coverage run")
    print("# of the whole suite. A \"+\" test reaches lines of src/ no test before it")
    print("# in the greedy order did (the count); every line a \"-\" test reaches, a")
    print("# \"+\" test reaches too. Tests not listed run; see conftest.py.")
    print("# %s: %d tests analysed, %d lines of src/ reached; %d tests kept, "
          "%.0f s of %.0f s in the coverage run." % (datetime.date.today().isoformat(), len(reach),
                                                    len(everything), len(chosen), run_time, all_time))
    keep = set(chosen)
    for nodeid in sorted(reach):
        if nodeid in keep:
            print("+ %s  %d lines" % (nodeid, adds[nodeid]))
        else:
            print("- %s" % nodeid)


if __name__ == "__main__":
    main()
