"""Two threads, the main one and another, each spinning in Python code that
needs no extension module (a build without them runs it). Prints 'ready',
then runs until killed."""
import sys
import threading


def spin():
    while True:
        sum(range(1000))


threading.Thread(target=spin, daemon=True).start()
sys.stdout.write("ready\n")
sys.stdout.flush()
spin()
