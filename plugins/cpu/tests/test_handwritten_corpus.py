"""Hand-written C kernels as their authors write them (tests/corpus/*.c: BLAS saxpy, PolyBench/C 4.2 kernels with C99
VLA params, llm.c's CPU layers, a Kahan sum, kernels using stdlib/string/float/stdbool/stdint headers), unmodified:
each is read by `program_from_source` (real libclang, real cc), run on the CPU with `dk.run` (arrays and scalars by
name) and checked against numpy."""

from __future__ import annotations

import math
from pathlib import Path

import devicekit as dk
import numpy as np
import pytest
from devicekit import settings

CORPUS = Path(__file__).parent / "corpus"
RNG = np.random.default_rng(0)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _f64(*shape):
    return RNG.standard_normal(shape)


def _jacobi(a, b, t):
    a, b = a.copy(), b.copy()
    for _ in range(t):
        b[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1] + a[:-2, 1:-1])
        a[1:-1, 1:-1] = 0.2 * (b[1:-1, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:] + b[2:, 1:-1] + b[:-2, 1:-1])
    return {"A": a, "B": b}


def _seidel(a, t):
    a = a.copy()
    n = a.shape[0]
    for _ in range(t):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                a[i, j] = a[i - 1:i + 2, j - 1:j + 2].sum() / 9.0
    return {"A": a}


def _heat(a, b, t):
    a, b = a.copy(), b.copy()

    def step(src, dst):
        c = src[1:-1, 1:-1, 1:-1]
        dst[1:-1, 1:-1, 1:-1] = (0.125 * (src[2:, 1:-1, 1:-1] - 2 * c + src[:-2, 1:-1, 1:-1])
                                 + 0.125 * (src[1:-1, 2:, 1:-1] - 2 * c + src[1:-1, :-2, 1:-1])
                                 + 0.125 * (src[1:-1, 1:-1, 2:] - 2 * c + src[1:-1, 1:-1, :-2]) + c)
    for _ in range(t):
        step(a, b)
        step(b, a)
    return {"A": a, "B": b}


def _lu(a):
    a = a.copy()
    n = a.shape[0]
    for i in range(n):
        for j in range(i):
            a[i, j] = (a[i, j] - a[i, :j] @ a[:j, j]) / a[j, j]
        for j in range(i, n):
            a[i, j] -= a[i, :i] @ a[:i, j]
    return {"A": a}


def _layernorm(x, w, b):
    m = x.mean(-1)
    v = ((x - m[..., None]) ** 2).mean(-1)
    s = 1 / np.sqrt(v + 1e-5)
    return {"out": (x - m[..., None]) * s[..., None] * w + b, "mean": m, "rstd": s}


def _softmax(x, v):
    p = np.zeros_like(x)
    e = np.exp(x[..., :v] - x[..., :v].max(-1, keepdims=True))
    p[..., :v] = e / e.sum(-1, keepdims=True)
    return p


def _mandel(w, h, x0, y0, dx, dy, it_max):
    out = np.zeros((h, w), np.int32)
    for py in range(h):
        for px in range(w):
            cr, ci = np.float32(x0 + px * dx), np.float32(y0 + py * dy)
            zr = zi = np.float32(0)
            it = 0
            while zr * zr + zi * zi <= 4 and it < it_max:
                zr, zi = zr * zr - zi * zi + cr, np.float32(2) * zr * zi + ci
                it += 1
            out[py, px] = it
    return out


