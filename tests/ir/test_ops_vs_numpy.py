"""The builder's conveniences against numpy, a second oracle: the PYTHON reference defines the IR, so a convenience
built from the wrong ops (`minimum` as -max(-a, -b): min(0u, 5u) came out 5) agrees with it everywhere and only
numpy shows it. Every dtype, its edge values, PYTHON and both CPU pairs."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.testing.devices import device_for

INTS = [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16, dtypes.uint32,
        dtypes.uint64]
FLOATS = [dtypes.float16, dtypes.float32, dtypes.float64]
DEVICES = ["PYTHON", "CPU/llvm", "CPU/c"]



def _edges(dt) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (a, b) over the dtype's edge values: every combination of min, max, -1, 0, 1, 2, 5 (floats: also
    -0.0, a subnormal, large values; no NaN, whose rule is tested apart)."""
    t = dt.np
    if dt.is_float:
        fi = np.finfo(t)
        vals = [-0.0, 0.0, 1.0, -1.0, 2.5, -7.25, float(fi.max), float(-fi.max), float(fi.tiny) / 4, 3e-3, 100.0]
    else:
        ii = np.iinfo(t)
        vals = sorted({ii.min, ii.max, 0, 1, 2, 5, ii.max - 1} | ({-1, ii.min + 1} if ii.min < 0 else set()))
    a, b = np.meshgrid(np.array(vals, dtype=t), np.array(vals, dtype=t))
    return a.ravel(), b.ravel()


def _binary(name, dt, fn):
    k = ir.KernelBuilder(f"{name}_{dt.name}")
    n = k.var("n", 1, 1024)
    a, b = k.param("a", dt, n), k.param("b", dt, n)
    i = k.range(n, "global")
    out_dt, value = fn(a[i], b[i])
    out = k.param("out", out_dt, n, writable=True)
    out[i] = value
    return k.build()


CASES = {  # name -> (kernel body, numpy reference, dtypes)
    "minimum": (lambda a, b: (a.dtype, ir.minimum(a, b)), np.minimum, INTS + FLOATS),
    "maximum": (lambda a, b: (a.dtype, ir.maximum(a, b)), np.maximum, INTS + FLOATS),
    "min_method": (lambda a, b: (a.dtype, a.minimum(b)), np.minimum, INTS + FLOATS),
    "abs": (lambda a, b: (a.dtype, abs(a)), lambda a, b: np.abs(a), INTS + FLOATS),
    "square": (lambda a, b: (a.dtype, a ** 2), lambda a, b: a * a, INTS + FLOATS),
    "cube": (lambda a, b: (a.dtype, a ** 3), lambda a, b: a * a * a, INTS + FLOATS),
    "pow0": (lambda a, b: (a.dtype, a ** 0), lambda a, b: np.ones_like(a), INTS + FLOATS),
    "where_scalars": (lambda a, b: (dtypes.int32, ir.where(a < b, 1, 0)), lambda a, b: (a < b).astype(np.int32),
                      INTS + FLOATS),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_conveniences_match_numpy(case, device):
    body, ref, dts = CASES[case]
    dev = device_for(device)
    with np.errstate(all="ignore"):
        for dt in dts:
            a, b = _edges(dt)
            want = ref(a, b)
            got = dk.run(_binary(case, dt, body), dev, a=a, b=b, n=a.size)["out"]
            if dt.is_float and case == "cube":  # numpy multiplies left to right; squaring may round differently
                np.testing.assert_allclose(got, want, rtol=2 * float(np.finfo(dt.np).eps), err_msg=f"{case} {dt}")
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"{case} {dt}")


@pytest.mark.parametrize("device", DEVICES)
def test_the_nan_rule_of_minimum_and_maximum(device):
    """docs/ir.md: a NaN in the first operand propagates, one in the second does not, for max and for min."""
    dev = device_for(device)
    nan = float("nan")
    a = np.array([nan, 1.0, nan], np.float32)
    b = np.array([1.0, nan, nan], np.float32)
    for name, op in (("max", ir.maximum), ("min", ir.minimum)):
        got = dk.run(_binary(name, dtypes.float32, lambda x, y, op=op: (x.dtype, op(x, y))), dev, a=a, b=b, n=3)
        assert np.isnan(got["out"][0]) and got["out"][1] == 1.0 and np.isnan(got["out"][2]), name


def test_refusals_say_what_to_write():
    k = ir.KernelBuilder("k")
    x = k.param("x", dtypes.int32, 4)
    with pytest.raises(ir.KernelError, match="float exponent"):
        x[0] ** 0.5
    with pytest.raises(ir.KernelError, match="negative exponent"):
        x[0] ** -1
    with pytest.raises(ir.KernelError, match="abs\\(\\) of a bool"):
        abs(x[0] < 1)
    assert ir.where(x[0] < 1, 1.5, 0).dtype == dtypes.float32
    assert ir.where(x[0] < 1, 1, 0, dtype=dtypes.uint8).dtype == dtypes.uint8
