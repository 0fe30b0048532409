"""JIT code as a JIT makes it: a function written into anonymous executable
memory (push %rbp; mov %rsp, %rbp; call *%rdi; pop %rbp; ret), named in
/tmp/perf-PID.map as perf's convention has it, and called through ctypes
with a Python callback, which spins. Prints 'ready', then loops until
killed."""
import ctypes
import mmap
import os
import sys

CODE = bytes([0x55, 0x48, 0x89, 0xE5, 0xFF, 0xD7, 0x5D, 0xC3])
# Private and anonymous, as JITs map their code (a shared one would show as
# /dev/zero in the process's maps).
mem = mmap.mmap(-1, mmap.PAGESIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
mem.write(CODE)
addr = ctypes.addressof(ctypes.c_char.from_buffer(mem))
with open("/tmp/perf-%d.map" % os.getpid(), "w") as f:
    f.write("%x %x jitted_call\n" % (addr, len(CODE)))
CALLBACK = ctypes.CFUNCTYPE(None)
jitted = ctypes.CFUNCTYPE(None, CALLBACK)(addr)


def spin():
    t = 0
    for i in range(20000):  # LINE:spin
        t += i


callback = CALLBACK(spin)
sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    jitted(callback)  # LINE:jitted