def _cases():
    """(file, entry, program_from_source options, named args for dk.run, expected outputs, rtol)."""
    c = []
    x, y = _f32(1000), _f32(1000)
    c.append(("saxpy.c", "saxpy", {}, {"n": 500, "sa": 2.5, "sx": x, "incx": 2, "sy": y, "incy": 1},
              {"sy": np.concatenate([y[:500] + np.float32(2.5) * x[0:1000:2], y[500:]])}, 1e-6))
    x, y = _f64(777), _f64(777)
    c.append(("daxpy_restrict.c", "daxpy", {"sizes": {"x": "n", "y": "n"}}, {"n": 777, "a": -0.5, "x": x, "y": y},
              {"y": y - 0.5 * x}, 1e-12))
    v = np.concatenate([[1e16], np.ones(1000), [-1e16]])
    c.append(("kahan_sum.c", "kahan_sum", {"sizes": {"input": "n", "result": 1}},
              {"input": v, "n": v.size, "result": np.zeros(1)}, {"result": np.array([1000.0])}, 0))
    a, b = _f64(20, 20), _f64(20, 20)
    c.append(("jacobi_2d.c", "kernel_jacobi_2d", {}, {"tsteps": 5, "n": 20, "A": a, "B": b}, _jacobi(a, b, 5), 1e-12))
    cc, aa, bb = _f64(8, 9), _f64(8, 7), _f64(7, 9)
    c.append(("gemm.c", "kernel_gemm", {},
              {"ni": 8, "nj": 9, "nk": 7, "alpha": 1.5, "beta": 1.2, "C": cc, "A": aa, "B": bb},
              {"C": 1.2 * cc + 1.5 * aa @ bb}, 1e-12))
    aa, xx = _f64(6, 5), _f64(5)
    c.append(("atax.c", "kernel_atax", {}, {"m": 6, "n": 5, "A": aa, "x": xx, "y": np.zeros(5), "tmp": np.zeros(6)},
              {"y": aa.T @ (aa @ xx), "tmp": aa @ xx}, 1e-12))
    a = _f64(12, 12)
    c.append(("seidel_2d.c", "kernel_seidel_2d", {}, {"tsteps": 3, "n": 12, "A": a}, _seidel(a, 3), 1e-12))
    d = _f64(10, 4)
    dc = d - d.mean(0)
    c.append(("covariance.c", "kernel_covariance", {},
              {"m": 4, "n": 10, "float_n": 10.0, "data": d, "cov": np.zeros((4, 4)), "mean": np.zeros(4)},
              {"cov": dc.T @ dc / 9, "mean": d.mean(0), "data": dc}, 1e-12))
    a, b = _f64(7, 7, 7), _f64(7, 7, 7)
    c.append(("heat_3d.c", "kernel_heat_3d", {}, {"tsteps": 2, "n": 7, "A": a, "B": b}, _heat(a, b, 2), 1e-12))
    a = _f64(9, 9) + 9 * np.eye(9)
    c.append(("lu.c", "kernel_lu", {}, {"n": 9, "A": a}, _lu(a), 1e-10))
    aa, y1, y2, x1, x2 = _f64(6, 6), _f64(6), _f64(6), _f64(6), _f64(6)
    c.append(("mvt_pointer_rows.c", "kernel_mvt", {"sizes": {"A": "n*n"}},
              {"n": 6, "x1": x1, "x2": x2, "y_1": y1, "y_2": y2, "A": aa},
              {"x1": x1 + aa @ y1, "x2": x2 + aa.T @ y2}, 1e-12))
    B, T, C, V = 2, 3, 8, 11
    tok = RNG.integers(0, V, (B, T)).astype(np.int32)
    wte, wpe = _f32(V, C), _f32(T, C)
    c.append(("llmc_encoder_forward.c", "encoder_forward", {"sizes": {"out": "B*T*C"}},
              {"out": np.zeros((B, T, C), np.float32), "inp": tok, "wte": wte, "wpe": wpe, "B": B, "T": T, "C": C},
              {"out": wte[tok] + wpe[None]}, 1e-6))
    xx, w, bias = _f32(B, T, C), _f32(C), _f32(C)
    c.append(("llmc_layernorm_forward.c", "layernorm_forward",
              {"sizes": {"out": "B*T*C", "mean": "B*T", "rstd": "B*T"}},
              {"inp": xx, "weight": w, "bias": bias, "B": B, "T": T, "C": C}, _layernorm(xx, w, bias), 1e-4))
    OC = 5
    xx, w, bias = _f32(B, T, C), _f32(OC, C), _f32(OC)
    c.append(("llmc_matmul_forward.c", "matmul_forward_naive", {"sizes": {"out": "B*T*OC"}},
              {"inp": xx, "weight": w, "bias": bias, "B": B, "T": T, "C": C, "OC": OC}, {"out": xx @ w.T + bias}, 1e-5))
    xx = _f32(300)
    c.append(("llmc_gelu_forward.c", "gelu_forward", {"sizes": {"out": "N", "inp": "N"}}, {"inp": xx, "N": 300},
              {"out": 0.5 * xx * (1 + np.tanh(math.sqrt(2 / math.pi) * (xx + 0.044715 * xx ** 3)))}, 1e-5))
    Vp = 16
    xx = _f32(B, T, Vp)
    c.append(("llmc_softmax_forward.c", "softmax_forward", {"sizes": {"probs": "B*T*Vp"}},
              {"logits": xx, "B": B, "T": T, "V": V, "Vp": Vp}, {"probs": _softmax(xx, V)}, 1e-5))
    a, b = _f32(100), _f32(100)
    c.append(("llmc_residual_forward.c", "residual_forward", {"sizes": {"out": "N"}}, {"inp1": a, "inp2": b, "N": 100},
              {"out": a + b}, 1e-6))
    p = _softmax(_f32(B, T, Vp), Vp)
    tgt = RNG.integers(0, Vp, (B, T)).astype(np.int32)
    c.append(("llmc_crossentropy_forward.c", "crossentropy_forward", {"sizes": {"losses": "B*T"}},
              {"probs": p, "targets": tgt, "B": B, "T": T, "Vp": Vp},
              {"losses": -np.log(np.take_along_axis(p, tgt[..., None], -1)[..., 0])}, 1e-5))
    xx = _f32(5, 13)
    c.append(("softmax_flt_max.c", "softmax_rows", {"sizes": {"out": "rows*cols"}},
              {"in": xx, "rows": 5, "cols": 13}, {"out": _softmax(xx, 13)}, 1e-5))
    data = RNG.integers(0, 256, 5000).astype(np.uint8)
    c.append(("histogram_u8.c", "histogram", {}, {"data": data, "n": 5000},
              {"hist": np.bincount(data, minlength=256).astype(np.uint32)}, 0))
    ints = RNG.integers(-1000, 1000, 64).astype(np.int32)
    c.append(("prefix_sum_stdbool.c", "prefix_sum", {"sizes": {"out": "n"}},
              {"in": ints, "n": 64, "inclusive": False}, {"out": np.concatenate([[0], np.cumsum(ints)[:-1]])}, 0))
    src, idx = _f32(10, 6), np.array([3, -1, 7, 0], np.int32)
    c.append(("gather_rows_memcpy.c", "gather_rows", {"sizes": {"dst": "nrows*rowlen"}},
              {"src": src, "idx": idx, "nrows": 4, "rowlen": 6}, {"dst": src[np.abs(idx)]}, 0))
    xx = _f32(50)
    pad = np.concatenate([np.repeat(xx[:1], 3), xx, np.repeat(xx[-1:], 3)])
    c.append(("stencil_1d.c", "stencil_1d", {"sizes": {"out": "n", "in": "n"}}, {"in": xx, "n": 50, "radius": 3},
              {"out": np.convolve(pad, np.ones(7), "valid").astype(np.float32)}, 1e-5))
    c.append(("mandelbrot.c", "mandelbrot", {"sizes": {"iters": "width*height"}},
              {"width": 12, "height": 9, "x0": -2.0, "y0": -1.2, "dx": 0.25, "dy": 0.3, "max_iter": 50},
              {"iters": _mandel(12, 9, -2.0, -1.2, 0.25, 0.3, 50)}, 0))
    a = _f32(37, 21)
    c.append(("transpose_blocked.c", "transpose", {}, {"n": 37, "m": 21, "A": a, "B": np.zeros((21, 37), np.float32)},
              {"B": a.T}, 0))
    a, b = RNG.integers(-3000, 3000, 999).astype(np.int16), RNG.integers(-3000, 3000, 999).astype(np.int16)
    c.append(("dot_i16.c", "dot_i16", {"sizes": {"out": 1}}, {"a": a, "b": b, "n": 999},
              {"out": np.array([(a.astype(np.int64) * b).sum()])}, 0))
    aa, bb = _f64(7, 7), _f64(7, 5)
    c.append(("trmm_static.c", "kernel_trmm",  # static, with include_dirs= and defines= as the suite's Makefile
              {"include_dirs": [str(CORPUS / "include")], "defines": {"POLYBENCH_USE_C99_PROTO": None}},
              {"m": 7, "n": 5, "alpha": 1.5, "A": aa, "B": bb}, {"B": 1.5 * (np.tril(aa, -1) + np.eye(7)).T @ bb},
              1e-12))
    return c


