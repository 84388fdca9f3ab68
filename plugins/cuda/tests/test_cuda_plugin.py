"""The plugin as devicekit sees it: entry point, light import, availability in words, ahead-of-time target,
visible fallbacks."""

from __future__ import annotations

import os
import subprocess
import sys

import devicekit as dk
import pytest
from devicekit_cuda import arch, driver, probe, toolchain

NO_DRIVER = not driver.state().ok


def _py(code: str, **env) -> subprocess.CompletedProcess:
    e = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=e, timeout=300)


def test_entry_point_is_registered():
    from importlib.metadata import entry_points
    eps = {ep.name: ep.value for ep in entry_points(group="devicekit")}
    assert eps.get("cuda") == "devicekit_cuda.plugin"


def test_plugin_module_is_light():
    code = ("import sys, devicekit as dk; dk.devices(); "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith(('pycuda', 'devicekit_cuda')))))")
    out = _py(code)
    assert out.returncode == 0, out.stderr
    mods = set(out.stdout.split())
    assert "devicekit_cuda.plugin" in mods
    heavy = {"pycuda", "devicekit_cuda.nvrtc", "devicekit_cuda.nvjitlink", "devicekit_cuda.compiler",
             "devicekit_cuda.renderer", "devicekit_cuda.runtime", "devicekit_cuda.allocator", "devicekit_cuda.context"}
    assert not mods & heavy, mods & heavy


def test_import_devicekit_imports_no_cuda():
    out = _py("import sys, devicekit; print(any(m.startswith(('devicekit_cuda', 'pycuda')) for m in sys.modules))")
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.skipif(not NO_DRIVER, reason="this machine has a CUDA driver")
def test_devices_say_why_cuda_cannot_run():
    info = next(d for d in dk.devices() if d.kind == "CUDA")
    assert not info.available
    assert "libcuda" in info.reason and "no NVIDIA driver" in info.reason
    assert "compile path still works" in info.reason and "dk.target('CUDA')" in info.reason
    assert info.plugin == "cuda" and info.distribution == "devicekit-cuda"


@pytest.mark.skipif(not NO_DRIVER, reason="this machine has a CUDA driver")
def test_device_lookup_fails_with_the_reason():
    with pytest.raises(dk.DeviceUnavailableError, match="libcuda"):
        dk.device("CUDA")


def test_probe_reasons(monkeypatch):
    import importlib.util
    monkeypatch.setattr(driver, "state", lambda: driver.DriverState(True, "", 13000, 2, "libcuda.so.1"))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "pycuda" else real(n, *a))
    a = probe.runtime_status()
    assert not a.ok and "pycuda is not installed" in a.reason and "2 device(s)" in a.reason
    monkeypatch.setattr(driver, "state", lambda: driver.DriverState(
        False, "the CUDA driver (libcuda.so.1) is present but cuInit failed: no CUDA-capable device is detected"))
    a = probe.runtime_status()
    assert not a.ok and "no CUDA-capable device" in a.reason and "pycuda is not installed either" in a.reason


def test_target_works_without_gpu():
    t = dk.target("CUDA")
    assert t.pair_names[0] == "nvrtc" and t.fallback_reason is None
    assert type(t.renderer).__name__ == "CUDARenderer"
    assert t.compiler.arch.startswith("sm_")


def test_cli_info_shows_cuda():
    out = subprocess.run([sys.executable, "-m", "devicekit.cli", "info"], check=False, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "CUDA" in out.stdout and "nvrtc" in out.stdout
    if NO_DRIVER:
        assert "libcuda" in out.stdout and "compile path still works" in out.stdout


@pytest.mark.skipif(toolchain.ptxas()[0] is None, reason="no ptxas: the fallback pair cannot be built")
def test_ptxas_fallback_is_visible():
    code = ("import devicekit as dk; t = dk.target('CUDA'); print(t.pair_names); print(t.fallback_reason)")
    out = _py(code, DEVICEKIT_NVJITLINK="none", DEVICEKIT_DEBUG="1")
    assert out.returncode == 0, out.stderr
    assert "['nvrtc-ptxas']" in out.stdout
    assert "nvJitLink not found" in out.stdout
    assert "nvrtc-ptxas" in out.stderr  # DEVICEKIT_DEBUG names the pair used
    info = subprocess.run([sys.executable, "-m", "devicekit.cli", "info"], check=False, capture_output=True, text=True,
                          env={**os.environ, "DEVICEKIT_NVJITLINK": "none"}, timeout=300)
    assert "fallback" in info.stdout and "nvJitLink" in info.stdout


def test_ptxas_version_lowering_is_reported():
    """A ptxas older than NVRTC gets the PTX .version it supports, and the compiler says so (never silently)."""
    from devicekit_cuda import ptxas
    from devicekit_cuda.compiler import CUDACompiler
    if toolchain.ptxas()[0] is None:
        pytest.skip("no ptxas")
    c = CUDACompiler("sm_90", "ptxas")
    c.compile_src('extern "C" __global__ void k(float* a) { a[threadIdx.x] += 1.0f; }')
    ptx_ver = c.to_ptx('extern "C" __global__ void k2(float* a) { a[0] = 1.0f; }').split(b".version ")[1][:3]
    if ptxas.version(c.ptxas_path) and float(ptx_ver) > float(_ptx_isa_of(ptxas.version(c.ptxas_path))):
        assert any("lowered .version" in n for n in c.notes), c.notes


def _ptx_isa_of(release: str) -> str:
    major, minor = (int(x) for x in release.split("."))
    return f"{major - 4}.{minor}" if major >= 12 else "7.8"


@pytest.mark.parametrize("given,want", [("sm_90", "sm_90"), ("90", "sm_90"), ("sm90a", "sm_90a"), ("8.6", "sm_86"),
                                        ("compute_80", "sm_80"), (" SM_100 ", "sm_100")])
def test_arch_normalize(given, want):
    assert arch.normalize(given) == want
    assert arch.virtual(want) == "compute_" + want[3:]
