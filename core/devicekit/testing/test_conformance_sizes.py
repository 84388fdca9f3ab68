"""Conformance: extreme launch sizes on every device (issue 30.5).

A driver given a bad size does not always say so (PoCL died with SIGILL on 2^32 work-groups and ran nothing, with no
error, for local_size=(0,) or global_size=(-5,)). On every device:
- sizes no device can run (negative, a local size of 0, floats, strings, more than 3 axes) are one `LaunchError`
  naming the size, nothing runs, and the program still works afterwards;
- huge sizes (2^40 groups, 2^32 groups over two axes, a group of 2^20 items) are a `LaunchError` (or another
  ValueError) naming the device's limit, or, on a device whose programs size their own launch (CPU, PYTHON), the right result: never a crash, a hang
  or a silent no-op. They run in a child process, bounded, so a crash fails this check and not the run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.devicekit_conformance

N = 64

BAD = [
    ((-5,), None, r"global_size\[0\] = -5 is below 0"),
    ((N,), (0,), r"local_size\[0\] = 0 is below 1"),
    ((N, -1), (1, 1), r"global_size\[1\] = -1 is below 0"),
    ((2.5,), None, r"global_size\[0\] must be an int"),
    ((N,), (True,), r"local_size\[0\] must be an int"),
    ("64", None, r"global_size(\[0\])? must be"),
    ((1, 1, 1, 1), None, "has 4 axes"),
]


def _fma():
    from devicekit import kernels
    return kernels.elementwise("a * b + 1.0", name="dk_conf_sizes")


@pytest.mark.parametrize("g,lo,limit", BAD, ids=[f"g={g!r},l={lo!r}" for g, lo, _ in BAD])
def test_sizes_no_device_runs_are_one_error(dk_device, g, lo, limit):
    import devicekit as dk
    from devicekit.errors import LaunchError
    prog = dk_device.compile(_fma())
    x = np.arange(N, dtype=np.float32)
    a, b = (dk.Buffer(dk_device, N, dk.dtypes.float32).copyin(x) for _ in range(2))
    out = dk.Buffer(dk_device, N, dk.dtypes.float32).copyin(np.zeros(N, np.float32))
    with pytest.raises(LaunchError, match=limit):
        prog.execute([a, b, out], [N], global_size=g, local_size=lo, wait=True)
    assert not out.numpy().any(), "the launch was refused, yet the kernel ran"
    prog.execute([a, b, out], [N], wait=True)  # the program still works
    np.testing.assert_allclose(out.numpy(), x * x + 1, rtol=1e-6)


HUGE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import devicekit as dk
    from devicekit import kernels
    try:
        dev = dk.device(sys.argv[1])
    except dk.DeviceKitError as e:  # a device made in-process only (a fake)
        print(json.dumps({"unavailable": str(e)}), flush=True)
        sys.exit(0)
    prog = dev.compile(kernels.elementwise("a * b + 1.0", name="dk_conf_sizes"))
    x = np.arange(64, dtype=np.float32)
    cases = [((1 << 40,), None), ((65536, 65536), (1, 1)), ((1 << 62,), (1024,)), ((1,), (1 << 20,)),
             ((1,), (1 << 16, 1 << 16))]
    out = []
    for g, lo in cases:
        bufs = [dk.Buffer(dev, 64, dk.dtypes.float32).copyin(x) for _ in range(2)]
        bufs.append(dk.Buffer(dev, 64, dk.dtypes.float32).copyin(np.zeros(64, np.float32)))
        try:
            prog.execute(bufs, [64], global_size=g, local_size=lo, wait=True)
            right = bool(np.allclose(bufs[2].numpy(), x * x + 1, rtol=1e-6))
            out.append({"case": repr((g, lo)), "ran": True, "right": right})
        except ValueError as e:  # LaunchError is one
            out.append({"case": repr((g, lo)), "error": f"{type(e).__name__}: {e}"})
    print(json.dumps(out), flush=True)
""")


def test_huge_sizes_are_refused_or_run_right(dk_device):
    try:
        r = subprocess.run([sys.executable, "-c", HUGE, str(dk_device.spec)], capture_output=True, text=True,
                           timeout=180, env=dict(os.environ), check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{dk_device.spec}: a launch with a huge size still ran 180 s later (not refused)")
    assert r.returncode == 0, (f"{dk_device.spec}: a launch with a huge size ended the process (exit "
                               f"{r.returncode}): {r.stderr[-2000:]}")
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    if "unavailable" in rows:
        pytest.skip(f"{dk_device.spec} cannot be made in a fresh process: {rows['unavailable']}")
    for row in rows:
        if "error" in row:
            assert re.search(r"exceeds|at most|limit", row["error"]), row  # names the limit
        else:
            assert row["right"], f"{dk_device.spec}: {row['case']} ran without error and gave a wrong result"
