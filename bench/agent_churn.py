#!/usr/bin/env python3
"""bench/agent_churn.py - the agent's memory and CPU over a long run with churn.

Runs `taipan agent` (system-wide) while:
  - a new short-lived Python process starts every second (busy 100-300 ms of CPU in
    tests/workloads/short.py), so processes keep arriving and leaving;
  - one steady Python process starts and stops threads all the time (a few
    at once, each busy for a while under its own name, then joined);
  - by default, a local receiver on 127.0.0.1 takes the agent's pushes and a
    scraper asks /debug/pprof/profile?seconds=5 every 30 s, so the push and
    HTTP paths run too (--no-push, --no-scrape to leave them out).

Every --interval seconds it prints the agent's RSS (VmRSS), its CPU use over
the interval (utime + stime, % of one CPU) and counters from /stats; at the
end a summary: RSS first/median/max/last and growth, mean and peak CPU.

Needs root. Prints figures; asserts nothing about them, except that the
agent exits 0 on SIGTERM.

  bench/agent_churn.py --taipan build/taipan --duration 1800
"""
import argparse
import glob
import http.server
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHORT = os.path.join(ROOT, "tests", "workloads", "short.py")
TICK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024

STEADY = r"""
import random, sys, threading, time
rnd = random.Random(7)
stop = time.time() + float(sys.argv[1])

def busy_worker(seconds):
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        n += 1

def idle_worker(seconds):
    time.sleep(seconds)

while time.time() < stop:
    threads = []
    for i in range(rnd.randint(1, 6)):
        fn = busy_worker if i % 2 == 0 else idle_worker
        t = threading.Thread(target=fn, args=(rnd.uniform(0.05, 1.5),), name="w%d" % rnd.randint(0, 999))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    time.sleep(rnd.uniform(0, 0.2))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_python():
    hits = sorted(glob.glob("/root/.pyenv/versions/3.12.*/bin/python3.12"))
    return hits[-1] if hits else "/usr/bin/python3"


def proc_usage(pid):
    """(RSS in MB, CPU seconds so far) of pid."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    with open("/proc/%d/statm" % pid) as f:
        rss_pages = int(f.read().split()[1])
    return rss_pages * PAGE_KB / 1024.0, cpu


