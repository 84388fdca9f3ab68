"""devicekit quickstart: build saxpy with the kernel builder, run it on the default device, check it against numpy.

    bash scripts/dev-setup.sh && .venv/bin/python examples/quickstart.py

DEVICEKIT_DEVICE=PYTHON (or CPU, CUDA, ...) picks another device; DEVICEKIT_DEBUG=2 shows what was compiled.
"""

import sys

import devicekit as dk
import numpy as np
from devicekit import ir
from devicekit.ir import dtypes


def saxpy_kernel():
    k = ir.KernelBuilder("saxpy")
    n = k.var("n", lo=1, hi=2**31 - 1)  # int scalar argument
    x = k.param("x", dtypes.float32, size=n)  # read-only global buffers
    y = k.param("y", dtypes.float32, size=n)
    out = k.param("out", dtypes.float32, size=n, writable=True)
    i = k.range(n, kind="global")
    out[i] = x[i] * 2.0 + y[i]  # indexing loads, assignment stores
    return k.build()


def main() -> int:
    n = 100_000
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)

    dev = dk.device()  # DEVICEKIT_DEVICE, else the available device of highest priority
    outs = dk.run(saxpy_kernel(), device=dev, x=x, y=y, n=n)  # `out` omitted: allocated zeroed, sized from n

    expected = x * np.float32(2.0) + y
    err = float(np.max(np.abs(outs["out"] - expected)))
    print(f"device: {dev.spec} (compiler pair {dev.pair_names[0]!r})")
    if dev.fallback_reason:
        print(f"note: {dev.fallback_reason}")
    print(f"saxpy n={n}: max abs error {err:.3g}")
    if err > 1e-5:
        print("MISMATCH against numpy", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
