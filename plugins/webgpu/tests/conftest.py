"""Fixtures for the WebGPU plugin's tests: they run on a real WebGPU adapter (on a machine without a GPU, Mesa's
lavapipe: apt-get install mesa-vulkan-drivers, which scripts/dev-setup.sh does as root); without one every test that
needs a device skips with the probe's reason."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def wg_device():
    import devicekit as dk
    rows = [d for d in dk.devices() if d.kind == "WEBGPU"]
    if not rows or not rows[0].available:
        pytest.skip(f"no WebGPU adapter here: {rows[0].reason if rows else 'devicekit-webgpu is not installed'}")
    return dk.device("WEBGPU")
