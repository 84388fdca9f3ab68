"""K blocking of the optimizer's 2-D register tiles on the CPU (ir/kblock.py): the blocked kernel gives numpy's result
on both CPU pairs at sizes no tile or block divides, each block's rows share one k loop, the block loop runs outside
the CPU's split of the rows, and kernels the rewrite would change are left unblocked. The K block is forced small
(`optimize.block_k`) so that the fuzzer-sized kernels here run several blocks; kernel names are unique per case (the
lowered-kernel cache's key does not hold a patched rule)."""

from __future__ import annotations

import dataclasses
import itertools

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes, kblock, linearize, optimize

_names = itertools.count()


def gemm(epilogue: bool, in_place: bool = False, const: tuple | None = None) -> ir.Kernel:
    """out = relu(a @ b + bias) (or a @ b; or out + a @ b, reading its own output) over var or constant sizes."""
    k = ir.KernelBuilder(f"kb_gemm_{next(_names)}")
    if const is None:
        m, n, kk = k.var("m", 1, 4096), k.var("n", 1, 4096), k.var("k", 1, 4096)
    else:
        m, n, kk = const
    a, b = k.param("a", dtypes.float32, shape=(m, kk)), k.param("b", dtypes.float32, shape=(kk, n))
    bias = k.param("bias", dtypes.float32, size=n) if epilogue else None
    out = k.param("out", dtypes.float32, shape=(m, n), writable=True)
    i, j, r = k.range(m, "global"), k.range(n, "global"), k.range(kk, "reduce")
    v = (a[i, r] * b[r, j]).sum(r)
    if bias is not None:
        v = ir.maximum(v + bias[j], 0.0)
    if in_place:
        v = v + out[i, j]
    out[i, j] = v
    return k.build()


@pytest.fixture(autouse=True)
def unpacked(monkeypatch):
    """The unpacked tile this module is about (a gemm the optimizer would pack: tests/ir/test_pack.py)."""
    monkeypatch.setenv("DEVICEKIT_OPT_PACK", "0")


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(optimize, "block_k", lambda rows, width, itemsize: 16)


def _lower(kernel):
    caps = dataclasses.replace(dk.device("CPU").renderer.capabilities, vector_register_bytes=2048)
    return linearize.lower(kernel, caps)


SHAPES = [(37, 40, 100), (32, 32, 64), (5, 17, 20), (3, 9, 47), (20, 24, 15)]


@pytest.mark.parametrize("pair", ["llvm", "c"])
@pytest.mark.parametrize("epilogue", [True, False])
def test_k_blocked_gemm_matches_numpy(small_blocks, pair, epilogue):
    """Several blocks (100 = 6 blocks of 17, the last 15), an exact multiple, one block (K < 2 kc), gated rows and
    vector tails; the epilogue (bias, relu) runs once, after the last block. The sizes are vars: one program, compiled
    once, runs every shape (a compile per shape was 0.8 s each, 20 of them)."""
    kern = gemm(epilogue)
    dev = dk.device("CPU")
    prog = dev.compile(kern, pair=pair)
    assert "k blocks of 16" in prog.spec.get_meta("opts"), prog.spec.get_meta("opts")
    for M, N, K in SHAPES:
        rng = np.random.default_rng(K)
        a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
        bias = rng.standard_normal(N).astype(np.float32)
        args = dict(a=a.ravel(), b=b.ravel(), out=np.full(M * N, np.nan, np.float32), m=M, n=N, k=K)
        want = a.astype(np.float64) @ b
        if epilogue:
            args["bias"] = bias
            want = np.maximum(want + bias, 0)
        got = dk.run(prog, dev, **args)["out"].reshape(M, N)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{pair} M, N, K = {M}, {N}, {K}")


def test_each_blocks_rows_share_one_k_loop_outside_the_row_split(small_blocks):
    """32 x 32 x 64, 16-row tiles: the first block's 16 rows in one k loop, the later blocks' in one more (the
    scheduler reopens the row loop for them and groups their reductions all the same: 1 + 16 loops without it),
    and the block loop encloses the split of the rows across threads."""
    lk = _lower(gemm(False, const=(32, 32, 64)))
    assert lk.opts[-1] == "k blocks of 16", lk.opts
    ranges = [u for u in lk.uops if u.op is ir.Ops.RANGE]
    assert len([u for u in ranges if u.arg[1] == "reduce"]) == 2, [u.arg for u in ranges]
    at = next(n for n, u in enumerate(ranges) if u.arg[1] == "block")
    split = ranges[at + 1]
    assert {s.arg[0] for s in split.src if s.op is ir.Ops.VAR} == {"core_start", "core_end"}, split


def test_a_kernel_that_reads_its_output_is_not_blocked(small_blocks):
    """out = out + a @ b: partial sums stored in out would be read as its old value; the kernel stays unblocked
    (tiled as before) and right."""
    M, N, K = 19, 33, 70
    kern = gemm(False, in_place=True)
    dev = dk.device("CPU")
    prog = dev.compile(kern)
    assert not any(o.startswith("k blocks") for o in prog.spec.get_meta("opts")), prog.spec.get_meta("opts")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    old = rng.standard_normal(M * N).astype(np.float32)
    got = dk.run(prog, dev, a=a.ravel(), b=b.ravel(), out=old.copy(), m=M, n=N, k=K)["out"]
    np.testing.assert_allclose(got.reshape(M, N), a @ b + old.reshape(M, N), rtol=1e-4, atol=1e-4)


def test_a_short_constant_reduction_is_not_blocked():
    """A constant K under two blocks gains nothing from blocking: the kernel is tiled as before."""
    kc = kblock.block_k(16, 16, 4)
    assert _lower(gemm(False, const=(32, 32, 2 * kc - 1))).opts[-1] == "upcast global range 1 x16"
    assert _lower(gemm(False, const=(32, 32, 2 * kc))).opts[-1] == f"k blocks of {kc}"


def test_the_block_comes_from_the_l1():
    """a's slice of a 16-row tile and a b line per k step fill half the L1 data cache: 192 on a 48 KiB L1, 128 on
    32 KiB; never under MIN_KC; the host's L1 is read from sysfs (FALLBACK_L1 where it cannot be)."""
    assert kblock.block_k(16, 16, 4, l1=48 * 1024) == 192
    assert kblock.block_k(16, 16, 4, l1=32 * 1024) == 128
    assert kblock.block_k(16, 16, 4, l1=1024) == kblock.MIN_KC
    assert kblock.block_k(8, 8, 8, l1=32 * 1024) == 128
    assert kblock.l1_data_bytes() >= 4096
