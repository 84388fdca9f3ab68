"""What every PolyBench module shares: calling init/reference with the sizes they take, resident buffers for the
kernels that launch more than once, compute() for a kernel launched once, run() at a PolyBench size, and the
`python -m examples.polybench.NAME` check; each module keeps its kernel, initialisation and reference.

PolyBench's DATA_TYPE is double unless built with DATA_TYPE_IS_FLOAT; here it is the dtype of the arrays a run is
given (`data_type`): `kernel(dt)`/`kernels(dt)` build in it (float64 by default), compute passes the arrays', and
`with_data_type(arrs, dtypes.float32)` gives the float build's inputs (WEBGPU has no float64)."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import devicekit as dk
import numpy as np
from devicekit import ir
from devicekit.ir import dtypes


def call(fn: Callable, **kw: Any) -> Any:
    """`fn` with the keyword arguments it names (a reference takes the arrays and the scalars, some a size)."""
    names = inspect.signature(fn).parameters
    return fn(**{k: v for k, v in kw.items() if k in names})


def arrays(mod: ModuleType, size: str) -> dict[str, np.ndarray]:
    """PolyBench's initialisation of `mod` at `size`."""
    return call(mod.init_arrays, **mod.SIZES[size])


def expected(mod: ModuleType, size: str = "MINI", **scalars: Any) -> dict[str, np.ndarray]:
    """The numpy reference's outputs for `mod` at `size`."""
    return call(mod.reference, **arrays(mod, size), **mod.SIZES[size], **scalars)


def data_type(arrs: dict[str, np.ndarray]) -> ir.DType:
    """A run's DATA_TYPE: float32 when its float arrays are float32 (PolyBench's DATA_TYPE_IS_FLOAT build), else
    float64 (PolyBench's default, double)."""
    floats = {a.dtype for a in arrs.values() if isinstance(a, np.ndarray) and a.dtype.kind == "f"}
    return dtypes.float32 if floats == {np.dtype(np.float32)} else dtypes.float64


def with_data_type(arrs: dict[str, np.ndarray], dt: ir.DType) -> dict[str, np.ndarray]:
    """The arrays in DATA_TYPE `dt`: float arrays converted (rounded once, as PolyBench's float build initialises
    them), int arrays kept, except int8 (nussinov's seq: 0..3) as int32 where `dt` is float32 (the narrow build is
    for targets without 64-bit or 8-bit data: WGSL)."""
    out = {}
    for k, a in arrs.items():
        if a.dtype.kind == "f":
            a = a.astype(dt.np)
        elif a.dtype == np.int8 and dt == dtypes.float32:
            a = a.astype(np.int32)
        out[k] = a
    return out


def as_device(device: Any) -> Any:
    """The Device for `device` (a Device, a name, or None for the default), to compile on and hold Buffers."""
    from devicekit.api import resolve_device
    return resolve_device(device)


def resident(dev: Any, arrs: dict[str, np.ndarray]) -> dict[str, dk.Buffer]:
    """One device Buffer per array (copied in once), for kernels launched in sequence or from a Plan."""
    return {k: dk.Buffer(dev, a.size, a.dtype.name).copyin(np.ascontiguousarray(a)) for k, a in arrs.items()}


def fetch(bufs: dict[str, dk.Buffer], arrs: dict[str, np.ndarray], names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The named Buffers back as arrays of their initial shapes."""
    return {k: bufs[k].numpy().reshape(arrs[k].shape) for k in names}


def ping_pong(device: Any, kernel: Any, arrs: dict[str, np.ndarray], tsteps: int, n: int) -> dict[str, np.ndarray]:
    """The A -> B, B -> A time steps of the stencils (jacobi-1d, jacobi-2d, heat-3d): one Program, 2 * tsteps
    launches in a dk.Plan on resident Buffers; A and B back."""
    dev = as_device(device)
    step = dev.compile(kernel)
    b = resident(dev, arrs)
    plan = dk.Plan(dev)
    for _ in range(tsteps):
        plan.add(step, src=b["A"], dst=b["B"], n=n).add(step, src=b["B"], dst=b["A"], n=n)
    plan.run()
    return fetch(b, arrs, ("A", "B"))


def launch(module: str) -> Callable[..., dict[str, np.ndarray]]:
    """compute(device, arrs, dims, **scalars) of a module whose kernel runs once: dk.run of its kernel() in the
    arrays' DATA_TYPE (`data_type`; a kernel of ints takes none), looked up at call time (bench/polybench.py keeps
    the built kernel while timing), the scalars defaulting to its SCALARS."""
    def compute(device: Any, arrs: dict[str, np.ndarray], dims: dict[str, int], **scalars: Any) \
            -> dict[str, np.ndarray]:
        mod = sys.modules[module]
        kern = call(mod.kernel, dt=data_type(arrs), seq_dt=_seq_dtype(arrs))
        return dk.run(kern, device, **arrs, **dims, **{**getattr(mod, "SCALARS", {}), **scalars})
    return compute


def _seq_dtype(arrs: dict[str, np.ndarray]) -> ir.DType:
    """nussinov's `base` type: char (int8), int32 in the narrow build (`with_data_type`)."""
    seq = arrs.get("seq")
    return dtypes.int32 if seq is not None and seq.dtype == np.int32 else dtypes.int8


def sized(module: str) -> Callable[..., dict[str, np.ndarray]]:
    """run(device=None, size="MINI", **scalars) of a module: its compute on PolyBench's init_arrays at SIZES[size]."""
    def run(device: Any = None, size: str = "MINI", **scalars: Any) -> dict[str, np.ndarray]:
        mod = sys.modules[module]
        return mod.compute(device, call(mod.init_arrays, **mod.SIZES[size]), mod.SIZES[size], **scalars)
    return run


def main(mod: ModuleType) -> None:
    """Run `mod` at MINI on the default device and exit non-zero when an output is off the reference."""
    scalars = getattr(mod, "SCALARS", {})
    got = mod.run(None, "MINI", **scalars)
    want = expected(mod, "MINI", **scalars)
    tol = getattr(mod, "TOL", 1e-12)
    err = max(float(np.max(np.abs(got[k] - w) / (1 + np.abs(w)))) for k, w in want.items())
    name = (mod.__spec__.name if mod.__spec__ else mod.__name__).rsplit(".", 1)[-1]
    print(f"{name} MINI on {dk.device().spec}: max relative error {err:.2e}")
    sys.exit(0 if err <= tol else 1)
