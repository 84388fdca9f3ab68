"""Compile tiers on the CPU llvm pair: a new kernel without fast-math flags starts on its O0 build and swaps to its
O3 build once it has run enough; both compute the same bits. Real llvmlite, real caches (docs/decisions.md,
"Compile tiers")."""

from __future__ import annotations

import threading
import warnings

import devicekit as dk
import numpy as np
import pytest
from devicekit import kernels
from devicekit.compile.cache import CompileCache
from devicekit.errors import CompileError
from devicekit.targets import Device
from devicekit.testing.fuzz import tier_difference
from devicekit_cpu.llvm_compiler import QUICK_RULE, LLVMCompiler
from devicekit_cpu.runtime import TIER_LAUNCHES, TIER_WORK


def _device(tmp_path, compiler=None, disk=False):
    """A CPU device with the llvm pair and a compile cache of its own (so every kernel here is new to it)."""
    cpu = dk.device("CPU")
    renderer = cpu.pair("llvm")[0]
    compiler = compiler or LLVMCompiler()
    compiler.cache = CompileCache(tmp_path / "cache", disk=disk)
    return Device("CPU", cpu.allocator, renderer, compiler, cpu.runtime)


def _inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    return {x: rng.standard_normal(n).astype(np.float32) for x in "abc"}


def _launch(prog, dev, arrs):
    n = arrs["a"].size
    bufs = [dk.Buffer(dev, n, "float32").copyin(arrs[x]) for x in "abc"] + [dk.Buffer(dev, n, "float32")]
    prog.execute(bufs, [n], wait=True)
    return bufs[3].numpy()


def test_a_new_kernel_starts_quick_and_swaps_before_its_32nd_launch(tmp_path):
    dev = _device(tmp_path)
    prog = dev.compile(kernels.elementwise("a * b + c * 3.0 - 0.25", name="tier_swap"))
    assert prog.tier == "quick"
    assert " O0 " in prog.compiled.compiler_id and QUICK_RULE in prog.compiled.compiler_id
    arrs = _inputs(1000)
    first = _launch(prog, dev, arrs)
    for _ in range(TIER_LAUNCHES - 2):
        assert _launch(prog, dev, arrs).tobytes() == first.tobytes()
    assert prog.tier == "quick"  # 31 launches
    gate, started, seen = _gate(prog)
    last = _launch(prog, dev, arrs)  # the 32nd starts the final build on the upgrade thread and does not wait for it
    assert prog.tier == "quick" and prog._quick.pid  # queued on the upgrade thread
    started.wait(60)
    for _ in range(TIER_LAUNCHES):  # the build is held at its gate: these launches cannot be waiting for it
        assert _launch(prog, dev, arrs).tobytes() == first.tobytes()
    assert prog.tier == "quick" and seen == ["building"]
    gate.set()
    prog._quick.done.wait(60)
    swapped = _launch(prog, dev, arrs)  # the first launch after the build adopts it
    assert prog.tier == "final" and " O3 " in prog.compiled.compiler_id
    assert seen == ["building", "built off the launching thread"]
    assert last.tobytes() == first.tobytes() == swapped.tobytes() == _launch(prog, dev, arrs).tobytes()
    np.testing.assert_allclose(first, arrs["a"] * arrs["b"] + arrs["c"] * 3.0 - 0.25, rtol=1e-6)


def _gate(prog):
    """Hold prog's final build until `gate` is set (`started`: it reached the gate); `seen` records where and how it ran (a build on
    the launching thread, or one that waited 20 s at the gate, says so: the test fails instead of hanging)."""
    gate, started, seen = threading.Event(), threading.Event(), []
    build, caller = prog._quick.build, threading.get_ident()

    def gated():
        seen.append("building")
        started.set()
        opened = gate.wait(20)
        seen.append("built off the launching thread" if opened and threading.get_ident() != caller
                    else "built on the launching thread" if opened else "the gate timed out")
        return build()
    prog._quick.build = gated
    return gate, started, seen


def test_a_heavy_first_launch_runs_the_final_build(tmp_path, monkeypatch):
    import devicekit_cpu.runtime as cpu_runtime
    monkeypatch.setattr(cpu_runtime, "TIER_SYNC_WORK", TIER_WORK)  # the real limit needs 16M-element inputs
    dev = _device(tmp_path)
    prog = dev.compile(kernels.elementwise("a * b + c", name="tier_heavy"))
    assert prog.tier == "quick"
    arrs = _inputs(TIER_WORK)  # at least TIER_WORK estimated operations
    out = _launch(prog, dev, arrs)
    assert prog.tier == "final"
    np.testing.assert_array_equal(out, arrs["a"] * arrs["b"] + arrs["c"])


def test_a_reduction_compiles_final_at_once(tmp_path):
    """`reassoc` lets O3 reorder a sum: O0 would give other bits, so reductions have no quick tier."""
    dev = _device(tmp_path)
    prog = dev.compile(kernels.reduce("sum", name="tier_sum"))
    assert prog.tier == "final"
    assert "reassoc" in prog.spec.src


def test_tiers_off_builds_final_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVICEKIT_TIERS", "0")
    prog = _device(tmp_path).compile(kernels.elementwise("a - b * c", name="tier_off"))
    assert prog.tier == "final"


def test_cpu_opt_0_has_no_quick_tier(tmp_path):
    prog = _device(tmp_path, LLVMCompiler(opt=0)).compile(kernels.elementwise("a + b + c", name="tier_o0"))
    assert prog.tier == "final" and " O0 " in prog.compiled.compiler_id


