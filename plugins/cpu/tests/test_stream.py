"""Streaming (non-temporal) stores of the llvm pair (devicekit_cpu/stream.py): which loops get them, that the choice
is in the source, and that the peel / vector / rest loops give the bits of the ordinary loop at every size and
alignment. A low threshold makes small launches take the streaming path (a few ms in all)."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir, kernels
from devicekit.ir import dtypes


def _program(cpu, kern, threshold: int):
    from devicekit_cpu.llvm_renderer import LLVMRenderer
    from devicekit_cpu.runtime import CPUProgram
    r = LLVMRenderer()
    r.stream_threshold = threshold
    _, c = cpu.pair("llvm")
    return CPUProgram(c.compile(r.render(kern)), cpu)


def test_threshold_is_in_the_source(cpu):
    kern = kernels.elementwise("a * b + c")
    src = {t: _program(cpu, kern, t).spec.src for t in (0, 256, 1 << 20)}
    assert "!nontemporal" not in src[0]
    assert "!nontemporal" in src[256] and "fence seq_cst" in src[256]
    assert src[256] != src[1 << 20]  # the per-launch threshold is a literal: the cache key follows it


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64, dtypes.int32])
def test_streaming_loop_gives_the_ordinary_bits(cpu, dt):
    kern = kernels.elementwise("a * b + c", dtype=dt) if dt != dtypes.float32 else kernels.elementwise("a * b + c")
    plain, streamed = _program(cpu, kern, 0), _program(cpu, kern, 64)
    assert "!nontemporal" in streamed.spec.src
    rng = np.random.default_rng(3)
    npdt = {"float32": np.float32, "float64": np.float64, "int32": np.int32}[dt.name]
    for n in (1, 15, 16, 17, 33, 100, 1027, 5000):
        for shift in (0, 1, 3):  # the output at element offsets of a bigger buffer: the peel differs
            xs = [(rng.standard_normal(n) * 100).astype(npdt) for _ in range(3)]
            ins = [dk.Buffer(cpu, n, dt).copyin(x) for x in xs]
            outs = []
            for prog in (plain, streamed):
                base = dk.Buffer(cpu, n + shift, dt)
                out = base.view(n, dt, shift) if shift else base
                prog.execute([*ins, out], [n])
                outs.append(out.numpy())
            np.testing.assert_array_equal(outs[1], outs[0], err_msg=f"n={n} shift={shift}")
            np.testing.assert_array_equal(outs[0], xs[0] * xs[1] + xs[2])


def _kernel(body: str):
    k = ir.KernelBuilder(f"s_{body}")
    n = k.var("n", 1, 1 << 30)
    a = k.param("a", dtypes.float32, n)
    o = k.param("o", dtypes.float32, n, writable=True)
    p = k.param("p", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    if body == "two_outputs":
        o[i] = a[i] * 2.0
        p[i] = a[i] + 1.0
    elif body == "reads_other_element":
        o[i] = a[i] + o[0]
        p[i] = a[i]
    elif body == "strided":
        o[i // 2] = a[i]
        p[i] = a[i]
    return k.build()


@pytest.mark.parametrize("body", ["two_outputs", "reads_other_element", "strided"])
def test_loops_that_do_not_qualify_keep_ordinary_stores(cpu, body):
    assert "!nontemporal" not in _program(cpu, _kernel(body), 64).spec.src


@pytest.mark.parametrize("llc", [32 << 20, 480 << 20, 4 << 30])
def test_a_threads_llc_share_is_capped(monkeypatch, llc):
    """A VM reports its host's whole LLC (480 MB on a 2-vCPU Xeon VM, where nothing then streamed below 480 MB of
    output): each thread's share is capped at THREAD_LLC_CAP, so a 64 MB output streams on any host."""
    from devicekit_cpu import stream
    monkeypatch.setattr(stream, "llc_bytes", lambda: llc)
    assert (1 << 20) <= stream.default_threshold() <= stream.THREAD_LLC_CAP < 64 << 20
