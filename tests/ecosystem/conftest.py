"""Ecosystem tests run the real things a user runs (the conformance kit, the examples, the CLI) as subprocesses of
the test venv, with a private compile cache and no DEVICEKIT_* settings from the caller."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def run_py(tmp_path):
    """run_py(*args, env=..., timeout=...) -> CompletedProcess of `python *args` in the repository root."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        e = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
        e["DEVICEKIT_CACHE_DIR"] = str(tmp_path / "dk-cache")
        e.update(env or {})
        return subprocess.run([sys.executable, *args], cwd=ROOT, env=e, capture_output=True, text=True,
                              timeout=timeout, check=False)

    return run
