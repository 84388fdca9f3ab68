"""Every example runs as a user runs it (a subprocess of the venv's python) and prints what it promises."""

from __future__ import annotations

import re

import pytest


def _ok(p):
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout


def test_quickstart(run_py):
    out = _ok(run_py("examples/quickstart.py"))
    assert re.search(r"saxpy n=100000: max abs error 0(\.0+)?\b", out), out


def test_discover_devices_runs_on_each_available_device(run_py):
    out = _ok(run_py("examples/discover_devices.py"))
    for spec in ("CPU", "ACME", "ACME:1", "PYTHON"):
        assert re.search(rf"^{re.escape(spec)}\s+ran saxpy n=10000 .* ok$", out, re.MULTILINE), out
    assert "MISMATCH" not in out
    assert re.search(r"^METAL\s+unavailable \(devicekit-metal [\d.]+\): \S", out, re.MULTILINE) or "METAL" not in out
    assert out.rstrip().endswith("default device: CPU")


def test_discover_devices_with_a_plugin_disabled(run_py):
    out = _ok(run_py("examples/discover_devices.py", env={"DEVICEKIT_DISABLE_PLUGINS": "acme"}))
    assert re.search(r"^ACME\s+unavailable \(devicekit-acme [\d.]+\): .*disabled by DEVICEKIT_DISABLE_PLUGINS", out,
                     re.MULTILINE), out


def test_custom_c_kernel(run_py):
    out = _ok(run_py("examples/custom_c_kernel.py"))
    assert "read from C: leaky_relu(x: float32 (read-only), y: float32, negatives: int32; vars n)" in out
    m = re.search(r"leaky_relu on 1000 values: (\d+) negatives, matches numpy", out)
    assert m and 400 < int(m.group(1)) < 600, out
    # the body is the compiler's (cc, or clang where it is installed)
    assert re.search(r"a broken kernel is reported: \S+ rejected the C source \(exit 1\)", out), out


@pytest.mark.parametrize("device", [None, "PYTHON", "ACME"])
def test_mlp_on_the_best_or_a_chosen_device(run_py, device):
    out = _ok(run_py("examples/mlp.py", env={"DEVICEKIT_DEVICE": device} if device else None))
    assert f"device: {device or 'CPU'} " in out
    assert re.search(r"max abs error vs numpy [\d.e-]+: ok$", out, re.MULTILINE), out


def test_mlp_training_through_a_plan(run_py):
    out = _ok(run_py("examples/mlp_train.py", "PYTHON", "CPU"))
    m = re.search(r"numpy loss ([\d.]+) -> ([\d.]+)", out)
    assert m and float(m.group(2)) < float(m.group(1)) / 2, out  # it learns
    for spec in ("PYTHON", "CPU"):
        assert re.search(rf"^{spec}\s+weights after training: max abs difference from numpy \S+ ok$", out,
                         re.MULTILINE), out
