"""bench/launch.py's other-device paths run: the OPENCL overhead above the driver (PoCL here) and CUDA's on the
plugin tests' fake driver. They read backend internals (a program's checked sizes, its context), so a change there
can leave the bench broken with every unit test passing: `CheckedSizes` grew a third value and `--device OPENCL`
failed with a ValueError until a benchmark run found it."""

from __future__ import annotations

import os
import subprocess
import sys

import devicekit as dk
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("args, kind", [(["--device", "OPENCL"], "OPENCL"), (["--cuda-fake"], "CUDA")])
def test_the_launch_bench_runs_on_other_devices(args, kind):
    if kind == "OPENCL":
        try:
            dk.device("OPENCL")
        except Exception as e:  # noqa: BLE001 - no OpenCL platform here
            pytest.skip(f"OPENCL: {e}")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "launch.py"), "--quick", *args], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=180)
    if kind == "CUDA" and out.returncode != 0 and "NVRTC" in out.stderr and "not" in out.stderr:
        pytest.skip(f"CUDA fake driver: {out.stderr.strip().splitlines()[-1]}")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "execute (alternating) above the driver" in out.stdout, out.stdout
