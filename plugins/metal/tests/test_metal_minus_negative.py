"""`x - -2.0` (deep fuzz seed 4's shape) was rendered `(x--2.0)`: C++ and MSL read `--` as a decrement and refuse it.
The renderer parenthesizes a right operand that starts with a sign (cstyle.infix, as the C renderer does)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit_metal.hostcheck import HostKernel, cxx, libclang_available, syntax_check
from devicekit_metal.renderer import MetalRenderer


def _kernel(dt):
    k = ir.KernelBuilder("minus_negative")
    x = k.param("x", dt, 16)
    y = k.param("y", dt, 16, writable=True)
    i = k.range(16, "global")
    y[i] = (x[i] - ir.UOp.const(dt, -2 if dt.is_int else -2.0)) * 3
    return k.build()


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int32])
def test_minus_a_negative_constant_is_not_a_decrement(dt, tmp_path):
    spec = MetalRenderer().render(_kernel(dt))
    assert not re.search(r"--\s*[\d(]", spec.src), spec.src
    if libclang_available() is None:
        assert not syntax_check(spec.src), spec.src
    if cxx() is not None:
        x = np.arange(-8, 8).astype(dt.np)
        y = np.zeros(16, dt.np)
        HostKernel(spec, MetalRenderer(), workdir=str(tmp_path)).run([x, y], [])
        np.testing.assert_array_equal(y, (x - dt.np.type(-2)) * dt.np.type(3))
