"""Packed tiles (ir/pack.py): the optimizer's form of a gemm on the CPU, b's panel copied into a local array per K
block, a tile of rows x two vectors. It gives numpy's result on both CPU pairs at sizes no tile, panel or block
divides (var and constant, the ragged column tile, several K blocks), with the epilogues and transposes of a
framework's layers; its rows are stored as whole vectors under one gate; DEVICEKIT_OPT_PACK=0 and small known
sizes keep the unpacked tile. The K block is forced small (`pack.block_kc`) so that small kernels run several
blocks; kernel names are unique per case (the lowered-kernel cache's key does not hold a patched rule)."""

from __future__ import annotations

import dataclasses
import itertools

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes, linearize, pack
from devicekit.ir.ops import Ops
from devicekit.ir.passes import group_vectors
from devicekit.ir.uop import UOp

_names = itertools.count()


def gemm(ta=False, tb=False, bias=False, relu=False, mask=False, dt=dtypes.float32, const=None) -> ir.Kernel:
    """examples/mlp_train.py's layer kernel: out = A @ B (+ bias, relu, or where(mask > 0)), A or B transposed."""
    k = ir.KernelBuilder(f"pk_gemm_{next(_names)}")
    if const is None:
        m, n, kk = k.var("m", 1, 4096), k.var("n", 1, 4096), k.var("k", 1, 4096)
    else:
        m, n, kk = const
    a = k.param("a", dt, shape=(kk, m) if ta else (m, kk))
    b = k.param("b", dt, shape=(n, kk) if tb else (kk, n))
    bs = k.param("bias", dt, size=n) if bias else None
    mk = k.param("mask", dt, shape=(m, n)) if mask else None
    out = k.param("out", dt, shape=(m, n), writable=True)
    i, j, r = k.range(m, "global"), k.range(n, "global"), k.range(kk, "reduce")
    acc = ((a[r, i] if ta else a[i, r]) * (b[j, r] if tb else b[r, j])).sum(r)
    if bs is not None:
        acc = acc + bs[j]
    if relu:
        acc = ir.maximum(acc, 0.0)
    if mk is not None:
        acc = ir.where(mk[i, j] > 0.0, acc, 0.0)
    out[i, j] = acc
    return k.build()


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(pack, "block_kc", lambda w, itemsize, rows_adjacent=False: 16)
    monkeypatch.setattr(pack, "goto_kc", lambda w, itemsize: 16)


def run(kern, M, N, K, pair, ta=False, tb=False, bias=False, relu=False, mask=False, dt=np.float32):
    rng = np.random.default_rng(M * 10007 + N * 101 + K)
    a = rng.standard_normal((K, M) if ta else (M, K)).astype(dt)
    b = rng.standard_normal((N, K) if tb else (K, N)).astype(dt)
    args = {"a": a.ravel(), "b": b.ravel(), "out": np.full(M * N, np.nan, dt)}
    want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    if bias:
        bv = rng.standard_normal(N).astype(dt)
        args["bias"], want = bv, want + bv
    if relu:
        want = np.maximum(want, 0)
    if mask:
        mv = rng.standard_normal((M, N)).astype(dt)
        args["mask"], want = mv.ravel(), np.where(mv > 0, want, 0)
    dev = dk.device("CPU")
    prog = dev.compile(kern, pair=pair)
    sizes = {} if "m" not in {v.name for v in kern.vars} else {"m": M, "n": N, "k": K}
    got = dk.run(prog, dev, **args, **sizes)["out"].reshape(M, N)
    return prog, got, want


LAYERS = {"plain": {}, "bias relu": {"bias": True, "relu": True}, "a^T": {"ta": True},
          "b^T mask": {"tb": True, "mask": True}}


@pytest.mark.parametrize("pair", ["llvm", "c"])
@pytest.mark.parametrize("layer", list(LAYERS))
def test_packed_gemm_matches_numpy(small_blocks, pair, layer):
    """Var sizes: every row tile gated, the ragged column tile lane by lane, K in blocks of 16 (several, the last
    short); the output starts as NaN, so a lane the kernel fails to store shows. One program (var sizes) runs every
    shape."""
    kw = LAYERS[layer]
    kern = gemm(**kw)
    for M, N, K in [(37, 40, 100), (16, 32, 48), (9, 65, 17), (40, 7, 33), (1, 33, 5)]:
        prog, got, want = run(kern, M, N, K, pair, **kw)
        assert is_packed(prog, pair), prog.spec.get_meta("opts")
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{layer} {pair} {M}x{N}x{K}")


