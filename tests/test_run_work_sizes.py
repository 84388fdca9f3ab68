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


def test_a_generated_kernels_execute_is_the_front_and_still_takes_work_items(ocl):
    """A WorkSizes program (OPENCL) declares that its execute only adds keyword options, so its cached launches
    take the core's generated front (no method frames: the launch cache's hit); a call with `global_work_size=`
    goes through the front to the class's execute, which converts work-items to groups, and a misspelled option is
    the class's TypeError, not swallowed by the front."""
    from devicekit import ir
    from devicekit.ir import dtypes
    k = ir.KernelBuilder("ws_front_fill")
    n = k.var("n", 1, 1 << 20)
    out = k.param("out", dtypes.int32, size=n, writable=True)
    i = k.range(n, "global")
    out[i] = (i * 2).cast(dtypes.int32)
    prog = ocl.compile(k.build())
    buf = dk.Buffer(ocl, 64, "int32")
    prog.execute([buf], [64], wait=True)
    assert "execute" in vars(prog) and getattr(prog.execute, "__name__", "") == "execute", "the front is installed"
    prog.execute([buf], [64], wait=True)
    assert prog._entry([buf], [64]) is not None, "a repeat is the launch cache's"
    buf.copyin(np.zeros(64, np.int32))
    prog.execute([buf], [64], global_work_size=(64,), local_work_size=(64,), wait=True)  # one group of 64
    assert buf.numpy().tolist()[:8] == [0, 2, 4, 6, 8, 10, 12, 14]
    with pytest.raises(TypeError, match="global_wrk_size"):
        prog.execute([buf], [64], global_wrk_size=(64,))
