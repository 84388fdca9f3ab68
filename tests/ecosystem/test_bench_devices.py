"""`devicekit bench`'s accelerator columns: the WEBGPU (and OPENCL) column names what it ran on (lavapipe: the host
CPU through Mesa's Vulkan), and without an adapter the table says "WEBGPU: unavailable: <reason>" instead of a
column, never an error."""

from __future__ import annotations

import pytest
from devicekit.bench import devices as bench_devices
from devicekit.registry import devices


def test_webgpu_column_names_its_adapter():
    row = next((d for d in devices() if d.spec == "WEBGPU"), None)
    if row is None or not row.available:
        pytest.skip("no WebGPU adapter here (devicekit-webgpu and Mesa's lavapipe give one)")
    note = bench_devices.column_note("WEBGPU")
    assert note.startswith("WEBGPU: ") and "unavailable" not in note, note
    assert "Vulkan" in note or "Metal" in note or "D3D12" in note, note  # the adapter's backend is named


def test_a_kind_without_its_plugin_is_not_installed():
    assert bench_devices.column_note("WEBGPU", infos=[]) == \
        "WEBGPU: not installed (devicekit-webgpu is not in this environment)"


def test_bench_without_an_adapter_says_why(run_py):
    """No Vulkan driver found (VK_ICD_FILENAMES names none): the table has no WEBGPU column and says why."""
    pytest.importorskip("devicekit_webgpu")
    p = run_py("-m", "devicekit.cli", "bench", "--quick", "--no-numba", "--no-progress-bar",
               env={"VK_ICD_FILENAMES": "/nonexistent/icd.json"}, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "WEBGPU: unavailable: no WebGPU adapter found" in p.stdout, p.stdout[-1500:]
    assert " WEBGPU " not in p.stdout.split("WEBGPU: unavailable")[0]  # no column, no row