def is_packed(prog, pair) -> bool:
    """Packed on the llvm pair; the c pair (vectors one scalar a lane: gcc made the packed tile of a 10-column layer
    5x slower) keeps the unpacked tile (Capabilities.pack_tiles)."""
    opts = prog.spec.get_meta("opts")
    return opts[0].startswith(("packed b panels of 16 x ", "packed b blocks of 16 x ")) if pair == "llvm" else \
        opts[0].startswith("unroll")


@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_constant_sizes_and_float64(small_blocks, pair):
    """Known sizes a tile divides (no gate at all) and ones it does not; float64 (8 lanes a vector)."""
    for shape in [(32, 64, 48), (24, 40, 20)]:
        prog, got, want = run(gemm(bias=True, relu=True, const=shape), *shape, pair, bias=True, relu=True)
        assert prog.spec.get_meta("opts")[0].startswith("packed" if pair == "llvm" else "unroll")
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    prog, got, want = run(gemm(dt=dtypes.float64), 20, 19, 35, pair, dt=np.float64)
    assert prog.spec.get_meta("opts")[0].startswith("packed" if pair == "llvm" else "unroll")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _lower(kernel):
    caps = dataclasses.replace(dk.device("CPU").renderer.capabilities, vector_register_bytes=2048)
    return linearize.lower(kernel, caps)


def test_the_tile_is_rows_of_whole_vector_stores_reading_a_local_panel():
    """AVX-512's register file: 8 rows x 2 vectors of 16 float32; each row's 16 lanes are one vector store under
    the row's one gate (a tile's last rows past M), the k loop reads the panel from a local array, and the K block
    loop and the column tiles run outside the CPU's split of the row tiles."""
    lk = _lower(gemm())
    assert lk.opts == ("packed b panels of 192 x 32, tiles 8 x 32",) or lk.opts[0].startswith("packed b panels of ")
    locals_ = [u for u in lk.uops if u.op is Ops.DEFINE_LOCAL]
    assert {u.arg[0] for u in locals_} == {"packed_b0", "packed_b0_edge"}, locals_
    out_stores = [u for u in lk.uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.PARAM]
    wide = [u for u in out_stores if u.src[1].dtype.count == 16]
    assert len(wide) == 16 and all(len(u.src[0].src) == 3 for u in wide), [u.src[1].dtype for u in out_stores]
    kinds = [u.arg[1] for u in lk.uops if u.op is Ops.RANGE]
    assert kinds[:2] == ["block", "block"], kinds


def test_opting_out_and_small_known_sizes_keep_the_unpacked_tile(monkeypatch):
    """DEVICEKIT_OPT_PACK=0 (a setting: in the lowering key), or a known m under two row tiles or n under one
    column tile: the unpacked register tile."""
    assert _lower(gemm(const=(8, 64, 64))).opts[0].startswith("unroll"), "one row tile"
    assert _lower(gemm(const=(64, 16, 64))).opts[0].startswith("unroll"), "one narrow column tile"
    kern = gemm()
    assert _lower(kern).opts[0].startswith("packed")
    monkeypatch.setenv("DEVICEKIT_OPT_PACK", "0")
    assert _lower(kern).opts[0].startswith("unroll")


def test_a_gemm_the_pack_cannot_share_is_not_packed():
    """A b load that also depends on the row (nothing to share between rows), an int gemm (no float lanes), and a
    kernel that reads its own output (the partial sums live there) keep the unpacked tile."""
    k = ir.KernelBuilder(f"pk_both_{next(_names)}")
    m, n = k.var("m", 1, 99), k.var("n", 1, 99)
    a, b = k.param("a", dtypes.float32, shape=(m, n)), k.param("b", dtypes.float32, shape=(m, n))
    out = k.param("out", dtypes.float32, shape=(m, n), writable=True)
    i, j, r = k.range(m, "global"), k.range(n, "global"), k.range(n, "reduce")
    out[i, j] = (a[i, r] * b[i, j]).sum(r)
    assert not any(o.startswith("packed") for o in _lower(k.build()).opts)
    assert not any(o.startswith("packed") for o in _lower(gemm(dt=dtypes.int32)).opts)
    k = ir.KernelBuilder(f"pk_inplace_{next(_names)}")
    m, n = k.var("m", 1, 99), k.var("n", 1, 99)
    a, b = k.param("a", dtypes.float32, shape=(m, n)), k.param("b", dtypes.float32, shape=(n, n))
    out = k.param("out", dtypes.float32, shape=(m, n), writable=True)
    i, j, r = k.range(m, "global"), k.range(n, "global"), k.range(n, "reduce")
    out[i, j] = out[i, j] + (a[i, r] * b[r, j]).sum(r)
    assert not any(o.startswith("packed") for o in _lower(k.build()).opts)


