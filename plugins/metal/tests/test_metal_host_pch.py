"""The host emulation's precompiled shim (devicekit_metal/hostpch.py): g++ really reads it in HostKernel's own build,
for the sequential and the threaded harness, and a kernel built with it computes what it computes without; the
libclang syntax check reads its own precompiled shim and reports the same errors, at the same lines."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit_metal import hostcheck, hostpch
from devicekit_metal.hostcheck import HostKernel, cxx, libclang_available, syntax_check
from devicekit_metal.renderer import MetalRenderer

needs_gcc = pytest.mark.skipif(cxx() is None or not hostpch._is_gcc(cxx() or ""),
                               reason="the precompiled shim is g++'s (clang++ builds read the headers)")


def _saxpy():
    k = ir.KernelBuilder("pch_saxpy")
    n = k.var("n", 1, 1 << 20)
    x, y = k.param("x", dtypes.float32, n), k.param("y", dtypes.float32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[i] * 2.5 + y[i]
    return k.build()


def _blocksum():
    """A barrier: the threaded harness (C++20, DK_HOST_THREADS)."""
    k = ir.KernelBuilder("pch_blocksum")
    g = k.var("g", 1, 1 << 16)
    x = k.param("x", dtypes.float32, g * 64)
    out = k.param("out", dtypes.float32, g, writable=True)
    gi, li = k.range(g, "global"), k.range(64, "local")
    sm = k.local("sm", dtypes.float32, 64)
    sm[li] = x[gi * 64 + li]
    k.barrier()
    r = k.range(64, "reduce")
    out[gi] = sm[r].sum(r)
    return k.build()


@needs_gcc
@pytest.mark.parametrize("make", [_saxpy, _blocksum], ids=["sequential", "threaded"])
def test_the_host_build_reads_the_precompiled_shim(make, tmp_path, monkeypatch):
    """HostKernel's own g++ command, run again with -H: the first header g++ reads is the .gch ('!' = used; 'x' =
    found but invalid for these flags or macros, when g++ silently reads the headers instead)."""
    seen = []
    real = hostcheck.run_compiler
    monkeypatch.setattr(hostcheck, "run_compiler", lambda cmd, **kw: seen.append(list(cmd)) or real(cmd, **kw))
    host = HostKernel(MetalRenderer().render(make()), MetalRenderer(), workdir=str(tmp_path))
    assert host.threaded == (make is _blocksum)
    (cmd,) = seen
    o = cmd.index("-o")
    p = subprocess.run([*cmd[:o], "-fsyntax-only", "-H", cmd[-1]], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    first = p.stderr.splitlines()[0]
    assert first.startswith("! ") and first.endswith("metal_stdlib.gch"), p.stderr[:600]


@needs_gcc
@pytest.mark.parametrize("make", [_saxpy, _blocksum], ids=["sequential", "threaded"])
def test_a_kernel_computes_the_same_with_and_without_it(make, tmp_path, monkeypatch):
    spec = MetalRenderer().render(make())
    rng = np.random.default_rng(3)
    if make is _saxpy:
        vals, ins = [1000], [rng.standard_normal(1000).astype(np.float32) for _ in range(2)]
    else:
        vals, ins = [3], [rng.standard_normal(192).astype(np.float32)]
    outs = []
    for enabled in (False, True):
        monkeypatch.setattr(hostpch, "ENABLED", enabled)
        arrays = [a.copy() for a in ins] + [np.zeros(vals[0], np.float32)]
        (tmp_path / str(enabled)).mkdir()
        HostKernel(spec, MetalRenderer(), workdir=str(tmp_path / str(enabled))).run(arrays, vals)
        outs.append(arrays[-1])
    np.testing.assert_array_equal(outs[0], outs[1])
    want = ins[0] * np.float32(2.5) + ins[1] if make is _saxpy else ins[0].reshape(3, 64).sum(axis=1)
    np.testing.assert_allclose(outs[1], want, rtol=1e-5)


@pytest.mark.skipif(libclang_available() is not None, reason="needs libclang")
def test_the_syntax_check_reads_its_precompiled_shim_and_reports_the_same(monkeypatch):
    src = MetalRenderer().render(_blocksum()).src
    assert src.startswith("#include <metal_stdlib>")
    bad = src.replace("dku_out[", "dku_nosuch[", 1)
    line = next(i for i, t in enumerate(bad.splitlines(), 1) if "dku_nosuch" in t)
    seen = []
    real = hostpch.libclang_pch
    monkeypatch.setattr(hostcheck, "libclang_pch", lambda *a: seen.append(real(*a)) or seen[-1])
    with_pch = syntax_check(src), syntax_check(bad)
    assert seen and all(p and p[0] == "-include-pch" for p in seen), seen
    monkeypatch.setattr(hostpch, "ENABLED", False)
    assert (syntax_check(src), syntax_check(bad)) == with_pch
    assert with_pch[0] == [] and any(e.startswith(f"{line}:") and "dku_nosuch" in e for e in with_pch[1]), with_pch
