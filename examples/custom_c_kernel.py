"""Bring your own kernel: a hand-written C function runs on the CPU device through `dev.program_from_source`.
devicekit reads the signature with libclang: pointers are buffers (`const` ones read-only), integers are int vars.

    .venv/bin/python examples/custom_c_kernel.py
"""

import sys

import devicekit as dk
import numpy as np
from devicekit.ir import dtypes

SRC = r"""
#include <math.h>

/* y = leaky_relu(x) * scale, elementwise over n values; also counts the negatives */
void leaky_relu(const float *restrict x, float *restrict y, int *restrict negatives, long long n) {
    int neg = 0;
    for (long long i = 0; i < n; i++) {
        float v = x[i];
        if (v < 0.0f) { v *= 0.01f; neg++; }
        y[i] = v;
    }
    negatives[0] = neg;
}
"""


def main() -> int:
    dev = dk.device("CPU")
    program = dev.program_from_source(SRC, "leaky_relu")
    sig = ", ".join(f"{p.name}: {p.dtype.name}{'' if p.writable else ' (read-only)'}" for p in program.spec.params)
    print(f"read from C: leaky_relu({sig}; vars {', '.join(v.name for v in program.spec.vars)})")

    n = 1000
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    bx = dk.Buffer(dev, n, dtypes.float32).copyin(x)
    by = dk.Buffer(dev, n, dtypes.float32)
    bneg = dk.Buffer(dev, 1, dtypes.int32)
    program.execute([bx, by, bneg], [n], wait=True)

    want = np.where(x < 0, x * np.float32(0.01), x)
    ok = np.allclose(by.numpy(), want) and int(bneg.numpy()[0]) == int((x < 0).sum())
    print(f"leaky_relu on {n} values: {int(bneg.numpy()[0])} negatives, {'matches numpy' if ok else 'MISMATCH'}")

    try:  # a broken kernel is a CompileError that points at the line
        dev.program_from_source("void broken(float *x) { x[0] = ; }", "broken")
    except dk.CompileError as e:
        print(f"a broken kernel is reported: {str(e).splitlines()[0]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
