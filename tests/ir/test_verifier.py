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
    with pytest.raises(KernelError, match="index into x is a float32 value: an index must be an integer"):
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
    lk = lower(k.build(), Capabilities(dtypes=frozenset(dtypes.all()), ops=ALU, core_split=True))
    assert sum(u.op is Ops.RANGE for u in lk.uops) == 2  # the global range and one shared reduce loop
    assert sum(u.op is Ops.DEFINE_ACC for u in lk.uops) == 2


def test_var_bounds_outside_the_index_dtype_are_refused_at_build():
    """hi = 2**64 was accepted and the CPU wrapped 2**63 to -2**63 (issue 11, item 6)."""
    from devicekit.ir.uop import KernelError
    for lo, hi in ((0, 2**64), (0, 2**63), (-(2**63) - 1, 0)):
        k = ir.KernelBuilder("big")
        with pytest.raises(KernelError, match="outside the var's dtype"):
            k.var("n", lo, hi)
    k = ir.KernelBuilder("edge")
    k.var("n", -(2**63), 2**63 - 1)  # the dtype's own limits are fine
    with pytest.raises(KernelError, match="must be an int"):
        k.var("m", 0, 10.5)


def test_a_hand_built_signature_must_match_its_graph():
    """A ParamSpec whose size or writable flag disagrees with its PARAM node overflowed the heap or dropped a store
    on the llvm pair (issue 11, item 7): verification on construction now compares them."""
    import dataclasses

    from devicekit.ir.uop import KernelError
    k = ir.KernelBuilder("sig")
    x = k.param("x", dtypes.float32, 8)
    out = k.param("out", dtypes.float32, 8, writable=True)
    i = k.range(8, "global")
    out[i] = x[i]
    kern = k.build()
    p0, p1 = kern.params
    with pytest.raises(KernelError, match="size in the signature"):
        dataclasses.replace(kern, params=(dataclasses.replace(p0, size=1 << 20), p1))
    with pytest.raises(KernelError, match="writable in the signature"):
        dataclasses.replace(kern, params=(p0, dataclasses.replace(p1, writable=False)))
    with pytest.raises(KernelError, match="writable in the signature"):
        dataclasses.replace(kern, params=(dataclasses.replace(p0, writable=True), p1))
