"""One test per verifier error: each malformed kernel is refused with a KernelError naming the node and this file."""

import pytest
from devicekit import ir
from devicekit.ir import KernelError, dtypes


def _k():
    k = ir.KernelBuilder("bad")
    n = k.var("n", 1, 1000)
    return k, n


def test_dtype_mismatch_names_both_dtypes_and_the_user_line():
    k, n = _k()
    x = k.param("x", dtypes.float32, n)
    y = k.param("y", dtypes.float16, n)
    i = k.range(n, "global")
    with pytest.raises(KernelError, match=r"dtype mismatch in ADD: dtypes.float32 vs dtypes.float16.*test_verifier.py"):
        _ = x[i] + y[i]


def test_store_to_read_only_param():
    k, n = _k()
    x = k.param("x", dtypes.float32, n)
    i = k.range(n, "global")
    with pytest.raises(KernelError, match="store to read-only param x"):
        x[i] = 1.0


def test_range_used_outside_its_scope():
    k, n = _k()
    x = k.param("x", dtypes.float32, n * n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i, r = k.range(n, "global"), k.range(n, "reduce")
    out[i] = x[i * n + r].sum(r) + x[r]
    with pytest.raises(KernelError, match="used outside its scope"):
        k.build()


def test_unreduced_reduce_range():
    k, n = _k()
    x = k.param("x", dtypes.float32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    r = k.range(n, "reduce")
    out[r] = x[r]
    with pytest.raises(KernelError, match="reduce range that no reduction consumes"):
        k.build()


def test_reduce_over_a_range_absent_from_its_expression():
    k, n = _k()
    x = k.param("x", dtypes.float32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i, r = k.range(n, "global"), k.range(n, "reduce")
    out[i] = x[i].sum(r)
    with pytest.raises(KernelError, match="does not use"):
        k.build()


def test_non_integer_index():
    k, n = _k()
    x = k.param("x", dtypes.float32, n)
    i = k.range(n, "global")
    with pytest.raises(KernelError, match="must be a scalar integer"):
        _ = x[x[i]]


@pytest.mark.parametrize("expr, match", [
    (lambda x, i: x[i + 1], "out of bounds: reaches 1, size is 1 with n=1"),
    (lambda x, i: x[i - 1], "can be negative"),
    (lambda x, i: x[i * 2], "out of bounds"),
])
def test_provably_out_of_bounds(expr, match):
    k, n = _k()
    x = k.param("x", dtypes.float32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = expr(x, i)
    with pytest.raises(KernelError, match=match):
        k.build()


def test_in_bounds_tiles_and_gated_reads_are_accepted():
    k = ir.KernelBuilder("ok")
    m, n = k.var("m", 1, 64), k.var("n", 1, 64)
    x = k.param("x", dtypes.float32, m * n)
    out = k.param("out", dtypes.float32, m * n, writable=True)
    i, j = k.range(m, "global"), k.range(n, "loop")
    out[i * n + j] = x[i * n + j] + x.load(i * n + j + 1, gate=(i * n + j + 1) < m * n, default=0.0)
    assert k.build().name == "ok"


def test_float_index_constant_and_python_truthiness_are_rejected():
    k, n = _k()
    x = k.param("x", dtypes.int32, n)
    i = k.range(n, "global")
    with pytest.raises(KernelError, match="float constant"):
        _ = x[i] + 1.5
    with pytest.raises(TypeError, match="no truth value"):
        bool(x[i] < 3)


def test_reduction_nested_in_a_reduction_over_the_same_range():
    k, n = _k()
    x = k.param("x", dtypes.float32, n * n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i, r = k.range(n, "global"), k.range(n, "reduce")
    out[i] = (x[i * n + r] * x[i * n + r].sum(r)).sum(r)
    with pytest.raises(KernelError, match="reduced inside a reduction over itself"):
        k.build()


def test_sibling_reductions_over_one_range_share_its_loop():
    from devicekit.ir.linearize import lower
    from devicekit.ir.ops import ALU, Ops
    from devicekit.render.renderer import Capabilities
    k, n = _k()
    x = k.param("x", dtypes.float32, n * n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i, r = k.range(n, "global"), k.range(n, "reduce")
    out[i] = x[i * n + r].sum(r) + x[i * n + r].max(r)
    lk = lower(k.build(), Capabilities(frozenset(dtypes.all()), ALU, core_split=True))
    assert sum(u.op is Ops.RANGE for u in lk.uops) == 2  # the global range and one shared reduce loop
    assert sum(u.op is Ops.DEFINE_ACC for u in lk.uops) == 2
