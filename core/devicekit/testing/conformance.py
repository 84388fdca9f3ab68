"""Helpers of the conformance kit, usable outside pytest: look up a device's row, run a kernel on a device and on the
PYTHON reference, and compare every writable output within the tolerance of its dtype."""

from __future__ import annotations

from typing import Any

from ..ir.dtypes import DType, dtypes
from ..spec import DeviceSpec
from .random_kernels import ALL_DTYPES, assert_matches

REFERENCE = "PYTHON"


def device_info(spec: DeviceSpec | str):
    """The dk.devices() row of `spec`: its own row when available, else the kind's (unavailable) row."""
    from ..registry import devices

    spec = DeviceSpec.parse(spec)
    infos = devices()
    for d in infos:
        if d.spec == str(spec):
            return d
    for d in infos:
        if d.kind == spec.kind:
            if d.available:  # the kind runs, this index does not exist
                ids = ", ".join(x.spec for x in infos if x.kind == spec.kind)
                from dataclasses import replace
                return replace(d, spec=str(spec), available=False, reason=f"{spec.kind} has only {ids}")
            return d
    raise LookupError(f"no device kind {spec.kind}; known: {', '.join(d.spec for d in infos)}")


def probe_kernel(name: str = "dk_conformance_probe"):
    """The smallest useful kernel (out = a * b + c): the kit compiles it first to learn whether compiling works."""
    from ..kernels import elementwise
    return elementwise("a * b + c", name=name)


def dtype_pool(renderer: Any) -> tuple[DType, ...]:
    """The dtypes of ALL_DTYPES the renderer supports (bool always): what random kernels may use on it."""
    ok = set(getattr(renderer, "supported_dtypes", ALL_DTYPES))
    return tuple(d for d in ALL_DTYPES if d in ok or d == dtypes.bool)


def writable_dtypes(kernel: Any) -> dict[str, DType]:
    return {p.name: p.dtype for p in kernel.params if p.writable}


def check_against_reference(kernel: Any, inputs: dict[str, Any], device: Any, what: str = "",
                            pair: str | int | None = None) -> dict[str, Any]:
    """Run `kernel` on `device` (with compiler pair `pair`) and on PYTHON; assert every writable output matches.
    Returns the device's outputs."""
    import devicekit as dk

    want = dk.run(kernel, REFERENCE, **inputs)  # the device positionally: a param may be named `device`
    dev = dk.device(device) if isinstance(device, (str, DeviceSpec)) else device
    target = dev if pair is None else _PairView(dev, pair)
    got = dk.run(kernel, target, **inputs)
    assert set(got) == set(want), f"{what}: outputs {sorted(got)} != reference {sorted(want)}"
    for name, dt in writable_dtypes(kernel).items():
        assert_matches(got[name], want[name], dt, f"{what or kernel.name}: {name}")
    return got


class _PairView:
    """A device seen through one of its compiler pairs (dk.run compiles with `compile(kernel)`)."""

    def __init__(self, dev: Any, pair: str | int):
        self._dev, self._pair = dev, pair

    def compile(self, kernel: Any, name: str | None = None, pair: Any = None):
        return self._dev.compile(kernel, name=name, pair=self._pair)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dev, name)


def gather_kernel(name: str = "dk_conf_gather", index_dtype: Any = None, **build: Any) -> Any:
    """out[i] = x[idx[i]]: the data-dependent access every run-time bounds check starts from (docs/ir.md, Bounds);
    `build` goes to `KernelBuilder.build` (checked=False turns the check off)."""
    from devicekit import ir
    k = ir.KernelBuilder(name)
    n, m = k.var("n", 1, 1 << 20), k.var("m", 1, 1 << 20)
    x, idx = k.param("x", dtypes.float32, m), k.param("idx", index_dtype or dtypes.int64, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[idx[i]]
    return k.build(**build)


def wide_kernel(nbuf: int, nvars: int = 0, name: str = "wide") -> Any:
    """b0 = the sum of b1..b(nbuf-1) (plus b1 read at each of `nvars` vars): nbuf buffer params and nvars int vars,
    every access in bounds (no bounds-check record), for a renderer's `max_buffers` / `buffer_slots`."""
    from devicekit import ir
    k = ir.KernelBuilder(name)
    bufs = [k.param(f"b{j}", dtypes.float32, size=4, writable=j == 0) for j in range(nbuf)]
    vs = [k.var(f"v{j}", lo=0, hi=3) for j in range(nvars)]
    i = k.range(4, kind="global")
    total = bufs[1][i] if nbuf > 1 else 0.0
    for b in bufs[2:]:
        total = total + b[i]
    for v in vs:
        total = total + bufs[1][v]
    bufs[0][i] = total
    return k.build()
