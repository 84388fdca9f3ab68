"""The OPENCL launch keeps its last checked launch sizes (issue 31: ~3 us a launch to check them again): sizes other
than the last launch's are checked again, so a bad size after a good launch is still the LaunchError naming the
limit, and nothing runs."""

from __future__ import annotations

import numpy as np
import pytest

INC = "__kernel void inc_memo(__global int *x) { x[get_global_id(0)] += 1; }"


@pytest.mark.parametrize("g,lo,limit", [
    ((-5,), None, r"global_size\[0\] = -5 is below 0"),
    ((4,), (0,), r"local_size\[0\] = 0 is below 1"),
    ((4,), (1 << 20,), r"local_size\[0\] = 1048576 exceeds OPENCL .* limit of \d+ work-items on axis 0"),
])
def test_a_bad_size_after_a_good_launch_is_still_refused(cl_device, g, lo, limit):
    import devicekit as dk
    from devicekit.errors import LaunchError
    prog = cl_device.program_from_source(INC, "inc_memo", sizes={"x": 64})
    buf = dk.Buffer(cl_device, 64, "int32").copyin(np.zeros(64, np.int32))
    prog.execute([buf], global_size=(64,), wait=True)
    prog.execute([buf], global_size=(64,), wait=True)  # the kept sizes
    with pytest.raises(LaunchError, match=limit):
        prog.execute([buf], global_size=g, local_size=lo, wait=True)
    assert (buf.numpy() == 2).all()  # nothing ran
    prog.execute([buf], global_size=(32,), wait=True)  # other sizes: checked and run
    assert (buf.numpy()[:32] == 3).all() and (buf.numpy()[32:] == 2).all()
