"""The heuristic optimizer (ir/optimize.py): which kernels it tiles, what it records, how to opt out, and that a
tiled kernel gives the reference's result on the CPU pairs (and OpenCL, where PoCL is installed).
fuzz_tiles.py draws thousands more of these kernels in the fuzzer."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir, kernels
from devicekit.ir import dtypes


def naive_gemm(M, N, K, dt=dtypes.float32, optimize=True, var=False):
    k = ir.KernelBuilder("gemm")
    if var:
        M, N, K = k.var("m", 1, 4096), k.var("n", 1, 4096), k.var("kd", 1, 4096)
    a = k.param("a", dt, shape=(M, K))
    b = k.param("b", dt, shape=(K, N))
    c = k.param("c", dt, shape=(M, N), writable=True)
    i, j, r = k.range(M, "global"), k.range(N, "global"), k.range(K, "reduce")
    c[i, j] = (a[i, r] * b[r, j]).sum(r)
    return k.build(optimize=optimize)


def opts(kernel, pair="llvm"):
    return dk.device("CPU").compile(kernel, pair=pair).compiled.spec.get_meta("opts", ())


def run_gemm(kernel, M, N, K, dt=np.float32, pair="llvm", device="CPU", var=False):
    rng = np.random.default_rng(M * 1000 + N * 10 + K)
    a, b = rng.standard_normal((M, K)).astype(dt), rng.standard_normal((K, N)).astype(dt)
    dev = dk.device(device)
    prog = dev.compile(kernel, pair=pair) if pair else dev.compile(kernel)
    sizes = {"m": M, "n": N, "kd": K} if var else {}
    out = dk.run(prog, dev, a=a.ravel(), b=b.ravel(), c=np.zeros(M * N, dt), **sizes)["c"]
    return out.reshape(M, N), a @ b


@pytest.mark.parametrize("pair", ["llvm", "c"])
@pytest.mark.parametrize("shape", [(16, 32, 8), (13, 17, 5), (1, 3, 7), (5, 1, 2)])
def test_a_naive_gemm_is_tiled_and_right(pair, shape, monkeypatch):
    """Sizes no tile divides take the gated rows of the unroll and the tail statements of the upcast (the unpacked
    tile: tests/ir/test_pack.py has the packed one)."""
    monkeypatch.setenv("DEVICEKIT_OPT_PACK", "0")
    M, N, K = shape
    kern = naive_gemm(M, N, K)
    got = opts(kern, pair)
    assert got
    if M > 1:  # rows are capped by a known extent: one row is not unrolled
        assert got[0].startswith("unroll global range 0 x"), got
    else:
        assert not any(o.startswith("unroll") for o in got), got
    if N > 1:
        assert any(o.startswith("upcast global range 1 x") for o in got), got
    out, want = run_gemm(kern, M, N, K, pair=pair)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dt", [np.float64, np.int32])
def test_var_sized_gemm_equals_the_untiled_kernel(dt):
    """A var-sized kernel is tiled once for every size (no constant divides a var: every row gated, every
    column past the last whole vector in a tail); int32 is unrolled and computed lane by lane, not lifted."""
    ddt = dtypes.float64 if dt is np.float64 else dtypes.int32
    tiled, plain = naive_gemm(0, 0, 0, ddt, var=True), naive_gemm(0, 0, 0, ddt, optimize=False, var=True)
    assert opts(tiled) and not opts(plain)
    for M, N, K in [(1, 1, 1), (7, 19, 3), (9, 16, 4)]:
        rng = np.random.default_rng(M + N + K)
        a = rng.integers(-9, 9, (M, K)).astype(dt)
        b = rng.integers(-9, 9, (K, N)).astype(dt)
        res = [dk.run(kern, "CPU", a=a.ravel(), b=b.ravel(), c=np.zeros(M * N, dt), m=M, n=N, kd=K)["c"]
               for kern in (tiled, plain)]
        np.testing.assert_array_equal(res[0], res[1])
        np.testing.assert_array_equal(res[0].reshape(M, N), a @ b)


def test_opting_out_one_kernel_or_every_kernel(monkeypatch):
    """build(optimize=False) keeps one kernel as written (another cache key); DEVICEKIT_OPT=0 every kernel."""
    on, off = naive_gemm(8, 8, 8), naive_gemm(8, 8, 8, optimize=False)
    assert on.key != off.key
    assert opts(on) and not opts(off)
    src_on = dk.device("CPU").compile(on).compiled.spec.src
    monkeypatch.setenv("DEVICEKIT_OPT", "0")
    assert not opts(on)
    assert dk.device("CPU").compile(on).compiled.spec.src != src_on  # not the memoized tiled program


def test_kernels_it_leaves_as_written():
    """Hand-tiled (user vectors), no reduction, a triangular reduce over the unroll candidate."""
    assert not opts(kernels.matmul(32, 32, 32))
    k = ir.KernelBuilder("ew")
    x = k.param("x", dtypes.float32, shape=(8, 8))
    y = k.param("y", dtypes.float32, shape=(8, 8), writable=True)
    i, j = k.range(8, "global"), k.range(8, "global")
    y[i, j] = x[i, j] * 2
    assert not opts(k.build())
    # r <= i: i is in r's bounds, so only j (stride 1, shared by nothing) could move; a[i, r] does not use j
    k = ir.KernelBuilder("tri")
    a = k.param("a", dtypes.float32, shape=(9, 9))
    b = k.param("b", dtypes.float32, shape=(9, 9))
    c = k.param("c", dtypes.float32, shape=(9, 9), writable=True)
    i, j = k.range(9, "global"), k.range(9, "global")
    r = k.range(i + 1, kind="reduce")
    c[i, j] = (a[i, r] * b[r, j]).sum(r)
    tri = k.build()
    got = opts(tri)
    assert not any("range 0" in o for o in got), got
    A, B = np.random.default_rng(0).standard_normal((2, 9, 9)).astype(np.float32)
    out = dk.run(tri, "CPU", a=A.ravel(), b=B.ravel(), c=np.zeros(81, np.float32))["c"].reshape(9, 9)
    np.testing.assert_allclose(out, np.tril(A) @ B, rtol=1e-5, atol=1e-5)


def test_the_reference_is_never_optimized():
    """PYTHON is the fuzzer's oracle: it interprets the kernel as written."""
    kern = naive_gemm(8, 8, 8)
    assert not dk.device("PYTHON").compile(kern).compiled.spec.get_meta("opts", ())
    out, want = run_gemm(kern, 8, 8, 8, pair=None, device="PYTHON")
    np.testing.assert_allclose(out, want, rtol=1e-5)


