"""The bench scripts run, each in its smallest mode: they read backend internals (a program's checked sizes, its
context, the tiers' counters), so a change there can leave a bench broken with every unit test passing:
`CheckedSizes` grew a third value and `bench/launch.py --device OPENCL` failed with a ValueError until a benchmark run
found it. The figures are not checked (speed is never asserted in tests), only that each script finishes and prints
its table. bench/run.py has its own tests (test_bench_*.py); bench/opencl_narrow.py (~40 s of PoCL builds) and
bench/ray.py (a Ray cluster) are left to their runs."""

from __future__ import annotations

import os
import shutil
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
    elif shutil.which("g++") is None and shutil.which("clang++") is None and not os.environ.get("CXX"):
        pytest.skip("no host C++ compiler for the fake CUDA driver's kernels (plugins/cuda/tests/cuda_host_emu.py)")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "launch.py"), "--quick", *args], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "execute (alternating) above the driver" in out.stdout, out.stdout


SCRIPTS = [
    (["lowering_cost.py", "--runs", "1"], "matmul"),
    (["upgrade_stall.py", "--mode", "thread", "--steps", "200"], "launches"),
    (["warm_compile.py", "--runs", "1"], "warm cache, new process"),
    (["discovery.py", "-n", "1"], "devicekit.devices()"),
    (["launch.py", "--quick"], "execute, same arguments"),
    (["framework_step.py", "--quick", "--peers", ""], "784-512-10, batch 256"),
]


@pytest.mark.parametrize("args, expect", SCRIPTS, ids=[a[0] for a, _ in SCRIPTS])
def test_each_bench_script_runs(tmp_path, args, expect):
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "DEVICEKIT_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", args[0]), *args[1:]], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    assert expect in out.stdout + out.stderr, out.stdout[-3000:]