def _stores(gates):
    buf = UOp(Ops.PARAM, dtypes.float32, (), ("o", 0, True))
    base = UOp(Ops.VAR, dtypes.index, (), ("base", 0, 1 << 20))
    vals = [UOp.const(dtypes.float32, float(c)) for c in range(len(gates))]
    return UOp(Ops.SINK, dtypes.void, tuple(
        UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.index, (buf, base + c) if g is None else (buf, base + c, g)),
                                     v), c) for c, (g, v) in enumerate(zip(gates, vals))))


def test_group_vectors_merges_stores_under_one_gate_only():
    """Consecutive stores with one gate for every lane become one gated vector store; a gate per lane (a column
    past N) or a bounds-check record keeps them apart."""
    v = UOp(Ops.VAR, dtypes.index, (), ("m", 0, 99))
    row_gate = v < 7
    merged = group_vectors(_stores([row_gate] * 4), unaligned=True)
    assert len(merged.src) == 1 and merged.src[0].src[1].dtype.count == 4
    assert merged.src[0].src[0].src[2] is row_gate
    per_lane = group_vectors(_stores([v < c for c in range(4)]), unaligned=True)
    assert len(per_lane.src) == 4
    sink = _stores([row_gate] * 4)
    records = sink.replace(src=tuple(s.replace(arg=("bounds", 0, s.arg, 0)) for s in sink.src))
    assert len(group_vectors(records, unaligned=True).src) == 4


def test_the_tiles_fuzzer_catches_a_wrong_pack(monkeypatch):
    """The fuzzer can fail on the packed tile: with the counts of row tiles and of edge vectors rounded down (the
    last partial row tile and the partial vector past the last whole one never run), the gemm profile
    (testing/fuzz_gemm.py: the gemms the optimizer packs) finds mismatches within a few seeds. The K blocks' count
    stays rounded up: fewer, longer blocks would write past the panel's local array (a crash, not a mismatch)."""
    from devicekit.testing.fuzz import fuzz_seeds
    kc = 40  # no tile's rows or lanes: the one count left as it is
    ceil_div = pack._ceil_div
    monkeypatch.setattr(pack, "block_kc", lambda w, itemsize, rows_adjacent=False: kc)
    monkeypatch.setattr(pack, "goto_kc", lambda w, itemsize: kc)
    monkeypatch.setattr(pack, "_ceil_div", lambda a, n: ceil_div(a, n) if n == kc else pack._div(a, n))
    # seeds no other test compiles: a device memoizes programs by kernel key, and these must be compiled mutated
    rep = fuzz_seeds(range(71_000, 71_006), kind="CPU", pairs=["llvm"], profile="gemm")
    assert any(f.kind == "mismatch" for f in rep.findings), (rep.optimized, rep.findings)


def test_the_k_block_of_a_transposed_a_fits_the_l1():
    """a's rows adjacent (a^T: a row tile reads a new line of a every k step) where a is read in place (the
    packed-a form does not apply): the panel and those lines in half the L1 (48 KiB: 128 rows of 32 float32 lanes;
    Zen 4's 32 KiB: 80); else a sixteenth of the L2 (2 MiB: 1024)."""
    assert pack.block_kc(32, 4, rows_adjacent=True, l1=48 << 10) == 128
    assert pack.block_kc(32, 4, rows_adjacent=True, l1=32 << 10) == 80
    assert pack.block_kc(32, 4, l2=2 << 20) == 1024
    assert pack.block_kc(32, 4, rows_adjacent=True, l1=4 << 10) == pack.MIN_KC
    dev = dk.device("CPU")
    opts = dev.compile(gemm(), pair="llvm").spec.get_meta("opts")[0]  # "packed b panels of kc x w, ..."
    kc, w = map(int, opts.split(",")[0].removeprefix("packed b panels of ").split(" x "))
    assert kc == pack.block_kc(w, 4), opts


