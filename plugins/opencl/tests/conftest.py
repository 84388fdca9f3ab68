"""Fixtures for the OpenCL plugin's tests: they run on a real OpenCL platform (PoCL from the test extra); without one
every test that needs a device skips with the probe's reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# the environment as the session started, before any test could change os.environ: a child process that must behave
# as a user's (the Ctrl-C tests) gets this one, not whatever the tests run before it in this worker left behind
START_ENV = dict(os.environ)


@pytest.fixture
def child_env(tmp_path: Path) -> dict[str, str]:
    """START_ENV without devicekit's and PoCL's device settings, with a private compile cache."""
    e = {k: v for k, v in START_ENV.items() if not k.startswith(("DEVICEKIT_", "POCL_DEVICES"))}
    e["DEVICEKIT_CACHE_DIR"] = str(tmp_path / "dk-cache")
    return e


@pytest.fixture(scope="session")
def cl_device():
    import devicekit as dk
    rows = [d for d in dk.devices() if d.kind == "OPENCL"]
    if not rows or not rows[0].available:
        pytest.skip(f"no OpenCL device here: {rows[0].reason if rows else 'devicekit-opencl is not installed'}")
    return dk.device("OPENCL")


@pytest.fixture
def run_py(tmp_path):
    """run_py(*args, env=...) -> CompletedProcess of `python *args` in the repository root, with a private cache."""
    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        e = {k: v for k, v in os.environ.items() if not k.startswith(("DEVICEKIT_", "POCL_DEVICES"))}
        e["DEVICEKIT_CACHE_DIR"] = str(tmp_path / "dk-cache")
        e.update(env or {})
        return subprocess.run([sys.executable, *args], cwd=ROOT, env=e, capture_output=True, text=True,
                              timeout=timeout, check=False)
    return run
