"""Messages a newcomer meets (issue 30): a float index names the param and the builder line, as the read-only store
error does; a constant past its float type's range is +-inf without numpy's "overflow encountered in cast"."""

from __future__ import annotations

import warnings

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.ir.uop import KernelError


def _kernel():
    k = ir.KernelBuilder("k")
    x = k.param("x", dtypes.float32, 16)
    y = k.param("y", dtypes.float32, 16, writable=True)
    a = k.param("a", dtypes.float32, shape=(4, 4))
    return k, x, y, a, k.range(16, "global")


@pytest.mark.parametrize("how", ["python float", "float value", "store", "shaped"])
def test_a_float_index_names_the_param_and_the_line(how):
    _k, x, y, a, i = _kernel()
    line = None
    with pytest.raises(KernelError) as e:
        if how == "python float":
            line = _line(); x[1.5]
        elif how == "float value":
            line = _line(); x[x[i]]
        elif how == "store":
            line = _line(); y[2.5] = x[i]
        else:
            line = _line(); a[0, 2.0]
    msg = str(e.value)
    name = {"store": "y", "shaped": "a"}.get(how, "x")
    assert f"into {name} is " in msg and "an index must be an integer" in msg, msg
    assert f"{__file__}:{line}" in msg, msg


def _line() -> int:
    import sys
    return sys._getframe(1).f_lineno


def test_an_overflowing_float_constant_is_inf_without_a_warning():
    k = ir.KernelBuilder("big")
    y = k.param("y", dtypes.float16, 4, writable=True)
    i = k.range(4, "global")
    y[i] = ir.UOp.const(dtypes.float16, 1e6) * (i.cast(dtypes.float16) + 1.0)
    kern = k.build()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "overflow encountered in cast" would fail here
        for dev in ("PYTHON", "CPU"):
            out = dk.run(kern, dev)
            assert np.isinf(out["y"]).all(), dev
