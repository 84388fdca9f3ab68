"""Two more rows of bench/run.py (issue 36): an MLP forward (inference: weights packed once) and a 5-point Jacobi
sweep over a 2-D grid, built as definition.py's cases are (BenchCase: the kernel, the inputs, the numpy version that
is timed and checked against, the work), at the same profiles ("quick" for tests, "large" for bench/run.py).

- mlp: x (M x 784) -> relu(x @ w1 + b1) (512) -> @ w2 + b2 (10), float32. devicekit: `kernels.pack_b` of each weight
  once before timing (a framework packs a weight once), then the two layers as one `dk.Plan` (what a framework
  replays each step; per-launch `execute` measured 1-6% slower, within the noise): `kernels.mlp_layer(...,
  b_layout="panels", device=dev)` (matmul + bias + relu, fused) and `kernels.matmul(..., bias=True,
  b_layout="panels", device=dev)` (the rows layout for the 10-wide second layer measured the same).
- jacobi: out[i, j] = 0.2 * (a[i, j] + a[i-1, j] + a[i+1, j] + a[i, j-1] + a[i, j+1]) on the interior; out's border
  is a's border, set once when out is made (a sweep writes the interior only, so every version, numpy's included,
  writes into a preallocated out whose border was copied once). devicekit: the obvious 2-D kernel of
  ir.KernelBuilder, one output per (i, j), the optimizer does the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .definition import PROFILES, BenchCase, Prepared, _buffers, _normal, final

__all__ = ["JACOBI_WEIGHT", "MLP_DIMS", "cases", "jacobi_kernel", "jacobi_reference", "mlp_reference"]

MLP_DIMS = (784, 512, 10)  # in, hidden, out: MNIST's MLP
JACOBI_WEIGHT = 0.2
_SIZES = {"quick": (8, 64), "standard": (64, 1024), "large": (256, 4096)}  # profile -> (MLP batch, jacobi side)


# ------------------------------------------------------------------ MLP forward
def mlp_reference(d: dict[str, Any]) -> np.ndarray:
    """numpy's forward (its BLAS), flat."""
    k, h, o = MLP_DIMS
    x, w1, w2 = d["x"].reshape(-1, k), d["w1"].reshape(k, h), d["w2"].reshape(h, o)
    return (np.maximum(x @ w1 + d["b1"], 0) @ w2 + d["b2"]).reshape(-1)


def _mlp_inputs(m: int) -> Callable[[], dict[str, Any]]:
    k, h, o = MLP_DIMS

    def inputs() -> dict[str, Any]:  # weights scaled as an initialised layer's (1/sqrt(fan-in)): outputs O(1)
        return {"x": _normal(20, m * k), "w1": _normal(21, k * h) / np.float32(k ** 0.5), "b1": _normal(22, h),
                "w2": _normal(23, h * o) / np.float32(h ** 0.5), "b2": _normal(24, o)}
    return inputs


def _mlp_layers(m: int, dev: Any = None) -> tuple[Any, Any, Any, Any]:
    """(pack of w1, pack of w2, layer 1, layer 2): the library's kernels as a devicekit user writes the forward."""
    from .. import kernels
    k, h, o = MLP_DIMS
    return (kernels.pack_b(k, h, name="bench_mlp_pack1"), kernels.pack_b(h, o, name="bench_mlp_pack2"),
            kernels.mlp_layer(m, h, k, b_layout="panels", name="bench_mlp_layer1", device=dev),
            kernels.matmul(m, o, h, bias=True, b_layout="panels", name="bench_mlp_layer2", device=dev))


def _mlp_setup(m: int) -> Callable[[Any, dict[str, Any]], Prepared]:
    """Both weights packed once (not timed), then the plan of the two layers timed, the hidden layer on the device."""
    def setup(dev: Any, inputs: dict[str, Any]) -> Prepared:
        from ..memory import Buffer
        from ..plan import Plan
        pack1, pack2, layer1, layer2 = (final(dev.compile(kern)) for kern in _mlp_layers(m, dev))
        p1, _ = _buffers(dev, pack1, {"b": inputs["w1"]})
        p2, _ = _buffers(dev, pack2, {"b": inputs["w2"]})
        pack1.execute(p1, [], wait=True)
        pack2.execute(p2, [], wait=True)
        hidden = Buffer(dev, m * MLP_DIMS[1], layer1.spec.user_params[0].dtype)
        l1, _ = _buffers(dev, layer1, {"a": inputs["x"], "bias": inputs["b1"]}, {"bp": p1[1], "c": hidden})
        l2, _ = _buffers(dev, layer2, {"bias": inputs["b2"]}, {"a": hidden, "bp": p2[1]})

        plan = Plan(dev)
        for program, bufs in ((layer1, l1), (layer2, l2)):
            plan.add(program, **{p.name: b for p, b in zip(program.spec.user_params, bufs)})
        return Prepared(lambda: plan.run(wait=True), l2[3].numpy)
    return setup


