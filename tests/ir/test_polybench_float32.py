"""PolyBench's float build (DATA_TYPE_IS_FLOAT) of the 30 IR ports: each kernel in float32 (`with_data_type`: the
arrays in float32, so `kernel(dt)` builds in it; nussinov's int8 seq as int32), on WEBGPU (which has no float64 or
8-bit data; skipped with the reason where no adapter is found, e.g. without Mesa's lavapipe) and on the CPU llvm pair
(so the float build is checked where there is no WebGPU adapter), at MINI, against the numpy reference computed in
float64 from the same float32 inputs.

Tolerance: |got - want| <= TOL32 * (1 + |want|), TOL32 = 2e-5 (about 170 float32 ulps: sums of 20-120 terms and
stencils of 20-40 steps land within 1e-6), where a module names its own TOL32 its recurrence amplifies rounding
(durbin 1e-3, gramschmidt 1e-4; the CPU's float32 build is as far off). The default run checks one kernel of each
shape (QUICK); DEVICEKIT_SLOW=1 all 30. Kernels that cannot run at MINI on a software adapter are in REFUSED with
the reason, and are checked at a size that can."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
from devicekit import settings
from devicekit.errors import DataRangeError
from devicekit.ir import dtypes
from devicekit.testing.devices import device_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: `examples` is importable

from examples.polybench._common import call, data_type, with_data_type

SLOW = settings.get("DEVICEKIT_SLOW")
NAMES = importlib.import_module("examples.polybench").KERNELS
TOL32 = 2e-5
# one of each kind: a launched-once matmul, two launches on resident Buffers, the two own tolerances, a Plan of
# stencil steps, float32 already (deriche), ints with seq narrowed (nussinov), the refused one
QUICK = ("gemm", "atax", "durbin", "gramschmidt", "correlation", "deriche", "nussinov", "jacobi_2d", "floyd_warshall")
# Mesa's llvmpipe/lavapipe stops an invocation's loops after 65,535 iterations (docs/reliability.md): WEBGPU refuses
# such a launch by name (every loop's iterations count). floyd-warshall is one lane of n^3 + n^2 + n iterations
# (219,660 at MINI's n = 60); at n = 32 (33,824) it runs. A GPU adapter has no such limit and runs it at MINI.
REFUSED = {"floyd_warshall": ("loop iterations", {"n": 32})}


def device(label: str):
    try:
        return device_for(label)
    except Exception as e:  # noqa: BLE001 - the kind is not installed or has no adapter here
        pytest.skip(f"{label}: {e}")


def check(mod, dev, dims: dict, label: str) -> None:
    arrs = with_data_type(call(getattr(mod, "test_arrays", mod.init_arrays), **dims), dtypes.float32)
    assert all(a.dtype not in (np.float64, np.int8) for a in arrs.values())
    scalars = getattr(mod, "SCALARS", {})
    got = mod.compute(dev, {k: v.copy() for k, v in arrs.items()}, dims, **scalars)
    wide = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in arrs.items()}
    want = call(mod.reference, **wide, **dims, **scalars)
    tol = getattr(mod, "TOL32", TOL32)
    for out, w in want.items():
        assert got[out].dtype in (np.float32, np.int32), f"{out}: {got[out].dtype}"  # the float build ran
        assert np.any(w != wide.get(out, 0)), f"{out}: the reference left it as it was (a vacuous check)"
        np.testing.assert_allclose(got[out].astype(np.float64), w, rtol=tol, atol=tol,
                                   err_msg=f"{mod.__name__} {out} in float32 on {label}")


@pytest.mark.parametrize("label", ["WEBGPU", "CPU/llvm"])
@pytest.mark.parametrize("name", NAMES if SLOW else QUICK)
def test_float_build_matches_numpy(name, label):
    mod = importlib.import_module(f"examples.polybench.{name}")
    dev = device(label)
    dims = getattr(mod, "TEST_SIZES", mod.SIZES)["MINI"]
    if name in REFUSED and label == "WEBGPU":
        words, smaller = REFUSED[name]
        try:
            check(mod, dev, dims, label)
        except DataRangeError as e:  # the software adapter's limit, named: then a size under it must agree
            assert words in str(e), e
            check(mod, dev, smaller, label)
        return
    check(mod, dev, dims, label)


def test_data_type_follows_the_arrays():
    """float32 arrays build the float32 kernel, anything else PolyBench's double; the default kernel stays float64
    (what bench/polybench.py and test_polybench.py run)."""
    gemm = importlib.import_module("examples.polybench.gemm")
    arrs = gemm.init_arrays(**gemm.SIZES["MINI"])
    assert data_type(arrs) == dtypes.float64 and data_type(with_data_type(arrs, dtypes.float32)) == dtypes.float32
    assert {p.dtype for p in gemm.kernel().params} == {dtypes.float64}
    assert {p.dtype for p in gemm.kernel(dtypes.float32).params} == {dtypes.float32}
    nus = importlib.import_module("examples.polybench.nussinov")
    narrow = with_data_type(nus.init_arrays(8), dtypes.float32)
    assert narrow["seq"].dtype == np.int32 and narrow["table"].dtype == np.int32
    assert with_data_type(nus.init_arrays(8), dtypes.float64)["seq"].dtype == np.int8
