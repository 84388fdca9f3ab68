"""as_T of a narrow expression that C's promotions widen (fuzz seed 175 on OPENCL): `c ? (short)0 : (short)0` is an
int, so `as_ushort(...)` of it was refused by PoCL ("invalid reinterpretation: sizes of 'ushort' and 'int' must
match"); the renderer casts the operand back to its own type first."""

from __future__ import annotations

import numpy as np
from devicekit import ir
from devicekit.ir import dtypes
from devicekit_opencl.renderer import OpenCLRenderer


def _kernel():
    k = ir.KernelBuilder("bitcast_of_select")
    n = k.var("n", 1, 1 << 20)
    x = k.param("x", dtypes.int16, n)
    o = k.param("out", dtypes.uint16, n, writable=True)
    i = k.range(n, "global")
    o[i] = ir.where(x[i] > 0, x[i], x[i] * 2).bitcast(dtypes.uint16)
    return k.build()


def test_the_operand_of_as_t_is_cast_to_its_own_type():
    src = OpenCLRenderer().render(_kernel()).src
    assert "as_ushort((short)(" in src, src


def test_bitcast_of_a_narrow_select_runs(cl_device):
    import devicekit as dk
    x = np.array([-3, -1, 0, 1, 5, -32768, 32767, 7], dtype=np.int16)
    got = dk.run(_kernel(), device=cl_device, x=x, n=x.size)["out"]
    np.testing.assert_array_equal(got, np.where(x > 0, x, x * np.int16(2)).view(np.uint16))