CASES = _cases()


def test_corpus_is_big_enough():
    files = sorted(p.name for p in CORPUS.glob("*.c"))
    assert len(files) >= 20 and sorted(c[0] for c in CASES) == files  # every file has a case, every case a file


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_corpus_kernel_runs_unmodified(case, cpu):
    fname, entry, options, named, want, rtol = case
    src = (CORPUS / fname).read_text()
    prog = cpu.program_from_source(src, entry, **options)
    got = dk.run(prog, **named)
    for name, expected in want.items():
        expected = np.asarray(expected)
        out = np.asarray(got[name]).reshape(expected.shape)
        if rtol == 0:
            np.testing.assert_array_equal(out, expected.astype(out.dtype), err_msg=f"{fname}: {name}")
        else:
            np.testing.assert_allclose(out, expected, rtol=rtol, atol=rtol, err_msg=f"{fname}: {name}")


def test_vla_extents_become_sizes(cpu):
    """double A[n][n] states n*n elements: a smaller buffer is refused before the call."""
    r, _ = cpu.pair("c")
    spec = r.parse_source((CORPUS / "jacobi_2d.c").read_text(), "kernel_jacobi_2d")
    assert [(p.name, p.dtype.name) for p in spec.params] == [("A", "float64"), ("B", "float64")]
    assert spec.buffer_sizes({"tsteps": 1, "n": 10}) == [100, 100]
    assert [a for a in spec.arg_order()] == [("var", 0), ("var", 1), ("buffer", 0), ("buffer", 1)]
    prog = cpu.program_from_source((CORPUS / "jacobi_2d.c").read_text(), "kernel_jacobi_2d")
    with pytest.raises(ValueError, match="needs 100 elements"):
        dk.run(prog, tsteps=1, n=10, A=np.zeros(99), B=np.zeros(100))


