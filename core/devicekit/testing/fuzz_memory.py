"""Kernels that read what they write: the fuzzer's generator for memory order (docs/ir.md, "Memory order").

Each lane of a global range owns one row of two writable params; a sequence of statements, some inside a `loop`
range (or two), loads row elements before and after storing to them, keeps loaded values across later stores, and
carries values from one iteration to the next through memory (recurrences). Every access stays inside the lane's
row (gated where an offset can leave it), so no lane reads what another writes: every kernel is defined, and any
difference between a device and the reference is a finding. Kernels the verifier refuses (a value that would have
to outlive its loop body) are drawn again with the next sub-seed.

One kernel in three (`local=None`: drawn from the seed) makes z a local array (`k.local`, the lane's row of it,
filled from x first): local arrays follow the same memory-order rules, so its elements are loaded, summed over the
row (a reduction), stored again and read again like a param's (two identical loads or sums around a store once
were one node, reading the stored value twice).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from .. import ir
from ..ir import dtypes
from ..ir.uop import KernelError, UOp
from .random_kernels import RandomKernel

DTYPES = (dtypes.int32, dtypes.float32, dtypes.int64, dtypes.float64)


def memory_kernel(seed: int, pool: tuple = DTYPES, local: bool | None = None) -> RandomKernel:
    """One load/store interleaving kernel (see the module docstring); deterministic in `seed`. `pool`: the dtypes
    it may use (those of DTYPES a device lacks are left out; float32 when none is left). `local`: z a local array
    (None: one seed in three)."""
    pool = tuple(d for d in DTYPES if d in pool) or (dtypes.float32,)
    if local is None:
        local = random.Random(seed * 7919 + 11).random() < 1 / 3
    for sub in range(64):
        try:
            return _draw(seed, sub, pool, local)
        except KernelError:
            continue
    raise RuntimeError(f"fuzz_memory: no kernel the verifier accepts for seed {seed}")  # pragma: no cover


def _draw(seed: int, sub: int, pool: tuple, local: bool = False) -> RandomKernel:
    r = random.Random(seed * 104729 + sub * 7 + 3)
    dt = r.choice(pool)
    width = r.choice([1, 2, 3, 5, 8])
    k = ir.KernelBuilder(f"mo{seed}")
    n = k.var("n", 1, 64)
    size = n * width
    x = k.param("x", dt, size)
    y = k.param("y", dt, size, writable=True)
    z = k.local("z", dt, 64 * width) if local else k.param("z", dt, size, writable=True)
    bufs = [y, z]
    i = k.range(n, "global")
    loops = [k.range(width, "loop") for _ in range(r.choice([0, 1, 1, 2]))]
    row = i * width
    if local:  # a local array starts undefined: the lane's row of it is filled first
        fill = k.range(width, "loop")
        z[row + fill] = x[row + fill] + 1
    pool: list[UOp] = [x[row + r.randrange(width)]]

    def offset(in_loop: UOp | None) -> tuple[UOp, UOp | None]:
        """An element of the lane's row: a constant, the loop index, or the loop index shifted (gated)."""
        if in_loop is None or r.random() < 0.3:
            return row + r.randrange(width), None
        d = r.choice([0, 0, 1, -1, 2])
        j = in_loop + d
        return row + j, ((j >= 0) & (j < width)) if d else None

    def load(buf, in_loop: UOp | None) -> UOp:
        idx, gate = offset(in_loop)
        return buf[idx] if gate is None else buf.load(idx, gate=gate, default=r.choice([0, 1]))

    def value(in_loop: UOp | None) -> UOp:
        a = r.choice(pool)
        for _ in range(r.randint(0, 2)):
            b = r.choice(pool + [load(r.choice(bufs), in_loop), x[offset(in_loop)[0]] if in_loop is None else
                                 x[row + in_loop]])
            op = r.choice(["add", "max", "sub", "inc"])
            a = a + b if op == "add" else ir.maximum(a, b) if op == "max" else a - b if op == "sub" else a + 1
        return a

    for _ in range(r.randint(2, 6)):
        in_loop = r.choice(loops) if loops and r.random() < 0.7 else None
        act = r.random()
        if local and act < 0.25:  # a sum over the lane's row of the local array (read by a reduction), kept or
            red = k.range(width, "reduce")  # stored at once (a sum kept across a store to z is refused: drawn again)
            total = z[row + red].sum(red)
            if r.random() < 0.5:
                pool.append(total)
            else:
                y[row + r.randrange(width)] = total + r.choice(pool)
            continue
        if act < 0.35:
            pool.append(load(r.choice(bufs), in_loop))
            continue
        buf = r.choice(bufs)
        idx, gate = offset(in_loop)
        buf.store(idx, value(in_loop), gate=gate)
    bufs[0][row] = value(None)  # at least one store, outside the loops
    kern = k.build()

    nrng = np.random.default_rng(seed)
    nv = int(nrng.integers(1, 9))
    inputs: dict[str, Any] = {"n": nv}
    for p in ("x", "y", "z") if not local else ("x", "y"):
        vals = nrng.integers(-20, 20, nv * width)
        inputs[p] = vals.astype(dt.np)
    return RandomKernel(kern, inputs, seed)


__all__ = ["memory_kernel"]
