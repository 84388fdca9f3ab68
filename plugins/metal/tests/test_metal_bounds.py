"""Run-time bounds checks in MSL without a Mac: the checked gather renders, passes the syntax check, and run on the
host (hostcheck.HostKernel) guards the access and fills the hidden record the core turns into IndexError."""

from __future__ import annotations

import numpy as np
import pytest
from devicekit import ir
from devicekit.ir.dtypes import dtypes
from devicekit.testing.conformance import gather_kernel
from devicekit_metal.hostcheck import HostKernel, cxx, libclang_available, syntax_check
from devicekit_metal.renderer import MetalRenderer


def _gather(**build) -> ir.Kernel:
    return gather_kernel("gather", dtypes.int32, **build)


def test_checked_gather_renders():
    spec = MetalRenderer().render(_gather())
    assert spec.checks is not None and spec.params[-1].name == "dk_bounds"
    assert "dk_bounds" not in MetalRenderer().render(_gather(checked=False)).src
    if libclang_available() is None:
        assert not syntax_check(spec.src), spec.src


@pytest.mark.skipif(cxx() is None, reason="no C++ compiler for the host emulation")
def test_host_emulation_guards_and_records(tmp_path):
    spec = MetalRenderer().render(_gather())
    x = np.arange(10, dtype=np.float32)
    idx = np.array([1, 2**31 - 1, 3, -1, 9] * 60, dtype=np.int32)
    n = len(idx)
    out, rec = np.zeros(n, np.float32), np.zeros(2, np.int64)
    HostKernel(spec, MetalRenderer(), workdir=str(tmp_path)).run([x, idx, out, rec], [n, 10])
    np.testing.assert_array_equal(out, np.where((idx >= 0) & (idx < 10), x[np.clip(idx, 0, 9)], 0))
    err = spec.checks.error(rec, spec.buffer_sizes({"n": n, "m": 10}), {"n": n, "m": 10})
    assert isinstance(err, IndexError) and str(err).startswith("kernel gather: access to x[")
    assert "[2147483647]" in str(err) or "[-1]" in str(err)
