"""`x - -2.0` (deep fuzz seed 4's shape) renders as `(x--2.0)` through an infix that pastes its operands: WGSL reads
`--` as a decrement and refuses it. WGSL's constants come parenthesized (`(-2.0f)`), but any right operand that starts
with a sign would: the op table uses cstyle.infix, which parenthesizes it, as the C renderer does."""

from __future__ import annotations

import re

import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.ir.ops import Ops
from devicekit_webgpu.renderer import WGSLRenderer


def _kernel(dt):
    k = ir.KernelBuilder("minus_negative")
    x = k.param("x", dt, 16)
    y = k.param("y", dt, 16, writable=True)
    i = k.range(16, "global")
    y[i] = (x[i] - ir.UOp.const(dt, -2 if dt.is_int else -2.0)) * 3
    return k.build()


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int32])
def test_minus_a_negative_constant_is_not_a_decrement(dt):
    src = WGSLRenderer().render(_kernel(dt)).src
    assert not re.search(r"--\s*[\d(]", src), src


@pytest.mark.parametrize("op,sym", [(Ops.SUB, "-"), (Ops.ADD, "+")])
def test_a_right_operand_with_a_sign_is_parenthesized(op, sym):
    code = WGSLRenderer.code_for_op[op]
    assert code("x", "-2.0f", dtypes.float32) == f"(x{sym}(-2.0f))"
    assert code("x", "y", dtypes.float32) == f"(x{sym}y)"


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int32])
def test_minus_a_negative_constant_runs(dt, wg_device):
    import devicekit as dk
    x = np.arange(-8, 8).astype(dt.np)
    got = dk.run(_kernel(dt), device=wg_device, x=x)["y"]
    np.testing.assert_array_equal(got, (x - dt.np.type(-2)) * dt.np.type(3))
