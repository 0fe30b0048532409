"""numpy on OpenBLAS: matrix products (sgemm/dgemm in OpenBLAS's kernels,
hand-written assembly without CFI), a solve and an FFT, from Python.
Prints 'ready', then runs until killed."""
import sys

import numpy as np

rng = np.random.default_rng(1)
a = rng.standard_normal((384, 384))
b = rng.standard_normal((384, 384)).astype(np.float32)


def work():
    c = a @ a  # LINE:matmul
    d = b @ b
    x = np.linalg.solve(a, c[:, 0])
    f = np.fft.fft(c[0])
    return float(c[0, 0] + d[0, 0] + x[0] + f[0].real)


sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    work()
