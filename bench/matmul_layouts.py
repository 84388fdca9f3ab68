#!/usr/bin/env python3
"""kernels.matmul's two B layouts against numpy's BLAS at several square sizes, in one process: the rows layout
(b as it is) and pack_b + b_layout="panels" (pack timed; the tile sized for this CPU's vector registers). The
figures behind docs/decisions.md's "Matmul on this backend"; bench/run.py's matmul rows are the 1024 case.

    python bench/matmul_layouts.py              # 512 1000 1024 2048
    python bench/matmul_layouts.py 256 4096
"""

from __future__ import annotations

import os
import sys

for _v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # as bench/run.py: numpy's BLAS uses the whole machine
    os.environ.pop(_v, None)

import time

import numpy as np


def main(sizes: list[int]) -> None:
    import devicekit as dk

    dev = dk.device("CPU")
    print(f"load average {os.getloadavg()[0]:.2f}; {dev.compiler.identity().split(' features=')[0]}")
    print("| size | numpy | rows | numpy / rows | pack + panels | numpy / (pack + panels) |")
    print("|---|---|---|---|---|---|")
    for s in sizes:
        print(one_size(dev, s), flush=True)


def one_size(dev, s: int) -> str:
    """One table row: every time the best of 5 launches after a warm-up; both results checked against numpy."""
    from devicekit import kernels
    from devicekit.bench.definition import _buffers, best

    rng = np.random.default_rng(s)
    inputs = {"a": rng.standard_normal(s * s).astype(np.float32), "b": rng.standard_normal(s * s).astype(np.float32)}
    a, b = inputs["a"].reshape(s, s), inputs["b"].reshape(s, s)
    want = a @ b

    def numpy_once() -> float:
        t0 = time.perf_counter()
        a @ b
        return time.perf_counter() - t0

    t_np = best(numpy_once, 5)
    rows = dev.compile(kernels.matmul(s, s, s))
    rbufs, _ = _buffers(dev, rows, inputs)
    t_rows = best(lambda: rows.execute(rbufs, [], wait=True), 5)
    pack, mm = dev.compile(kernels.pack_b(s, s)), dev.compile(kernels.matmul(s, s, s, b_layout="panels", device=dev))
    pbufs, _ = _buffers(dev, pack, inputs)
    mbufs, _ = _buffers(dev, mm, inputs, {"bp": pbufs[1]})
    t_pack = best(lambda: pack.execute(pbufs, [], wait=True), 5)
    t_mm = best(lambda: mm.execute(mbufs, [], wait=True), 5)
    for name, buf in (("rows", rbufs[-1]), ("panels", mbufs[-1])):
        got = buf.numpy().reshape(s, s)
        assert np.allclose(got, want, rtol=1e-3, atol=1e-3 * s ** 0.5), f"{name} layout at {s}: wrong result"
    return (f"| {s} | {t_np * 1e3:.2f} ms | {t_rows * 1e3:.2f} ms | {t_np / t_rows:.2f}x | "
            f"{t_pack * 1e3:.2f} + {t_mm * 1e3:.2f} ms | {t_np / (t_pack + t_mm):.2f}x |")


if __name__ == "__main__":
    main([int(v) for v in sys.argv[1:]] or [512, 1000, 1024, 2048])
