"""Statements over unrelated global ranges (PolyBench bicg): one index over the spaces' concatenation, each space's
loop clipped to the piece a CPU chunk or a GPU thread owns. Before, the second space ran whole in every CPU chunk, and
GPU renderers made a grid of their cross product (each statement recomputed for every lane of the other)."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.ir.linearize import lower
from devicekit.ir.ops import Ops
from devicekit.targets import Device


def bicg(dt=dtypes.float64):
    k = ir.KernelBuilder("bicg")
    n, m = k.var("n", 1, 4096), k.var("m", 1, 4096)
    a = k.param("A", dt, shape=(n, m))
    r, p = k.param("r", dt, n), k.param("p", dt, m)
    s, q = k.param("s", dt, m, writable=True), k.param("q", dt, n, writable=True)
    j, i = k.range(m, "global"), k.range(n, "reduce")
    s[j] = (r[i] * a[i, j]).sum(i)
    i2, j2 = k.range(n, "global"), k.range(m, "reduce")
    q[i2] = (a[i2, j2] * p[j2]).sum(j2)
    return k.build()


def _device(device: str):
    kind, _, pair = device.partition("/")
    rows = [d for d in dk.devices() if d.kind == kind]
    if not any(d.available for d in rows):
        pytest.skip(f"{kind} is not available here: {rows[0].reason if rows else 'no plugin'}")
    dev = dk.device(kind)
    if pair:
        rr, cc = dev.pair(pair)
        dev = Device(dev.spec, dev.allocator, rr, cc, dev.runtime)
    return dev


@pytest.mark.parametrize("device", ["PYTHON", "CPU/llvm", "CPU/c", "OPENCL"])
@pytest.mark.parametrize("n,m", [(1, 1), (3, 700), (700, 5), (300, 301)])
def test_bicg_matches_numpy(device, n, m):
    dev = _device(device)
    rng = np.random.default_rng(n * m)
    a, r, p = rng.standard_normal((n, m)), rng.standard_normal(n), rng.standard_normal(m)
    out = dk.run(bicg(), dev, A=a, r=r, p=p, n=n, m=m)
    np.testing.assert_allclose(out["s"], r @ a, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out["q"], a @ p, rtol=1e-10, atol=1e-10)


def test_the_split_covers_both_spaces_and_no_loop_is_nested():
    lk = lower(bicg(), dk.device("CPU").renderer.capabilities)
    assert lk.core_split is not None and lk.core_split.op is Ops.ADD  # n + m
    depth, outer = 0, []
    for u in lk.uops:
        if u.op is Ops.RANGE:
            if depth == 0:
                outer.append(u)
            depth += 1
        elif u.op is Ops.ENDRANGE:
            depth -= 1
    assert len(outer) == 2 and all(len(r.src) == 2 for r in outer)


def four_spaces():
    """Four unrelated spaces (GPU grids have three axes: the fourth used to be lost), constant and symbolic ends."""
    k = ir.KernelBuilder("four")
    n, m = k.var("n", 1, 4096), k.var("m", 1, 4096)
    x = k.param("x", dtypes.int32, n)
    outs = [k.param(f"o{t}", dtypes.int32, e, writable=True) for t, e in enumerate((n, 7, m, 300))]
    for t, (o, e) in enumerate(zip(outs, (n, 7, m, 300))):
        g = k.range(e, "global")
        o[g] = x[g % n] * (t + 1) + g.cast(dtypes.int32)
    return k.build()


@pytest.mark.parametrize("device", ["PYTHON", "CPU/llvm", "OPENCL"])
def test_four_spaces_each_element_once(device):
    dev = _device(device)
    n, m = 5, 513
    x = np.arange(n, dtype=np.int32) * 10
    out = dk.run(four_spaces(), dev, x=x, n=n, m=m)
    for t, e in enumerate((n, 7, m, 300)):
        g = np.arange(e)
        np.testing.assert_array_equal(out[f"o{t}"], x[g % n] * (t + 1) + g, err_msg=f"o{t}")


@pytest.mark.parametrize("kind", ["CUDA", "OPENCL", "METAL"])
def test_gpu_grid_is_the_concatenation_not_the_product(kind):
    """One 1-D grid of ceil((n + m) / 256) blocks: the launch runs n + m threads for bicg, not n * m."""
    spec = dk.target(kind).renderer.render(bicg(dtypes.float32))  # Metal has no float64
    assert len(spec.global_size) == 1 and len(spec.local_size) == 1, (spec.global_size, spec.local_size)
    g, _ = spec.launch_dims({"n": 700, "m": 5})
    assert g[0] * spec.local_size[0] == 768  # 705 threads rounded up to whole blocks
