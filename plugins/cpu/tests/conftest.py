"""Fixtures for the CPU plugin tests: real llvmlite, real cc, no mocks."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit.targets import Device

PAIRS = ("llvm", "c")


@pytest.fixture(scope="session")
def cpu():
    return dk.device("CPU")


@pytest.fixture(scope="session")
def single_pair(cpu):
    """pair name -> a Device with only that pair (so dk.run compiles with it)."""
    devs = {}

    def get(name: str) -> Device:
        if name not in devs:
            r, c = cpu.pair(name)
            devs[name] = Device("CPU", cpu.allocator, r, c, cpu.runtime)
        return devs[name]
    return get


@pytest.fixture(scope="session")
def python_ref():
    """Runs a kernel on the PYTHON reference device (skips when the core's reference is not there)."""
    try:
        dev = dk.device("PYTHON")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"PYTHON reference device unavailable: {e}")

    def run(kernel, **named):
        return dk.run(kernel, device=dev, **named)
    return run


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    """Integers and bools exactly; floats within rtol/atol, NaN matching NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


@pytest.fixture(scope="session")
def close():
    return assert_close