def test_opencl_unrolls_and_matches():
    """A GPU-indexed renderer gets the unroll (one work-item computes UNROLL rows), not the CPU's upcast."""
    try:
        dev = dk.device("OPENCL")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no OpenCL device here: {e}")
    kern = naive_gemm(13, 17, 5)
    got = dev.compile(kern).compiled.spec.get_meta("opts", ())
    assert got and got[0].startswith("unroll"), got
    out, want = run_gemm(kern, 13, 17, 5, pair=None, device="OPENCL")
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_the_tiles_fuzzer_checks_the_optimizer():
    """fuzz_tiles' kernels are the optimizer's: most of them are rewritten, all match the reference."""
    from devicekit.testing.fuzz import fuzz_seeds
    rep = fuzz_seeds(range(10), kind="CPU", pairs=["llvm"], profile="tiles")
    assert not rep.findings, rep.findings[:1]
    assert rep.optimized >= 6, rep.optimized


def test_devicekit_compile_says_what_the_optimizer_did(tmp_path):
    import subprocess
    import sys
    f = tmp_path / "gemm_kernels.py"
    f.write_text("from devicekit import ir\nfrom devicekit.ir import dtypes\n"
                 "k = ir.KernelBuilder('gemm')\n"
                 "a = k.param('a', dtypes.float32, shape=(8, 8))\nb = k.param('b', dtypes.float32, shape=(8, 8))\n"
                 "c = k.param('c', dtypes.float32, shape=(8, 8), writable=True)\n"
                 "i, j, r = k.range(8, 'global'), k.range(8, 'global'), k.range(8, 'reduce')\n"
                 "c[i, j] = (a[i, r] * b[r, j]).sum(r)\ngemm = k.build()\n")
    cmd = [sys.executable, "-m", "devicekit.cli", "compile", f"{f}:gemm", "--device", "CPU"]
    ir_out = subprocess.run([*cmd, "--show", "ir"], capture_output=True, text=True, check=True).stdout
    import re

    import devicekit as dk
    from devicekit.ir.optimize import heuristic_rows
    rows = f"x{min(8, heuristic_rows(dk.device('CPU').renderer.capabilities))}"  # 4 on AVX2; 16 on AVX-512, of 8
    assert re.match(rf"# optimizer: unroll global range 0 {rows}\n# optimizer: upcast", ir_out), ir_out[:200]
    src = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert re.search(rf"optimizer: unroll global range 0 {rows}", src.stderr) and "optimizer" not in src.stdout


