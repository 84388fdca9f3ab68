"""Shaped params (`shape=`, `A[i, j]`) and boundary loads (`x.get(i - 1)`), against numpy on PYTHON and CPU."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.ir.linearize import lower

DEVICES = ["PYTHON", "CPU"]


def _matmul():
    k = ir.KernelBuilder("mm")
    n, m = k.var("n", 1, 256), k.var("m", 1, 256)
    a = k.param("A", dtypes.float64, shape=(n, m))
    b = k.param("B", dtypes.float64, shape=(m, n))
    c = k.param("C", dtypes.float64, shape=(n, n), writable=True)
    i, j, r = k.range(n, "global"), k.range(n, "global"), k.range(m, "reduce")
    c[i, j] = (a[i, r] * b[r, j]).sum(r)
    return k.build()


def _jacobi_step():
    """One 5-point step with zero boundaries: every neighbour through get()."""
    k = ir.KernelBuilder("jacobi")
    n = k.var("n", 1, 512)
    a = k.param("A", dtypes.float32, shape=(n, n))
    b = k.param("B", dtypes.float32, shape=(n, n), writable=True)
    i, j = k.range(n, "global"), k.range(n, "loop")
    b[i, j] = (a[i, j] + a.get((i - 1, j)) + a.get((i + 1, j)) + a.get((i, j - 1)) + a.get((i, j + 1))) * 0.2
    return k.build()


@pytest.mark.parametrize("device", DEVICES)
def test_shaped_matmul(device):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((3, 5))
    got = dk.run(_matmul(), device, A=a, B=b, n=5, m=3)["C"]
    np.testing.assert_allclose(got.reshape(5, 5), a @ b, rtol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_boundary_loads_through_get(device):
    a = np.random.default_rng(1).standard_normal((6, 6)).astype(np.float32)
    p = np.pad(a, 1)
    want = (p[1:-1, 1:-1] + p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]) * np.float32(0.2)
    got = dk.run(_jacobi_step(), device, A=a, n=6)["B"]
    np.testing.assert_allclose(got.reshape(6, 6), want, rtol=1e-6)


def test_get_needs_no_run_time_check():
    """get()'s gate is the bounds check itself, so the access is not checked again (no cost)."""
    caps = dk.device("CPU").renderer.capabilities
    assert lower(_jacobi_step(), caps).checks is None


def test_a_component_that_leaves_its_dimension_is_refused():
    """A[0, i + 1] stays inside the n*n buffer but leaves dimension 1 (it is A[1, 0] at i = n - 1)."""
    k = ir.KernelBuilder("bad")
    n = k.var("n", 1, 256)
    a = k.param("A", dtypes.float64, shape=(n, n))
    o = k.param("o", dtypes.float64, n, writable=True)
    i = k.range(n, "global")
    o[i] = a[0, i + 1]
    with pytest.raises(ir.KernelError, match=r"index 1 into A reaches 1, dimension 1 has 1 with n=1"):
        k.build()


def test_shape_errors_say_what_to_write():
    k = ir.KernelBuilder("k")
    n = k.var("n", 1, 8)
    flat = k.param("x", dtypes.float32, n)
    a = k.param("A", dtypes.float32, shape=(n, 4))
    with pytest.raises(ir.KernelError, match="needs a param declared with shape="):
        flat[0, 1]
    with pytest.raises(ir.KernelError, match="A has 2 dimensions, indexed with 3"):
        a[0, 1, 2]
    with pytest.raises(TypeError, match="size or shape, not both"):
        k.param("y", dtypes.float32, n, shape=(n,))
    with pytest.raises(TypeError, match="a size \\(or a shape\\) is required"):
        k.param("z", dtypes.float32)
    assert a.shape is not None and len(a.shape) == 2
