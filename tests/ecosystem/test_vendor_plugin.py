"""examples/vendor_plugin (devicekit-acme) as a vendor ships it: it builds as a wheel whose entry point names the
light plugin module; ACME's own renderer, compiler flags, allocator and runtime are what the device uses; the
environment knobs work; a machine without a C compiler gets the reason."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from .conftest import ROOT


def test_builds_a_wheel_with_the_entry_point(tmp_path):
    src = tmp_path / "vendor_plugin"  # a copy: the build's build/ and .egg-info stay out of the source tree
    shutil.copytree(ROOT / "examples" / "vendor_plugin", src,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "dist", "*.egg-info"))
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                        "-w", str(tmp_path), str(src)], capture_output=True, text=True, timeout=300, check=False,
                       cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    (whl,) = tmp_path.glob("devicekit_acme-*.whl")
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        eps = z.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "[devicekit]\nacme = devicekit_acme.plugin" in eps
    assert {"devicekit_acme/plugin.py", "devicekit_acme/renderer.py", "devicekit_acme/runtime.py"} <= set(names)


def test_acme_uses_its_own_parts():
    import devicekit as dk
    from devicekit.kernels import elementwise
    from devicekit_acme.allocator import AcmeAllocator
    from devicekit_acme.compiler import AcmeCompiler
    from devicekit_acme.renderer import AcmeRenderer
    from devicekit_acme.runtime import AcmeProgram

    dev = dk.device("ACME")
    assert isinstance(dev.renderer, AcmeRenderer) and isinstance(dev.compiler, AcmeCompiler)
    assert isinstance(dev.allocator, AcmeAllocator)
    program = dev.compile(elementwise("a + b", name="acme_add"))
    assert isinstance(program, AcmeProgram)
    assert "ACME_KERNEL void dku_acme_add(" in program.spec.src and "/* ACME C dialect v1 */" in program.spec.src
    assert "-DACME_TARGET=1" in dev.compiler.identity() and "-O3" in dev.compiler.identity()
    assert dev.compiler.identity() != dk.device("CPU").compiler.identity()


def test_acme_and_cpu_bytes_never_share_a_cache_entry():
    import devicekit as dk
    from devicekit.kernels import elementwise

    k = elementwise("a - b", name="acme_vs_cpu")
    acme = dk.target("ACME").compiler.compile(dk.target("ACME").renderer.render(k))
    cpu_c = dk.target("CPU").pair("c")
    cpu = cpu_c[1].compile(cpu_c[0].render(k))
    assert acme.spec.device == "ACME" and cpu.spec.device == "CPU"
    assert acme.spec.src != cpu.spec.src


def test_hand_written_acme_c():
    import devicekit as dk
    from devicekit.ir import dtypes

    dev = dk.device("ACME")
    program = dev.program_from_source(
        "ACME_KERNEL void twice(const int *restrict x, int *restrict y, long long n) "
        "{ for (long long i = 0; i < n; i++) y[i] = 2 * x[i]; }", "twice")
    x = dk.Buffer(dev, 5, dtypes.int32).copyin(np.arange(5, dtype=np.int32))
    y = dk.Buffer(dev, 5, dtypes.int32)
    program.execute([x, y], [5], wait=True)
    np.testing.assert_array_equal(y.numpy(), np.arange(5) * 2)


def test_allocator_pads_small_allocations():
    from devicekit_acme.allocator import PAD, AcmeAllocator

    a = AcmeAllocator("ACME")
    h = a.alloc(4)
    assert h.nbytes == 4 and h.ctypes.data % 64 == 0
    assert h.base is not None and h.base.nbytes >= 4 + PAD  # reading 64 bytes from the start stays in the block
    assert a.live_bytes == 4


def _devices(run_py, **env) -> list[dict]:
    p = run_py("-m", "devicekit.cli", "devices", "--json", env=env)
    assert p.returncode == 0, p.stderr
    return [d for d in json.loads(p.stdout) if d["kind"] == "ACME"]


def test_device_count_from_the_environment(run_py):
    assert [d["spec"] for d in _devices(run_py, ACME_DEVICE_COUNT="3")] == ["ACME", "ACME:1", "ACME:2"]
    (none,) = _devices(run_py, ACME_DEVICE_COUNT="0")
    assert not none["available"] and "no devices" in none["reason"]


@pytest.mark.skipif(sys.platform == "win32", reason="PATH handling")
def test_no_compiler_is_a_reason_not_a_crash(run_py, tmp_path):
    (row,) = _devices(run_py, PATH=str(tmp_path), ACME_CC="", CC="")
    assert not row["available"]
    assert "no host C compiler for ACME" in row["reason"]
