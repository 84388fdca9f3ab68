"""The shortcuts that make lowering fast (issue 31 item 3) give the very source the long way gives: the optimizer's
tidy step (ir/optimize.py `_Tidy`: simplify's first step taken while the tiles are built), the memoised
substitution (`rewrite.substitute_memo`) and graph_rewrite's shared `stable` set. The fuzz campaign validates
rendered sources, so a shortcut may change how fast a source is made, never one byte of it."""

from __future__ import annotations

import devicekit as dk
import pytest
from devicekit import ir
from devicekit.ir import dtypes, optimize, passes, rewrite
from devicekit.ir.linearize import format_linear, lower
from devicekit.ir.ops import Ops
from devicekit.ir.uop import UOp
from devicekit.testing.fuzzgen import make_case


def _gemm(M, N, K, var=False, scaled=False):
    k = ir.KernelBuilder("gemm")
    if var:
        M, N, K = k.var("m", 1, 4096), k.var("n", 1, 4096), k.var("kd", 1, 4096)
    a = k.param("a", dtypes.float32, shape=(M, K))
    b = k.param("b", dtypes.float32, shape=(K, N))
    c = k.param("c", dtypes.float32, shape=(M, N), writable=True)
    i, j, r = k.range(M, "global"), k.range(N, "global"), k.range(K, "reduce")
    prod = (a[i, r] * b[r, j]).sum(r)
    c[i, j] = prod * k.scalar("alpha", dtypes.float32) if scaled else prod
    return k.build()


def _kernels():
    yield "matmul 100x64x64", _gemm(100, 64, 64)
    yield "ragged 37x10x5", _gemm(37, 10, 5)  # a vector tail and a gated last row tile
    yield "var sizes, scalar", _gemm(0, 0, 0, var=True, scaled=True)
    for seed in range(8):
        yield f"tiles {seed}", make_case(seed, "tiles").kernel


@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_tidy_gives_the_linear_form_simplify_gives(pair, monkeypatch):
    """The optimizer with its tidy step and without it: the same op list, node for node, for every kernel it
    tiles (a tidy replacement that simplify would not have made, or made differently, shows here)."""
    caps = dk.device("CPU").pair(pair)[0].capabilities
    for name, kern in _kernels():
        fast = lower(kern, caps)
        with monkeypatch.context() as m:
            m.setattr(optimize, "_Tidy", lambda *a, **k: optimize._keep)
            slow = lower(kern, caps)
        assert fast.opts == slow.opts, name
        assert format_linear(fast.uops) == format_linear(slow.uops), name


def test_tidy_tiles_naive_matmul():
    """The tidy step is used on a naive matmul (else the test above compares nothing with itself): simplify then
    finds nothing left to rewrite in the optimizer's lanes."""
    caps = dk.device("CPU").renderer.capabilities
    kern = _gemm(100, 64, 64)
    bare = rewrite.substitute(kern.sink, {p: p.replace(src=()) for p in kern.param_uops})  # as lower() has it
    sink, opts = optimize.optimize(bare, caps, None)
    assert opts
    assert passes.simplify(sink) is sink


def test_substitute_memo_is_substitute():
    """Shared memo, same answer: each root substituted alone and through one memo give the same nodes."""
    i = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, 8),), (0, "global"))
    j = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, 4),), (1, "global"))
    roots = [i * 4 + j, (i * 4 + j) * 2, j + 1, i * 3]
    memo: dict = {}
    for x in range(3):
        mapping = {i: j + x}
        for r in roots:
            assert rewrite.substitute_memo(r, mapping, memo if x == 0 else {}) is rewrite.substitute(r, mapping)


def test_graph_rewrite_shared_stable_set():
    """What one call found stable the next one skips; a node that does need the rewrite is still rewritten."""
    i = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, 8),), (0, "global"))
    stable: set = set()
    a = (i + 0) * 1
    assert rewrite.graph_rewrite(a, passes.simplify_step, stable=stable) is i
    b = (i * 2) + (i + 0)
    assert rewrite.graph_rewrite(b, passes.simplify_step, stable=stable) is passes.simplify(b)