def test_scalars_in_any_order_execute_in_declaration_order(cpu):
    """execute(buffers, vals): buffers in declaration order, scalars (any C type) in declaration order."""
    from devicekit.ir import dtypes
    prog = cpu.program_from_source((CORPUS / "gemm.c").read_text(), "kernel_gemm")
    assert [(v.name, v.dtype.name) for v in prog.spec.vars] == [
        ("ni", "int32"), ("nj", "int32"), ("nk", "int32"), ("alpha", "float64"), ("beta", "float64")]
    a, b, c = np.ones((2, 3)), np.ones((3, 2)), np.ones((2, 2))
    bufs = [dk.Buffer(cpu, x.size, dtypes.float64).copyin(x) for x in (c, a, b)]
    prog.execute(bufs, [2, 2, 3, 0.5, 2.0], wait=True)
    np.testing.assert_allclose(bufs[0].numpy(), np.full(4, 2.0 + 1.5))
    with pytest.raises(TypeError, match="var ni must be an int"):
        prog.execute(bufs, [2.0, 2, 3, 0.5, 2.0])
    with pytest.raises(TypeError, match="var alpha must be a number"):
        prog.execute(bufs, [2, 2, 3, "0.5", 2.0])


@pytest.mark.skipif(not settings.get("DEVICEKIT_SLOW"), reason="DEVICEKIT_SLOW=1: the corpus read again in process")
def test_corpus_reads_with_headers_in_process(cpu, monkeypatch):
    """The same reader in process (DEVICEKIT_PARSE_TIMEOUT=0) agrees with the helper process."""
    r, _ = cpu.pair("c")
    for fname, entry, options, *_ in CASES:
        src = (CORPUS / fname).read_text()
        a = r.parse_source(src, entry, **options)
        monkeypatch.setenv("DEVICEKIT_PARSE_TIMEOUT", "0")
        b = r.parse_source(src, entry, **options)
        monkeypatch.delenv("DEVICEKIT_PARSE_TIMEOUT")
        assert (a.params, a.vars, a.arg_order()) == (b.params, b.vars, b.arg_order()), fname