class Sink(http.server.BaseHTTPRequestHandler):
    """Takes pushes and says yes."""
    protocol_version = "HTTP/1.1"
    received = 0
    bytes = 0

    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        Sink.received += 1
        Sink.bytes += n
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def stats(url):
    try:
        with urllib.request.urlopen(url + "/stats", timeout=5) as r:
            return json.loads(r.read())
    except OSError:
        return {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--taipan", default=os.path.join(ROOT, "build", "taipan"))
    ap.add_argument("--python", default=default_python(), help="interpreter of the workloads")
    ap.add_argument("--duration", type=float, default=300, help="seconds (default 300)")
    ap.add_argument("--interval", type=float, default=10, help="seconds between samples")
    ap.add_argument("--window", default="15", help="the agent's --window")
    ap.add_argument("--rate", default="100", help="the agent's --rate")
    ap.add_argument("--no-push", action="store_true", help="no receiver, no --push")
    ap.add_argument("--no-scrape", action="store_true", help="no /debug/pprof/profile requests")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("agent_churn.py: needs root (the agent loads BPF)")

    port = free_port()
    url = "http://127.0.0.1:%d" % port
    log = "/tmp/taipan-agent-churn-%d.log" % os.getpid()
    cmd = [args.taipan, "agent", "--listen", "127.0.0.1:%d" % port, "--window", args.window,
           "--rate", args.rate, "--log", log, "--stats"]
    sink = None
    if not args.no_push:
        sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
        threading.Thread(target=sink.serve_forever, daemon=True).start()
        cmd += ["--push", "http://127.0.0.1:%d" % sink.server_address[1], "--app", "churn"]

    steady = subprocess.Popen([args.python, "-c", STEADY, str(args.duration + 30)])
    agent = subprocess.Popen(cmd)
    deadline = time.time() + 30
    while not stats(url):
        if agent.poll() is not None or time.time() > deadline:
            steady.kill()
            sys.exit("agent_churn.py: the agent did not start; see %s" % log)
        time.sleep(0.2)

    stop = threading.Event()
    spawned = [0]

    def churn():
        children = []
        nxt = time.time()
        while not stop.is_set():
            children.append(subprocess.Popen([args.python, SHORT, "%.3f" % (0.1 + (spawned[0] % 5) * 0.05)]))
            spawned[0] += 1
            children = [c for c in children if c.poll() is None]
            nxt += 1.0
            stop.wait(max(0, nxt - time.time()))
        for c in children:
            c.wait()

    scrapes = [0, 0]

    def scrape():
        while not stop.wait(30):
            try:
                with urllib.request.urlopen(url + "/debug/pprof/profile?seconds=5", timeout=30) as r:
                    r.read()
                    scrapes[0] += 1
            except OSError:
                scrapes[1] += 1

    workers = [threading.Thread(target=churn)]
    if not args.no_scrape:
        workers.append(threading.Thread(target=scrape))
    for w in workers:
        w.start()

    print("agent pid %d, %s Hz, %s s windows, push %s, scrape %s, workloads %s" % (
        agent.pid, args.rate, args.window, "off" if args.no_push else "on",
        "off" if args.no_scrape else "on", args.python))
    print("%8s %8s %8s %9s %10s %7s %7s %7s" % ("t(s)", "rss(MB)", "cpu(%)", "cpu(s)", "samples",
                                               "procs", "pushed", "dropped"))
    t0 = time.time()
    rss0, cpu0 = proc_usage(agent.pid)
    rows = []
    last_t, last_cpu = t0, cpu0
    try:
        while time.time() - t0 < args.duration:
            time.sleep(min(args.interval, max(0.1, args.duration - (time.time() - t0))))
            now = time.time()
            rss, cpu = proc_usage(agent.pid)
            pct = 100.0 * (cpu - last_cpu) / (now - last_t)
            last_t, last_cpu = now, cpu
            st = stats(url)
            rows.append((now - t0, rss, pct))
            print("%8.0f %8.1f %8.2f %9.2f %10s %7s %7s %7s" % (
                now - t0, rss, pct, cpu - cpu0, st.get("samples", "?"), st.get("processes_seen", "?"),
                st.get("windows_pushed", "?"), st.get("dropped_windows", "?")), flush=True)
    finally:
        stop.set()
        for w in workers:
            w.join()
        final = stats(url)
        total_cpu = proc_usage(agent.pid)[1] - cpu0
        elapsed = time.time() - t0
        agent.terminate()
        rc = agent.wait(timeout=30)
        steady.kill()
        steady.wait()
        if sink:
            sink.shutdown()

    rss = [r[1] for r in rows] or [rss0]
    cpu = [r[2] for r in rows] or [0]
    print()
    print("summary over %.0f s: %d short-lived processes started, %d scrapes (%d failed)" % (
        elapsed, spawned[0], scrapes[0], scrapes[1]))
    print("  RSS: start %.1f MB, median %.1f, max %.1f, last %.1f MB (growth %+.1f MB)" % (
        rss0, statistics.median(rss), max(rss), rss[-1], rss[-1] - rss0))
    half = rss[len(rss) // 2:]
    if len(half) >= 2:
        print("  RSS over the second half: %.1f -> %.1f MB" % (half[0], half[-1]))
    print("  CPU: mean %.2f%% of one CPU (%.1f s), peak interval %.2f%%" % (
        100.0 * total_cpu / elapsed, total_cpu, max(cpu)))
    print("  agent: %s samples, %s lost, %s processes seen, %s windows, %s pushed, %s push failures, "
          "%s dropped" % (final.get("samples"), final.get("lost_samples"), final.get("processes_seen"),
                          final.get("windows"), final.get("windows_pushed"), final.get("push_failures"),
                          final.get("dropped_windows")))
    if sink:
        print("  receiver: %d pushes, %.1f KB each on average" % (
            Sink.received, Sink.bytes / 1024.0 / max(1, Sink.received)))
    print("  agent exit status on SIGTERM: %d; log: %s" % (rc, log))
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