def test_the_tiers_never_share_a_cache_entry(tmp_path):
    """The quick bytes live under quick_identity(); the final key is written by the upgrade only, and a process
    that finds it (here: a fresh device on the same disk cache) starts on the final build."""
    dev = _device(tmp_path, disk=True)
    kern = kernels.elementwise("a * c + b", name="tier_cache")
    prog = dev.compile(kern)
    comp = dev.compiler
    spec = prog.spec
    assert comp.quick_identity() != comp.identity()
    assert prog.compiled.compiler_id == comp.quick_identity()
    assert comp.cache.get(comp.cache_key(spec)) is None  # no final bytes yet
    quick_lib = prog.compiled.lib
    prog.upgrade()
    final_lib = comp.cache.get(comp.cache_key(spec))
    assert final_lib is not None and final_lib == prog.compiled.lib and final_lib != quick_lib
    again = _device(tmp_path, disk=True).compile(kern)  # a new memo and memory layer, the same disk
    assert again.tier == "final" and again.compiled.lib == final_lib


def test_a_plan_upgrades_first(tmp_path):
    dev = _device(tmp_path)
    step = dev.compile(kernels.elementwise("a * b + 1.0", name="tier_plan"))
    assert step.tier == "quick"
    x = dk.Buffer(dev, 64, "float32").copyin(np.full(64, 0.5, np.float32))
    y = dk.Buffer(dev, 64, "float32")
    plan = dk.Plan(dev).add(step, a=x, b=x, out=y, n="n")
    plan.run(n=64, wait=True)
    assert step.tier == "final"
    np.testing.assert_array_equal(y.numpy(), np.full(64, 1.25, np.float32))


class _NoFinal(LLVMCompiler):
    """A compiler whose final build fails (a test double: real O0 builds, a CompileError for O3)."""

    def compile_src(self, src):
        raise CompileError("this final build always fails", "", src)


def test_a_final_build_that_fails_warns_and_keeps_the_quick_one(tmp_path):
    dev = _device(tmp_path, _NoFinal())
    prog = dev.compile(kernels.elementwise("a * b - c", name="tier_broken"))
    assert prog.tier == "quick"
    arrs = _inputs(100)
    for _ in range(TIER_LAUNCHES):
        _launch(prog, dev, arrs)
    prog._quick.done.wait(60)  # the upgrade thread's build failed: the next launch on this thread says so
    with pytest.warns(RuntimeWarning, match="final build failed.*keeps running its quick build"):
        out = _launch(prog, dev, arrs)
    assert prog.tier == "quick"
    np.testing.assert_array_equal(out, arrs["a"] * arrs["b"] - arrs["c"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once: later launches just run
        _launch(prog, dev, arrs)


def test_threads_crossing_the_limit_together_build_once(tmp_path):
    dev = _device(tmp_path)
    prog = dev.compile(kernels.elementwise("a * a + b * c", name="tier_threads"))
    arrs = _inputs(5000, seed=3)
    want = _launch(prog, dev, arrs).tobytes()
    builds, errors = [], []
    build = prog._quick.build
    prog._quick.build = lambda: builds.append(1) or build()
    barrier = threading.Barrier(4)

    def worker():
        barrier.wait()
        for _ in range(TIER_LAUNCHES):
            got = _launch(prog, dev, arrs).tobytes()
            if got != want:
                errors.append("different bits")
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    prog.upgrade()  # waits for the upgrade thread's build: still one
    assert prog.tier == "final" and builds == [1] and not errors
    assert _launch(prog, dev, arrs).tobytes() == want


def test_tier_difference_compares_bits():
    a = np.array([1.0, np.nan, 0.0, 2.0], np.float32)
    nan2 = np.array([0x7FC00001], np.uint32).view(np.float32)[0]  # another NaN payload: the same value
    assert tier_difference(a, np.array([1.0, nan2, 0.0, 2.0], np.float32)) == ""
    assert "first at flat index 2" in tier_difference(a, np.array([1.0, np.nan, -0.0, 2.0], np.float32))
    assert "1 of 4" in tier_difference(a, np.array([1.0, np.nan, 0.0, np.nextafter(np.float32(2), 3)], np.float32))
    assert tier_difference(np.arange(3), np.arange(3)) == ""
    assert "shape/dtype" in tier_difference(np.arange(3), np.arange(4))


def test_a_kernel_whose_final_bytes_are_cached_loads_them_without_asking_for_a_quick_tier(tmp_path, monkeypatch):
    """first_build looks the final bytes up first: the quick-tier question reads the whole LLVM source with a regex
    (~150 us of each cached kernel's load, issue 36's bar of 0.5 ms for one); a new kernel still asks, and starts
    quick. The source's digest is computed once for both lookups (`source_digest`)."""
    from devicekit.compile.compiler import source_digest
    dev = _device(tmp_path)
    comp = dev.compiler
    asked = []
    real = comp.quick_tier
    monkeypatch.setattr(comp, "quick_tier", lambda src: asked.append(src) or real(src))
    spec = dev.renderer.render(kernels.elementwise("a * b - c * 5.0", name="tier_hit"))
    assert comp.first_build(spec).tier == "quick" and len(asked) == 1
    comp.compile(spec)  # the final bytes, as the upgrade stores them
    before = source_digest.cache_info().hits
    got = comp.first_build(spec)
    assert got.tier == "final" and got.from_cache and len(asked) == 1
    assert source_digest.cache_info().hits > before