@pytest.mark.parametrize("kind", ["CUDA", "METAL"])
def test_tiled_kernels_compile_for_the_gpu_kinds(kind):
    """CUDA compiles with NVRTC (no GPU needed) and Metal renders here: the unrolled, gated statements are valid
    source for both (the CUDA runtime and Metal run in their own suites where the hardware is)."""
    from devicekit.testing.fuzz import fuzz_seeds
    try:
        dk.target(kind)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no {kind} toolchain here: {e}")
    rep = fuzz_seeds(range(8), kind=kind, profile="tiles")
    assert not rep.findings, rep.findings[:1]
    assert rep.optimized >= 5 and all(n == 8 for n in rep.checks.values()), (rep.optimized, rep.checks)


def test_the_tiles_fuzzer_catches_a_wrong_tile(monkeypatch):
    """The fuzzer can fail: with the upcast's lanes rotated by one (each vector lane stored one column over), the
    tiles profile finds mismatches against the reference within a few seeds."""
    from devicekit.ir import optimize
    from devicekit.testing.fuzz import fuzz_seeds
    orig = optimize._vector_statement

    def rotated(st, g, lanes, *memos):
        stores = orig(st, g, lanes, *memos)
        return [s.replace(src=(s.src[0], stores[(c + 1) % len(stores)].src[1])) for c, s in enumerate(stores)]
    monkeypatch.setattr(optimize, "_vector_statement", rotated)
    # seeds no other test compiles: a device memoizes programs by kernel key, and these must be compiled mutated
    rep = fuzz_seeds(range(70_000, 70_012), kind="CPU", pairs=["llvm"], profile="tiles")
    assert any(f.kind == "mismatch" for f in rep.findings), (rep.optimized, rep.findings)


# ---- small extents: tiles no wider than the axis, a vector tail, scalar rows kept short (issue 31) ----------------

def _lower(kernel, vector_register_bytes=2048):
    """The kernel lowered for the CPU's capabilities with an AVX-512-sized register file (16-row tiles), whatever
    this machine has: the choices below are rules of the shapes and the register file, not of one CPU."""
    import dataclasses

    from devicekit.ir import linearize
    caps = dataclasses.replace(dk.device("CPU").renderer.capabilities, vector_register_bytes=vector_register_bytes)
    return linearize.lower(kernel, caps)


def _bt_gemm(name="bt_gemm", t_store=False):
    """out = a @ b.T with a mask (the MLP's backward dz @ w2.T): b[j, r] has a var stride in j, gathered lane by
    lane for the tile's rows (optimize._gathered); stored transposed (`t_store`), no axis has unit-stride stores:
    no vector axis."""
    k = ir.KernelBuilder(name)
    m, n, kk = k.var("m", 1, 4096), k.var("n", 1, 4096), k.var("k", 1, 4096)
    a, b = k.param("a", dtypes.float32, shape=(m, kk)), k.param("b", dtypes.float32, shape=(n, kk))
    mk = k.param("mask", dtypes.float32, shape=(m, n))
    out = k.param("out", dtypes.float32, shape=(n, m) if t_store else (m, n), writable=True)
    i, j, r = k.range(m, "global"), k.range(n, "global"), k.range(kk, "reduce")
    v = ir.where(mk[i, j] > 0.0, (a[i, r] * b[j, r]).sum(r), 0.0)
    if t_store:
        out[j, i] = v
    else:
        out[i, j] = v
    return k.build()


