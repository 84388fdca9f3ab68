"""Hand-written Metal kernels as their authors write them (tests/corpus/*.metal: Apple's add_arrays sample with
implicit buffer indices, [[buffer(n)]] buffers and `constant T&` scalars in any order, threadgroup arrays and
threadgroup arguments, simd_sum / simd_max / simd_prefix_exclusive_sum, device and threadgroup atomics, half,
float4 and uchar4 buffers), unmodified.

This machine has no Metal: each kernel's signature is read (libclang with devicekit-metal's shim of <metal_stdlib>,
in the bounded reader process), then the kernel runs in the host emulation (g++ against the same shim; barriers and
simd-group functions with one std::thread per thread), bound exactly as the runtime binds it, and is checked
against numpy. A sample runs in the normal test run, every kernel with DEVICEKIT_SLOW=1 (one g++ build each)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from devicekit import settings
from devicekit_metal.hostcheck import HostKernel, cxx, libclang_available
from devicekit_metal.renderer import MetalRenderer

pytestmark = pytest.mark.skipif(libclang_available() is not None, reason=str(libclang_available()))

CORPUS = Path(__file__).parent / "corpus"
SLOW = settings.get("DEVICEKIT_SLOW")
RNG = np.random.default_rng(0)
SAMPLE = ("add_arrays.metal", "reduce_simd.metal", "histogram.metal", "two_stage_buffers.metal", "softmax_simd.metal")


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _cases():
    """(file, entry, parse_source options, named inputs, expected outputs, rtol)."""
    c = []
    a, b = _f32(256), _f32(256)
    c.append(("add_arrays.metal", "add_arrays", {"global_size": (4,), "local_size": (64,)},
              {"inA": a, "inB": b, "result": np.zeros(256, np.float32)}, {"result": a + b}, 1e-6))
    x, y = _f32(100), _f32(100)
    c.append(("saxpy.metal", "saxpy", {"sizes": {"x": "count", "y": "count"}, "global_size": ("(count + 31) // 32",),
                                       "local_size": (32,)},
              {"x": x, "y": y, "a": 1.5, "count": 100}, {"y": np.float32(1.5) * x + y}, 1e-6))
    x = _f32(1000)
    c.append(("reduce_simd.metal", "reduce_sum", {"sizes": {"input": "n", "total": 1}, "shared_bytes": "4 * 32",
                                                  "global_size": ("(n + 127) // 128",), "local_size": (128,)},
              {"input": x, "total": np.zeros(1, np.float32), "n": 1000}, {"total": np.array([x.sum()])}, 1e-4))
    data = RNG.integers(0, 256, 3000).astype(np.uint8)
    c.append(("histogram.metal", "histogram256", {"global_size": (4,), "local_size": (64,)},
              {"data": data, "bins": np.zeros(256, np.uint32), "length": 3000},
              {"bins": np.bincount(data, minlength=256)}, 0))
    A, B = _f32(7, 5), _f32(5, 9)
    c.append(("matmul_naive.metal", "matmul", {"global_size": (1, 2), "local_size": (16, 4)},
              {"A": A, "B": B, "C": np.zeros((7, 9), np.float32), "M": 7, "N": 9, "K": 5}, {"C": A @ B}, 1e-5))
    A, B = _f32(13, 11), _f32(11, 10)
    c.append(("matmul_tiled.metal", "matmul_tiled", {"global_size": (2, 2), "local_size": (8, 8)},
              {"A": A, "B": B, "C": np.zeros((13, 10), np.float32), "M": 13, "N": 10, "K": 11}, {"C": A @ B}, 1e-5))
    x = _f32(3, 70)
    c.append(("softmax_simd.metal", "softmax_forward", {"global_size": (3,), "local_size": (32,)},
              {"out": np.zeros((3, 70), np.float32), "inp": x, "N": 3, "C": 70}, {"out": _softmax(x)}, 1e-5))
    x, w, bias = _f32(4, 48), _f32(48), _f32(48)
    m, v = x.mean(-1), x.var(-1)
    r = 1 / np.sqrt(v + 1e-5)
    c.append(("layernorm.metal", "layernorm_forward", {"shared_bytes": "4 * 16", "global_size": (4,),
                                                       "local_size": (16,)},
              {"out": np.zeros((4, 48), np.float32), "mean": np.zeros(4, np.float32), "rstd": np.zeros(4, np.float32),
               "inp": x, "weight": w, "bias": bias, "C": 48},
              {"out": (x - m[:, None]) * r[:, None] * w + bias, "mean": m, "rstd": r}, 1e-4))
    x = _f32(64)
    c.append(("gelu.metal", "gelu_forward", {"global_size": (2,), "local_size": (32,)},
              {"out": np.zeros(64, np.float32), "inp": x, "N": 64},
              {"out": 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))}, 1e-5))
    x = _f32(20, 37)
    c.append(("transpose.metal", "transpose", {"global_size": (3, 2), "local_size": (16, 16)},
              {"src": x, "dst": np.zeros((37, 20), np.float32), "rows": 20, "cols": 37}, {"dst": x.T}, 0))
    x = _f32(100)
    pad = np.concatenate([np.repeat(x[:1], 2), x, np.repeat(x[-1:], 2)])
    c.append(("blur_1d.metal", "blur_1d", {"shared_bytes": "(32 + 2 * R) * 4", "global_size": (4,),
                                           "local_size": (32,)},
              {"in": x, "out": np.zeros(128, np.float32), "n": 100, "R": 2},
              {"out": np.concatenate([np.convolve(pad, np.ones(5) / 5, "valid"), np.zeros(28)])}, 1e-5))
    ints = RNG.integers(-50, 50, 96).astype(np.int32)
    chunks = ints.reshape(3, 32)
    c.append(("prefix_sum_simd.metal", "chunk_scan", {"global_size": (3,), "local_size": (32,)},
              {"in": ints, "out": np.zeros(96, np.int32), "chunk_totals": np.zeros(3, np.int32)},
              {"out": (np.cumsum(chunks, 1) - chunks).reshape(-1), "chunk_totals": chunks.sum(1)}, 0))
    x, y = _f32(64).astype(np.float16), _f32(64).astype(np.float16)
    c.append(("half_axpy.metal", "half_axpy", {"global_size": (2,), "local_size": (32,)},
              {"x": x, "y": y, "a": 0.5}, {"y": (0.5 * x.astype(np.float32) + y.astype(np.float32)).astype(np.float16)},
              1e-3))
    a, b = _f32(32, 4), _f32(32, 4)
    c.append(("vec4_add.metal", "vec4_add", {"global_size": (1,), "local_size": (32,)},
              {"a": a, "b": b, "c": np.zeros((32, 4), np.float32)}, {"c": a + b}, 1e-6))
    px = RNG.integers(0, 256, (6, 10, 4)).astype(np.uint8)
    luma = (np.float32(0.2126) * px[..., 0] + np.float32(0.7152) * px[..., 1] + np.float32(0.0722) * px[..., 2]) / 255
    c.append(("grayscale.metal", "grayscale", {"global_size": (2, 2), "local_size": (8, 4)},
              {"pixels": px, "luma": np.zeros((6, 10), np.float32), "width": 10, "height": 6}, {"luma": luma}, 1e-6))
    c.append(("mandelbrot.metal", "mandelbrot", {"global_size": (2, 2), "local_size": (8, 8)},
              {"iters": np.zeros((16, 16), np.uint32), "x0": -2.0, "y0": -1.5, "step": 0.1875, "width": 16,
               "max_iter": 40}, {"iters": _mandel(16, 16, -2.0, -1.5, 0.1875, 40)}, 0))
    vals = _f32(64)
    c.append(("bitonic_step.metal", "bitonic_step", {"global_size": (2,), "local_size": (32,)},
              {"values": vals, "j": 1, "k": 2}, {"values": _bitonic(vals, 1, 2)}, 0))
    a, b = _f32(200), _f32(200)
    parts = np.concatenate([a * b, np.zeros(56, np.float32)]).reshape(4, 64).sum(1)
    c.append(("dot_tree.metal", "dot_partial", {"global_size": (4,), "local_size": (64,)},
              {"a": a, "b": b, "partial": np.zeros(4, np.float32), "n": 200}, {"partial": parts}, 1e-4))
    x = _f32(64)
    c.append(("sigmoid.metal", "sigmoid", {"global_size": (2,), "local_size": (32,)},
              {"x": x, "y": np.zeros(64, np.float32)}, {"y": 1 / (1 + np.exp(-x))}, 1e-5))
    x = _f32(64) * 3
    x[5] = np.nan
    c.append(("clamp_select.metal", "clip", {"global_size": (2,), "local_size": (32,)}, {"x": x, "lo": -1.0, "hi": 2.0},
              {"x": np.nan_to_num(np.clip(x, -1, 2), nan=0.0)}, 0))
    ints = RNG.integers(-10**6, 10**6, 500).astype(np.int32)
    c.append(("atomic_max.metal", "global_max", {"global_size": (8,), "local_size": (64,)},
              {"values": ints, "result": np.array([np.iinfo(np.int32).min], np.int32), "n": 500},
              {"result": np.array([ints.max()])}, 0))
    d, mask = _f32(64), RNG.integers(0, 2, 64).astype(bool)
    c.append(("relu_backward.metal", "relu_backward", {"global_size": (2,), "local_size": (32,)},
              {"dout": d, "mask": mask, "din": np.zeros(64, np.float32)}, {"din": np.where(mask, d, 0)}, 0))
    x = _f32(64)
    c.append(("two_stage_buffers.metal", "scale_shift",
              {"shared_bytes": {"tmp_a": "32 * 4", "tmp_b": 128}, "global_size": (2,), "local_size": (32,)},
              {"scale": 3.0, "in": x, "shift": -1.0, "out": np.zeros(64, np.float32)}, {"out": 3 * x - 1}, 1e-6))
    return c


def _mandel(w, h, x0, y0, step, it_max):
    out = np.zeros((h, w), np.uint32)
    for py in range(h):
        for px in range(w):
            cr = np.float32(x0 + np.float32(px) * np.float32(step))
            ci = np.float32(y0 + np.float32(py) * np.float32(step))
            zr = zi = np.float32(0)
            it = 0
            while zr * zr + zi * zi <= 4 and it < it_max:
                zr, zi = zr * zr - zi * zi + cr, np.float32(2) * zr * zi + ci
                it += 1
            out[py, px] = it
    return out


def _bitonic(v, j, k):
    v = v.copy()
    for i in range(v.size):
        ixj = i ^ j
        if ixj > i and (v[i] > v[ixj]) == ((i & k) == 0):
            v[i], v[ixj] = v[ixj], v[i]
    return v


CASES = _cases()


def _run(spec, named, tmp_path):
    """Run a hand-written spec in the host emulation: arrays by param name (copied; results come back by name)."""
    arrays = [np.ascontiguousarray(np.array(named[p.name], dtype=p.dtype.np)).reshape(-1) for p in spec.params]
    vals = [named[v.name] for v in spec.vars]
    HostKernel(spec, MetalRenderer(), workdir=str(tmp_path)).run(arrays, vals)
    return {p.name: a for p, a in zip(spec.params, arrays) if p.writable}


def test_corpus_is_big_enough():
    files = {p.name for p in CORPUS.glob("*.metal")}
    assert len(files) >= 20 and {c[0] for c in CASES} == files


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_signature_reads(case):
    fname, entry, options, named, _, _ = case
    spec = MetalRenderer().parse_source((CORPUS / fname).read_text(), entry, **options)
    assert {p.name for p in spec.params} | {v.name for v in spec.vars} == set(named)
    slots = [p.slot for p in spec.get_meta("source_params") if p.kind in ("buffer", "scalar")]
    assert len(set(slots)) == len(slots)  # one buffer index per argument, as the runtime binds them


@pytest.mark.skipif(cxx() is None, reason="no C++ compiler for the host emulation")
@pytest.mark.parametrize("case", [c for c in CASES if SLOW or c[0] in SAMPLE], ids=lambda c: c[0])
def test_corpus_kernel_runs_in_host_emulation(case, tmp_path):
    fname, entry, options, named, want, rtol = case
    spec = MetalRenderer().parse_source((CORPUS / fname).read_text(), entry, **options)
    got = _run(spec, named, tmp_path)
    for name, expected in want.items():
        expected = np.asarray(expected)
        out = got[name].reshape(expected.shape)
        if rtol == 0:
            np.testing.assert_array_equal(out, expected.astype(out.dtype), err_msg=f"{fname}: {name}")
        else:
            np.testing.assert_allclose(out.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=rtol,
                                       err_msg=f"{fname}: {name}")


def test_apple_sample_gets_implicit_indices_also_beside_explicit_ones():
    spec = MetalRenderer().parse_source((CORPUS / "add_arrays.metal").read_text(), "add_arrays")
    assert [(p.name, p.slot, p.writable) for p in spec.get_meta("source_params")[:3]] == [
        ("inA", 0, False), ("inB", 1, False), ("result", 2, True)]
    src = (CORPUS / "add_arrays.metal").read_text()
    mixed = src.replace("device float* result", "device float* result [[buffer(0)]]")  # as Apple's compiler: the
    spec = MetalRenderer().parse_source(mixed, "add_arrays")  # others take the first free indices
    assert [(p.name, p.slot) for p in spec.get_meta("source_params")[:3]] == [("inA", 1), ("inB", 2), ("result", 0)]


def test_scalars_and_buffers_bind_at_their_own_indices():
    """scale_shift declares scalars first and buffers at lower indices: each binds where its attribute says."""
    spec = MetalRenderer().parse_source((CORPUS / "two_stage_buffers.metal").read_text(), "scale_shift",
                                        shared_bytes={"tmp_a": "32 * 4", "tmp_b": 128})
    assert [(p.name, p.kind, p.slot) for p in spec.get_meta("source_params")[:6]] == [
        ("scale", "scalar", 3), ("in", "buffer", 0), ("shift", "scalar", 2), ("out", "buffer", 1),
        ("tmp_a", "local", 0), ("tmp_b", "local", 1)]
    assert [v.name for v in spec.vars] == ["scale", "shift"] and [p.name for p in spec.params] == ["in", "out"]
    from devicekit.render.signature import launch_shared
    assert launch_shared(spec, {"scale": 1.0, "shift": 0.0}) == (0, (128, 128))


@pytest.mark.skipif(cxx() is None, reason="no C++ compiler for the host emulation")
def test_too_little_threadgroup_memory_is_caught_not_corrupting(tmp_path):
    """shared_bytes below what the kernel writes: the emulation's canary names the argument (it used to overflow the
    host heap and abort the test process later)."""
    from devicekit_metal.hostcheck import HostCheckError
    src = (CORPUS / "two_stage_buffers.metal").read_text()
    spec = MetalRenderer().parse_source(src, "scale_shift", shared_bytes={"tmp_a": 128, "tmp_b": 100},
                                        global_size=(2,), local_size=(32,))
    with pytest.raises(HostCheckError, match="wrote past its threadgroup argument 'tmp_b' .100 bytes"):
        _run(spec, {"scale": 2.0, "in": _f32(64), "shift": 1.0, "out": np.zeros(64, np.float32)}, tmp_path)
