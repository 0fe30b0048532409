# chain.py - a known call chain, busy on known lines:
#   <module> -> main -> Worker.run -> inner (qualname Worker.run.<locals>.inner on 3.11+)
# Usage: python chain.py SECONDS. Prints "ready" once the busy loop runs.
import sys
import time


class Worker(object):
    def run(self, seconds):
        def inner(deadline):
            n = 0
            while time.time() < deadline:  # LINE:loop
                n += 1  # LINE:body
            return n

        sys.stdout.write("ready\n")
        sys.stdout.flush()
        return inner(time.time() + seconds)  # LINE:call-inner


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    Worker().run(seconds)  # LINE:call-run


main()  # LINE:call-main