def test_a_transposed_a_is_packed_a_tile_at_a_time():
    """a^T (the weight gradient x^T @ dh): the packed-a form. Per K block, b's panels GOTO_TILES at a time in one
    local block and a's kc x rows tile copied as one vector a k step (contiguous rows: the last tile starts at
    M - rows), the tile reading both local arrays; the block of 256 rows x 4 tiles of 32 float32 lanes is
    MAX_PANEL_BYTES. Below `rows` rows, or with a second load of a, the form does not apply."""
    assert pack.goto_kc(32, 4) == 256 and pack.goto_kc(16, 8) == 256 and pack.goto_kc(1024, 8) == pack.MIN_KC
    lk = _lower(gemm(ta=True))
    assert lk.opts[0] == "packed b blocks of 256 x 128, packed a tiles of 256 x 8, tiles 8 x 32", lk.opts
    locals_ = {u.arg[0]: u.arg[1] for u in lk.uops if u.op is Ops.DEFINE_LOCAL}
    assert locals_ == {"packed_b_block": 256 * 128, "packed_a": 2 * 256 * 8, "packed_b0_edge": 256 * 16}, locals_
    a_param = next(u for u in lk.uops if u.op is Ops.PARAM and u.arg[1] == "a")
    a_loads = [u for u in lk.uops if u.op is Ops.LOAD and u.src[0].src[0] is a_param]
    assert any(u.dtype.count == 8 for u in a_loads), [u.dtype for u in a_loads]  # the copy: one vector a k step
    assert not _lower(gemm()).opts[0].startswith("packed b blocks"), "a row-major a reads its rows in place"
    k = ir.KernelBuilder(f"pk_two_a_{next(_names)}")
    m, n, kk = k.var("m", 1, 99), k.var("n", 1, 99), k.var("k", 1, 99)
    a, c = k.param("a", dtypes.float32, shape=(kk, m)), k.param("c", dtypes.float32, shape=(kk, m))
    b = k.param("b", dtypes.float32, shape=(kk, n))
    out = k.param("out", dtypes.float32, shape=(m, n), writable=True)
    i, j, r = k.range(m, "global"), k.range(n, "global"), k.range(kk, "reduce")
    out[i, j] = ((a[r, i] + c[r, i]) * b[r, j]).sum(r)
    assert _lower(k.build()).opts[0].startswith("packed b panels"), "one a load only"


@pytest.mark.parametrize("split,regs", [(False, None), (True, None), (True, 512)])
def test_the_packed_a_form_at_every_edge(small_blocks, monkeypatch, split, regs):
    """Fewer rows than a tile (the clamped copy), a last tile that starts early (its rows of the tile before not
    stored twice: with K blocks the partial sums would double), several column blocks and a partial one, the ragged
    columns, several K blocks; every launch split across the CPU's threads (`split`: the early tile's rows belong
    to another thread's chunk), float32 and float64, with a framework's epilogue; and AVX2's register file (`regs`
    512: tiles of 4 rows x one vector, the copy a vector of 4), run on this host."""
    if split:
        import devicekit_cpu.runtime as rt
        monkeypatch.setattr(rt, "PARALLEL_MIN_WORK", 1)
    if regs is not None:
        from devicekit_cpu.llvm_renderer import LLVMRenderer
        monkeypatch.setattr(LLVMRenderer, "vector_register_bytes", regs)  # in the lowered-kernel cache's key
    kw = {"ta": True, "bias": True, "relu": True, "mask": True}
    for dt, tol in ((dtypes.float32, 1e-4), (dtypes.float64, 1e-11)):
        kern = gemm(dt=dt, **kw)
        for M, N, K in [(1, 40, 33), (5, 300, 40), (8, 129, 17), (9, 32, 48), (23, 257, 70), (41, 64, 16)]:
            prog, got, want = run(kern, M, N, K, "llvm", dt=dt.np, **kw)
            opts = prog.spec.get_meta("opts")[0]
            assert opts.startswith("packed b blocks of 16 x ") and (regs is None or "a tiles of 16 x 4," in opts), opts
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{dt} {M}x{N}x{K} split={split}")
