"""Builds N small objects (argv[1], default 2,000,000), spins briefly, and
exits: the interpreter then frees them all while finalizing, with no Python
frame on the main thread's stack."""
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000000
CPU = getattr(time, "process_time", None) or time.clock  # 2.7: time.clock is CPU time

keep = [[i] for i in range(N)]  # freed at exit, module by module
end = CPU() + 0.2
while CPU() < end:  # LINE:spin
    pass