def _mlp_case(m: int) -> BenchCase:
    k, h, o = MLP_DIMS
    return BenchCase("mlp", f"{m}x{k}-{h}-{o}", f"MLP fwd {m}x{k}-{h}-{o} f32",
                     lambda: _mlp_layers(m)[2], _mlp_inputs(m), "c", mlp_reference,
                     2.0 * m * (k * h + h * o), "GFLOP/s", rtol=1e-4, atol=1e-4,
                     tinygrad=lambda d: (lambda x, w1, b1, w2, b2: (x @ w1 + b1).relu() @ w2 + b2,
                                         (d["x"].reshape(m, k), d["w1"].reshape(k, h), d["b1"],
                                          d["w2"].reshape(h, o), d["b2"])),
                     setup=_mlp_setup(m))


# ------------------------------------------------------------------ Jacobi 5-point
def jacobi_kernel(n: int):
    """One 5-point Jacobi sweep of an n x n grid, written the obvious way: a 2-D range over the interior, one output
    per (i, j); tiling, vectors and threads are the core optimizer's."""
    from .. import ir
    from ..ir import dtypes
    kb = ir.KernelBuilder("bench_jacobi")
    a = kb.param("a", dtypes.float32, shape=(n, n))
    out = kb.param("out", dtypes.float32, shape=(n, n), writable=True)
    i, j = kb.range(n - 2, "global") + 1, kb.range(n - 2, "global") + 1
    out[i, j] = (a[i, j] + a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1]) * JACOBI_WEIGHT
    return kb.build()


def _jacobi_out(d: dict[str, Any]) -> np.ndarray:
    """The preallocated out of `d`'s grid: a copy of a made once (its border is a's), kept in `d`."""
    if "_out" not in d:
        d["_out"] = d["a"].copy()
    return d["_out"]


def jacobi_reference(d: dict[str, Any]) -> np.ndarray:
    """numpy slicing into the preallocated out: five slices added in the kernel's order, then the weight."""
    a, out = d["a"], _jacobi_out(d)
    np.multiply(a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:], np.float32(JACOBI_WEIGHT),
                out=out[1:-1, 1:-1])
    return out.reshape(-1)


def _jacobi_setup(dev: Any, inputs: dict[str, Any]) -> Prepared:
    """a copied in; out starts as a copy of a (its border), not timed; a launch writes the interior."""
    program = final(dev.compile(jacobi_kernel(inputs["a"].shape[0])))
    bufs, vals = _buffers(dev, program, {"a": inputs["a"], "out": inputs["a"]})
    return Prepared(lambda: program.execute(bufs, vals, wait=True), bufs[1].numpy)


def _jacobi_tinygrad(d: dict[str, Any]) -> tuple[Callable[..., Any], tuple[np.ndarray, ...]]:
    """tinygrad: the interior from five shifted slices, padded back to n x n, plus a's border through a mask."""
    border = np.ones_like(d["a"])
    border[1:-1, 1:-1] = 0

    def sweep(a: Any, mask: Any) -> Any:
        inner = (a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:]) * JACOBI_WEIGHT
        return inner.pad(((1, 1), (1, 1))) + a * mask
    return sweep, (d["a"], border)


def _jacobi_case(n: int) -> BenchCase:
    return BenchCase("jacobi", f"{n}x{n}", f"jacobi 5-point {n}^2 f32", lambda: jacobi_kernel(n),
                     lambda: {"a": np.random.default_rng(25).random((n, n), dtype=np.float32)}, "out",
                     jacobi_reference, 2.0 * 4 * n * n, "GB/s", rtol=1e-5, atol=1e-6, tinygrad=_jacobi_tinygrad,
                     setup=_jacobi_setup)


def cases(profile: str = "large") -> list[BenchCase]:
    """The MLP forward and the Jacobi sweep at `profile`'s sizes (bench/run.py: "large")."""
    if profile not in _SIZES:
        raise ValueError(f"benchmark profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    m, n = _SIZES[profile]
    return [_mlp_case(m), _jacobi_case(n)]