def test_a_var_vector_axis_gets_a_half_width_vector_tail_in_one_reduce_loop_per_level(monkeypatch):
    """n = 10 (a 10-class layer) on a x16 upcast: the lanes past the last 16 run as one x8 vector, then scalars,
    not as 10 scalar lanes; each level's 16 rows share one reduce loop (the scheduler groups the tail's reductions
    as it groups the main tile's): 4 reduce loops (the main tile's first K block and the blocks after it, ir/kblock.py;
    each tail's), not 2 + 16 + 16. (The unpacked tile.)"""
    monkeypatch.setenv("DEVICEKIT_OPT_PACK", "0")
    lk = _lower(naive_gemm(0, 0, 0, var=True))
    assert lk.opts[:3] == ("unroll global range 0 x16", "upcast global range 1 x16", "vector tails x8"), lk.opts
    assert lk.opts[3].startswith("k blocks of "), lk.opts
    reduce_loops = [u for u in lk.uops if u.op is ir.Ops.RANGE and u.arg[1] == "reduce"]
    assert len(reduce_loops) == 4, [u.arg for u in reduce_loops]
    assert "vector tails x4" in opts(naive_gemm(0, 0, 0, dtypes.float64, var=True))  # x8 float64: tail x4


@pytest.mark.parametrize("N, lanes, tails", [(10, 8, ()), (13, 8, ("vector tails x4",)), (5, 4, ()), (3, 2, ()),
                                             (64, 16, ()), (24, 16, ("vector tails x8",))])
def test_a_known_short_axis_caps_the_vector_at_its_width(N, lanes, tails):
    """A constant axis narrower than the x16 vector gets its largest power of two (10 -> x8, 3 -> x2), and a
    half-width vector tail when its remainder holds one; the result is numpy's."""
    kern = naive_gemm(12, N, 10)
    got = _lower(kern).opts
    assert got == ("unroll global range 0 x12", f"upcast global range 1 x{lanes}", *tails), got
    out, want = run_gemm(kern, 12, N, 10)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_scalar_rows_stay_at_unroll_when_there_is_no_vector_axis():
    """Without a vector axis each row is one scalar accumulator: 16 rows (the vector tile's rule) only add row
    address arithmetic, so the rows stay at UNROLL (4) even on a 2 KiB register file."""
    from devicekit.ir import optimize
    assert optimize.heuristic_rows(type("C", (), {"vector_register_bytes": 2048})()) == 16
    assert _lower(_bt_gemm(t_store=True)).opts == (f"unroll global range 0 x{optimize.UNROLL}",)


def test_a_transposed_b_is_gathered_for_a_vector_tile(monkeypatch):
    """b[j, r] (b^T) has no unit stride in j, but inside the reduction and shared by every row of the tile: its 16
    lanes are gathered once a k step and the tile is 16 rows x 16 lanes, not 4 scalar rows (unpacked; packed, the
    pack reads it column by column)."""
    monkeypatch.setenv("DEVICEKIT_OPT_PACK", "0")
    assert _lower(_bt_gemm()).opts[:2] == ("unroll global range 0 x16", "upcast global range 1 x16")


@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_small_extent_kernels_agree_with_numpy(pair):
    """The MLP step's shapes (bench/framework_step.py) and sizes around each vector and tail width, on both CPU
    pairs: var-sized kernels tiled once, every size through the x16 loop, the x8 tail and the scalar tail."""
    dev = dk.device("CPU")
    gemm, bt = dev.compile(naive_gemm(0, 0, 0, var=True), pair=pair), dev.compile(_bt_gemm(f"bt_{pair}"), pair=pair)
    rng = np.random.default_rng(31)
    for M, N, K in [(100, 10, 64), (64, 10, 100), (100, 64, 10), (3, 7, 2), (17, 8, 5), (5, 9, 3), (19, 23, 4),
                    (16, 24, 1), (1, 31, 6)]:
        a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
        out = dk.run(gemm, dev, a=a.ravel(), b=b.ravel(), c=np.zeros(M * N, np.float32), m=M, n=N, kd=K)["c"]
        np.testing.assert_allclose(out.reshape(M, N), a @ b, rtol=1e-4, atol=1e-4)
        mask = rng.standard_normal((M, N)).astype(np.float32)
        bt_out = dk.run(bt, dev, a=a.ravel(), b=np.ascontiguousarray(b.T).ravel(), mask=mask.ravel(),
                        out=np.zeros(M * N, np.float32), m=M, n=N, k=K)["out"]
        np.testing.assert_allclose(bt_out.reshape(M, N), np.where(mask > 0, a @ b, 0), rtol=1e-4, atol=1e-4)
