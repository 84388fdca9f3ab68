"""dk.run with a device's own spelling of the launch sizes (issue 33): OpenCL's `global_work_size=` /
`local_work_size=` count work-items, as clEnqueueNDRangeKernel and pyopencl do; Program.__call__ and execute took
them, dk.run refused them ("unexpected argument(s) global_work_size, local_work_size"). Run on the OpenCL platform
here (PoCL without a GPU driver)."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit.errors import LaunchError

COUNT = """__kernel void count(__global const float *a, __global int *hits, int n) {
    atomic_inc(&hits[0]);
    if (get_global_id(0) < n) atomic_inc(&hits[1]);
}"""


@pytest.fixture
def ocl():
    try:
        return dk.device("OPENCL")
    except Exception as e:  # noqa: BLE001 - no OpenCL platform here
        pytest.skip(f"OPENCL: {e}")


def test_dk_run_takes_work_items(ocl):
    prog = ocl.program_from_source(COUNT, "count", sizes={"a": "n", "hits": 2})
    got = dk.run(prog, a=np.ones(64, np.float32), n=64, global_work_size=(64,), local_work_size=(16,))
    assert got["hits"].tolist() == [64, 64]  # 64 work-items: 4 groups of 16, not 64 groups
    got = dk.run(prog, a=np.ones(64, np.float32), n=64, global_size=(4,), local_size=(16,))
    assert got["hits"].tolist() == [64, 64]  # global_size still counts work-groups


def test_dk_run_work_size_errors_are_the_programs(ocl):
    prog = ocl.program_from_source(COUNT, "count", sizes={"a": "n", "hits": 2})
    with pytest.raises(LaunchError, match="not a multiple"):
        dk.run(prog, a=np.ones(64, np.float32), n=64, global_work_size=(60,), local_work_size=(16,))
    with pytest.raises(LaunchError, match="not both"):
        dk.run(prog, a=np.ones(64, np.float32), n=64, global_size=(4,), global_work_size=(64,))
    with pytest.raises(TypeError, match="unexpected argument.*global_wrk_size"):
        dk.run(prog, a=np.ones(64, np.float32), n=64, global_wrk_size=(64,))


def test_a_var_named_like_the_option_is_the_var(ocl):
    src = """__kernel void fill(__global int *out, int global_work_size) {
        out[get_global_id(0)] = global_work_size;
    }"""
    prog = ocl.program_from_source(src, "fill", sizes={"out": 8})
    got = dk.run(prog, global_work_size=7, global_size=(1,), local_size=(8,))
    assert got["out"].tolist() == [7] * 8


def test_other_devices_still_refuse_the_opencl_spelling():
    prog = dk.device("CPU").program_from_source("void k(int n, float *x) { x[0] = n; }", "k", sizes={"x": 1})
    with pytest.raises(TypeError, match="unexpected argument.*global_work_size"):
        dk.run(prog, n=1, global_work_size=(1,))
