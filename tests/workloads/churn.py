# churn.py - starts COUNT short-lived Python processes, RATE per second, each
# busy for 100-300 ms of CPU (short.py), and prints "pid PID" for each as it starts.
# Usage: python churn.py INTERPRETER COUNT RATE. Prints "ready" first.
import random
import subprocess
import sys
import time

interp, count, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
script = __file__.replace("churn.py", "short.py")
rnd = random.Random(4242)
sys.stdout.write("ready\n")
sys.stdout.flush()
children = []
start = time.time()
for i in range(count):
    delay = start + i / rate - time.time()
    if delay > 0:
        time.sleep(delay)
    p = subprocess.Popen([interp, script, "%.3f" % rnd.uniform(0.1, 0.3)])
    children.append(p)
    sys.stdout.write("pid %d\n" % p.pid)
    sys.stdout.flush()
for p in children:
    p.wait()
sys.stdout.write("done\n")
sys.stdout.flush()
