#!/usr/bin/env python3
"""kernels.matmul's forms against numpy's BLAS at several square sizes, in one process: the default as a user calls
it (`kernels.matmul(s, s, s)`: on a CPU the rows layout that packs b's column blocks into a local array inside the
kernel), pack_b + b_layout="panels" (pack timed), and the panels matmul alone (a weight packed once). Every result
is checked against numpy. The figures behind docs/decisions.md's "Matmul on this backend"; bench/run.py's matmul
rows are the 1024 case.

    python bench/matmul_layouts.py              # 512 1000 1024 2048
    python bench/matmul_layouts.py 256 4096
    DEVICEKIT_CPU_THREADS=1 OPENBLAS_NUM_THREADS=1 python bench/matmul_layouts.py 1024   # one thread each

With DEVICEKIT_CPU_THREADS=1 every time is the process's CPU time (the kernel runs on a pool thread; a shared
machine's other load does not count), else the wall clock. Best of 7 after a warm-up.
"""

from __future__ import annotations

import os
import sys

for _v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # as bench/run.py: numpy's BLAS uses the whole machine
    os.environ.pop(_v, None)

import time

import devicekit_cpu.settings  # noqa: E402,F401 - registers DEVICEKIT_CPU_THREADS
import numpy as np
from devicekit import settings  # noqa: E402

ONE_THREAD = settings.get("DEVICEKIT_CPU_THREADS") == 1
CLOCK = time.process_time if ONE_THREAD else time.perf_counter


def best(fn, reps: int = 7) -> float:
    fn()
    ts = []
    for _ in range(reps):
        t0 = CLOCK()
        fn()
        ts.append(CLOCK() - t0)
    return min(ts)


def main(sizes: list[int]) -> None:
    import devicekit as dk

    dev = dk.device("CPU")
    print(f"load average {os.getloadavg()[0]:.2f}; {dev.compiler.identity().split(' features=')[0]}; "
          f"{'one thread, process CPU time' if ONE_THREAD else 'all threads, wall clock'}")
    print("| size | numpy | default | numpy / default | pack + panels | numpy / (pack + panels) | panels alone | "
          "numpy / panels |")
    print("|---|---|---|---|---|---|---|---|")
    for s in sizes:
        print(one_size(dev, s), flush=True)


def one_size(dev, s: int) -> str:
    """One table row; every result checked against numpy."""
    from devicekit import kernels
    from devicekit.bench.definition import _buffers

    rng = np.random.default_rng(s)
    inputs = {"a": rng.standard_normal(s * s).astype(np.float32), "b": rng.standard_normal(s * s).astype(np.float32)}
    a, b = inputs["a"].reshape(s, s), inputs["b"].reshape(s, s)
    want = a @ b
    t_np = best(lambda: a @ b)
    rows = dev.compile(kernels.matmul(s, s, s))  # as a user calls it: the default device's tiles
    rbufs, _ = _buffers(dev, rows, inputs)
    t_rows = best(lambda: rows.execute(rbufs, [], wait=True))
    pack, mm = dev.compile(kernels.pack_b(s, s)), dev.compile(kernels.matmul(s, s, s, b_layout="panels", device=dev))
    pbufs, _ = _buffers(dev, pack, inputs)
    mbufs, _ = _buffers(dev, mm, inputs, {"bp": pbufs[1]})
    t_pack = best(lambda: pack.execute(pbufs, [], wait=True))
    t_mm = best(lambda: mm.execute(mbufs, [], wait=True))
    for name, buf in (("default", rbufs[-1]), ("panels", mbufs[-1])):
        got = buf.numpy().reshape(s, s)
        assert np.allclose(got, want, rtol=1e-3, atol=1e-3 * s ** 0.5), f"{name} form at {s}: wrong result"
    return (f"| {s} | {t_np * 1e3:.2f} ms | {t_rows * 1e3:.2f} ms | {t_np / t_rows:.2f}x | "
            f"{t_pack * 1e3:.2f} + {t_mm * 1e3:.2f} ms | {t_np / (t_pack + t_mm):.2f}x | {t_mm * 1e3:.2f} ms | "
            f"{t_np / t_mm:.2f}x |")


if __name__ == "__main__":
    main([int(v) for v in sys.argv[1:]] or [512, 1000, 1024, 2048])
