"""What every PolyBench module shares: calling init/reference with the sizes they take, resident buffers for the
kernels that launch more than once, compute() for a kernel launched once, run() at a PolyBench size, and the
`python -m examples.polybench.NAME` check; each module keeps its kernel, initialisation and reference."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import devicekit as dk
import numpy as np


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
    """compute(device, arrs, dims, **scalars) of a module whose kernel runs once: dk.run of its kernel(), looked up
    at call time (bench/polybench.py keeps the built kernel while timing), the scalars defaulting to its SCALARS."""
    def compute(device: Any, arrs: dict[str, np.ndarray], dims: dict[str, int], **scalars: Any) \
            -> dict[str, np.ndarray]:
        mod = sys.modules[module]
        return dk.run(mod.kernel(), device, **arrs, **dims, **{**getattr(mod, "SCALARS", {}), **scalars})
    return compute


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
