"""Conformance: compiled bytes are shared by base device key (two ids of a kind hit one cache entry, in memory and
on disk), and the device works from several threads at once."""

from __future__ import annotations

import copy
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from devicekit import kernels

from .conformance import check_against_reference

pytestmark = pytest.mark.devicekit_conformance


def _compile_with(target, cache, kernel):
    compiler = copy.copy(target.compiler)  # the registry's compiler keeps its process-wide cache
    compiler.cache = cache
    return compiler.compile(target.renderer.render(kernel))


def test_ids_of_one_kind_share_compiled_bytes(dk_spec, dk_compiles, tmp_path):
    import devicekit as dk
    from devicekit.compile import CompileCache
    from devicekit.spec import DeviceSpec

    t0 = dk.target(DeviceSpec(dk_spec.kind, 0))
    try:
        t1 = dk.target(DeviceSpec(dk_spec.kind, 1))
    except dk.DeviceKitError as e:  # a compiler that needs its device present (OpenCL) has no target for a missing id
        pytest.skip(f"{dk_spec.kind}:1 has no compile side here (its compiler needs the device): {e}")
    assert t0 is not t1
    assert t0.base_device_key == t1.base_device_key == dk_spec.kind
    if not t0.compiler.use_cache:
        pytest.skip(f"{dk_spec.kind}: compiler {t0.compiler.name!r} opts out of caching (use_cache = False)")
    kernel = kernels.elementwise("a * b - c", name="dk_conf_share")
    cache = CompileCache(tmp_path, disk=True)
    first, second = _compile_with(t0, cache, kernel), _compile_with(t1, cache, kernel)
    assert first.lib == second.lib
    assert cache.stats["misses"] == 1 and cache.stats["memory_hits"] == 1, cache.stats
    assert cache.info()["entries"] == 1
    fresh = CompileCache(tmp_path, disk=True)  # another process: the disk entry serves it
    assert _compile_with(t1, fresh, kernel).lib == first.lib
    assert fresh.stats["disk_hits"] == 1 and fresh.stats["misses"] == 0, fresh.stats


def test_threads_compile_and_run_different_kernels(dk_device):
    exprs = ["a + b", "a * b", "a - b", "maximum(a, b)", "a * 2.0 + b", "where(a < b, a, b)", "a * a - b",
             "(a + b) * 0.5"]
    barrier = threading.Barrier(len(exprs))

    def job(i: int):
        kernel = kernels.elementwise(exprs[i], inputs=("a", "b"), name=f"dk_conf_thread{i}")
        rng = np.random.default_rng(i)
        n = 200 + 37 * i
        inputs = {"a": rng.standard_normal(n).astype(np.float32), "b": rng.standard_normal(n).astype(np.float32),
                  "n": n}
        barrier.wait(timeout=60)
        for _ in range(3):
            check_against_reference(kernel, inputs, dk_device, f"thread {i}: {exprs[i]}")
        return i

    with ThreadPoolExecutor(len(exprs)) as pool:
        assert sorted(pool.map(job, range(len(exprs)))) == list(range(len(exprs)))


def test_threads_share_one_program(dk_device):
    kernel = kernels.elementwise("a * b + c + 1.0", name="dk_conf_same")
    barrier = threading.Barrier(8)

    def job(_):
        barrier.wait(timeout=60)
        return dk_device.compile(kernel)

    with ThreadPoolExecutor(8) as pool:
        programs = list(pool.map(job, range(8)))
    assert all(p is programs[0] for p in programs), "concurrent compiles of one kernel give one Program"
