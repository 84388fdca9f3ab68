"""The loop limiter's count (loops.iterations) for a lane range smaller than its workgroup: only lanes that pass the
guard (`if (i < n)`) run the loops. Before, the last thread of the 256-wide workgroup (i = 255) was counted for
n = 1, so a triangular loop over i (256 x 257 iterations) was refused with "one invocation may run 65536 loop
iterations with {'n': 1}" (fitted WEBGPU fuzz seeds 95189, 95681, 96077, 96173: fuzz_shapes kernels)."""

from __future__ import annotations

import numpy as np
import pytest
from devicekit import ir
from devicekit.ir.accept import as_kernel
from devicekit.ir.dtypes import dtypes
from devicekit.ir.linearize import lower
from devicekit_webgpu.loops import iterations, nest
from devicekit_webgpu.renderer import WGSLRenderer

LIMIT = 65535  # llvmpipe's


def triangle() -> ir.Kernel:
    """out[i, j] = x[i, j] + sum_{r <= i} x[j, r] for j <= i: lane i runs (i + 1) * (i + 2) iterations."""
    k = ir.KernelBuilder("triangle")
    n = k.var("n", 1, 512)
    x = k.param("x", dtypes.int32, shape=(n, n))
    out = k.param("out", dtypes.int32, shape=(n, n), writable=True)
    i = k.range(n, "global")
    j = k.range(i + 1, kind="loop")
    r = k.range(i + 1, kind="reduce")
    out[i, j] = x[i, j] + x[j, r].sum(r)
    return k.build()


@pytest.mark.parametrize(("n", "count"), [(1, 2), (2, 6), (200, 200 * 201), (300, LIMIT + 1)])
def test_only_lanes_inside_the_guard_are_counted(n, count):
    lk = lower(as_kernel(triangle(), "test"), WGSLRenderer().capabilities)
    assert iterations(nest(lk.uops), {"n": n}, LIMIT) == count


@pytest.mark.parametrize("n", [1, 2, 9])
def test_a_triangular_loop_on_a_small_range_runs(wg_device, n):
    import devicekit as dk
    x = np.arange(n * n, dtype=np.int32).reshape(n, n) % 7
    want = dk.run(triangle(), "PYTHON", x=x, n=n)["out"]
    np.testing.assert_array_equal(dk.run(triangle(), wg_device, x=x, n=n)["out"], want)


@pytest.mark.parametrize("seed", [95189, 95681, 96077, 96173])
def test_fitted_fuzz_seeds_run(wg_device, seed):
    from devicekit.testing.fuzz import Runner
    from devicekit.testing.fuzzgen import make_case
    runner = Runner("WEBGPU")
    case = make_case(seed, "mixed", runner.fit_pool())
    assert runner.check_one("WEBGPU/wgsl", case.kernel, case.inputs, runner.reference(case)) is None
