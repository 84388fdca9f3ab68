"""kernels.reduce: row and column reductions against numpy on the PYTHON reference and the CPU device at row lengths
around every vector width (ragged tails, one element, no tail), with NaN and inf; its default lanes are one vector
register of the device it is built for (issue 36), and a bad `vec` is refused by name."""

import devicekit as dk
import numpy as np
import pytest
from devicekit import kernels
from devicekit.ir import dtypes
from devicekit.ir.ops import Ops
from devicekit.render.renderer import Capabilities
from kernel_devices import python_or_cpu

NP = {"sum": np.sum, "max": np.max, "prod": np.prod}


@pytest.fixture(params=["PYTHON", "CPU"])
def device(request):
    return python_or_cpu(request.param)


def _caps(regs: int) -> Capabilities:
    return Capabilities(dtypes=frozenset(dtypes.all()), ops=frozenset(), vector_register_bytes=regs)


@pytest.mark.parametrize("n", [1, 2, 7, 15, 16, 17, 31, 32, 33, 101])
@pytest.mark.parametrize("vec", [None, 1, 4, 16])
@pytest.mark.parametrize("op", ["sum", "max", "prod"])
def test_reduce_rows_of_any_length(device, op, vec, n):
    m = 3
    x = np.random.default_rng(n).uniform(0.5, 1.5, (m, n)).astype(np.float32)
    out = dk.run(kernels.reduce(op, vec=vec, device=device), device=device, x=x.reshape(-1), m=m, n=n)["out"]
    np.testing.assert_allclose(out, NP[op](x.astype(np.float64), axis=1), rtol=2e-6)


@pytest.mark.parametrize("op", ["sum", "max"])
def test_reduce_nan_and_inf_rows(device, op):
    """A NaN anywhere in a sum's row makes it NaN, in the vector body or the tail; inf sums to inf; a max's row of
    -inf is -inf, one with +inf is +inf."""
    n = 37
    rows = np.ones((5, n), np.float32)
    rows[0, 3] = np.nan  # in the vector body
    rows[1, n - 1] = np.nan  # in the scalar tail (37 is no multiple of 4, 8 or 16)
    rows[2, 20] = np.inf
    rows[3, :] = -np.inf
    rows[4, n - 2] = -np.inf
    out = dk.run(kernels.reduce(op, device=device), device=device, x=rows.reshape(-1), m=5, n=n)["out"]
    with np.errstate(invalid="ignore"):
        want = NP[op](rows.astype(np.float64), axis=1)
    if op == "max":  # NaN through a max depends on operand order (docs/ir.md): only the rows without one
        np.testing.assert_array_equal(out[2:], want[2:])
    else:
        np.testing.assert_array_equal(out, want)


def test_reduce_columns(device):
    x = np.random.default_rng(1).standard_normal((23, 19)).astype(np.float32)
    out = dk.run(kernels.reduce("sum", axis=0, device=device), device=device, x=x.reshape(-1), m=23, n=19)["out"]
    np.testing.assert_allclose(out, x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)


def test_full_sum_in_two_stages_of_one_program(device):
    """The bench's 16M sum in small: parts rows of n/parts, then the sum of the parts, with one compiled kernel."""
    x = np.random.default_rng(2).standard_normal(64 * 131).astype(np.float32)
    k = kernels.reduce("sum", device=device)
    parts = dk.run(k, device=device, x=x, m=64, n=131)["out"]
    total = dk.run(k, device=device, x=parts, m=1, n=64)["out"]
    np.testing.assert_allclose(total, [x.astype(np.float64).sum()], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("regs, dtype, lanes", [(2048, dtypes.float32, 16), (2048, dtypes.float64, 8),
                                                (512, dtypes.float32, 8), (0, dtypes.float32, 8),
                                                (256, dtypes.float32, 4)])
def test_reduce_lanes_follow_the_device_vector_registers(regs, dtype, lanes):
    """The default step is one vector register of the device the kernel is built for (a sixteenth of the register
    file, at most 64 bytes): 16 float32 on AVX-512's 2 KB, where the fixed 8 filled half a register (issue 36)."""
    k = kernels.reduce("sum", dtype, device=_caps(regs))
    widths = {u.dtype.count for u in k.uops() if u.op is Ops.VECTORIZE and u.dtype.scalar() == dtype}
    assert max(widths) == lanes


def test_library_kernels_are_the_same_on_every_machine():
    """all_kernels() builds the reductions for a device whose register file is unknown: 8 lanes everywhere."""
    k = kernels.all_kernels()["reduce_sum"]()
    assert max(u.dtype.count for u in k.uops() if u.op is Ops.VECTORIZE) == 8


@pytest.mark.parametrize("vec", [0, 17, 2.0, True])
def test_reduce_names_a_bad_vec(vec):
    with pytest.raises(ValueError, match=r"reduce vec must be an int in 1\.\.16"):
        kernels.reduce(vec=vec)
