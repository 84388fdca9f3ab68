"""The devices the library-kernel tests run on: PYTHON always, CPU where its plugin is installed (else the test
skips with the reason)."""

from __future__ import annotations

import devicekit as dk
import pytest


def python_or_cpu(label: str):
    """dk.device(label) for "PYTHON" or "CPU"; a missing CPU plugin skips the test, naming why."""
    if label == "PYTHON":
        return dk.device("PYTHON")
    try:
        return dk.device("CPU")
    except Exception as e:  # noqa: BLE001 - the CPU plugin is optional here
        pytest.skip(f"no CPU device: {e}")
