# demo.py - taipan's built-in demo: a small program with a known shape.
# Two threads: one parses and sorts records, one searches for primes. Runs
# for SECONDS (default 5) and exits.
import json
import sys
import threading
import time


def is_prime(n):
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True


def count_primes(deadline):
    n, found = 2, 0
    while time.time() < deadline:
        if is_prime(n):
            found += 1
        n += 1
    return found


class Report(object):
    def __init__(self, rows):
        self.rows = rows

    def encode(self):
        return json.dumps(self.rows)

    def decode(self, text):
        return json.loads(text)

    def rank(self):
        return sorted(self.rows, key=lambda r: (r["score"], r["name"]))


def churn(deadline):
    rows = [{"name": "row%d" % i, "score": (i * 7919) % 1000} for i in range(2000)]
    report = Report(rows)
    while time.time() < deadline:
        report.rows = report.decode(report.encode())
        report.rank()


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    deadline = time.time() + seconds
    worker = threading.Thread(target=count_primes, args=(deadline,), name="primes")
    worker.start()
    churn(deadline)
    worker.join()


if __name__ == "__main__":
    main()
