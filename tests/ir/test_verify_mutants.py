"""The verifier's refusals, each pinned to its exact words and the node it names (issue 38: ir/verify.py is
mutation-tested; docs/testing.md lists what survives). The builder refuses most malformed kernels before the verifier
sees them, so these assemble graphs by hand (a frontend, a transform or a fuzzer may) and hand them to `Kernel`,
which verifies whoever builds it: real kernels through the public IR, no mocks."""

from __future__ import annotations

import dataclasses

import pytest
from devicekit import ir
from devicekit.ir import KernelError, dtypes
from devicekit.ir.builder import Kernel
from devicekit.ir.ops import Ops
from devicekit.ir.uop import UOp
from devicekit.ir.verify import MAX_NESTED_REDUCTIONS, check_dimensions, scalar_use


def words(e: KernelError) -> str:
    """The message without the user site and node lines KernelError appends."""
    return str(e).split("\n")[0].split(" (built at ")[0]


def refusal(make) -> KernelError:
    with pytest.raises(KernelError) as e:
        make()
    return e.value


def substitute(root: UOp, mapping: dict[UOp, UOp]) -> UOp:
    """`root` with every node in `mapping` replaced, bottom-up (UOps are immutable and shared)."""
    new: dict[UOp, UOp] = {}
    for u in root.toposort():
        if u in mapping:
            new[u] = mapping[u]
        else:
            src = tuple(new[s] for s in u.src)
            new[u] = u if src == u.src else u.replace(src=src)
    return new[root]


def assemble(k: Kernel, sink: UOp, **kw) -> Kernel:
    """A Kernel from `k`'s signature and another graph: verified on construction."""
    return Kernel(k.name, sink, kw.get("params", k.params), kw.get("vars", k.vars),
                  kw.get("param_uops", k.param_uops), kw.get("var_uops", k.var_uops))


def node(k: Kernel, op: Ops, pick=lambda u: True) -> UOp:
    return next(u for u in k.uops() if u.op is op and pick(u))


def axpy(kind: str = "global") -> Kernel:
    """out[i] = x[i] + sum_r x[r], with n in [1, 64]."""
    k = ir.KernelBuilder("axpy")
    n = k.var("n", 1, 64)
    x = k.param("x", dtypes.float32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i, r = k.range(n, kind), k.range(n, "reduce")
    out[i] = x[i] + x[r].sum(r)
    return k.build()


# ---- node kinds: dtypes, foreign nodes, indices, stores, casts --------------------------------------------------------

def test_an_alu_node_of_the_wrong_dtype_names_both():
    k = axpy()
    add = node(k, Ops.ADD)
    bad = UOp(Ops.ADD, dtypes.float16, add.src)
    e = refusal(lambda: assemble(k, substitute(k.sink, {add: bad})))
    assert words(e) == "ADD should have dtype dtypes.float32, has dtypes.float16"
    assert e.node is bad and "test_verify_mutants.py" in str(e)


def test_a_param_of_another_kernel_is_refused():
    k = axpy()
    x = k.param_uops[0]
    other = UOp(Ops.PARAM, x.dtype, (UOp.const(dtypes.index, 8),), x.arg)  # same slot and name, another size
    e = refusal(lambda: assemble(k, substitute(k.sink, {x: other})))
    assert words(e) == "param x belongs to another kernel" and e.node is other


def test_a_var_of_another_kernel_is_refused():
    k = ir.KernelBuilder("v")
    n = k.var("n", 1, 64)
    out = k.param("out", dtypes.int64, 64, writable=True)
    i = k.range(64, "global")
    out[i] = i + n
    kk = k.build()
    m = UOp(Ops.VAR, dtypes.index, (), ("m", 1, 64))
    e = refusal(lambda: assemble(kk, substitute(kk.sink, {kk.var_uops[0]: m})))
    assert words(e) == "var m belongs to another kernel" and e.node is m


def test_a_scalar_of_another_kernel_is_refused():
    k = ir.KernelBuilder("s")
    s = k.scalar("s", dtypes.float32)
    out = k.param("out", dtypes.float32, 8, writable=True)
    i = k.range(8, "global")
    out[i] = s + 1.0
    kk = k.build()
    t = UOp(Ops.SCALAR, dtypes.float32, (), "t")
    e = refusal(lambda: assemble(kk, substitute(kk.sink, {kk.var_uops[0]: t})))
    assert words(e) == "scalar t belongs to another kernel" and e.node is t


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int32.vec(2), dtypes.bool])
def test_an_index_must_be_a_scalar_integer(dt):
    k = axpy()
    ix = node(k, Ops.INDEX, lambda u: u.src[0].arg[1] == "x" and u.src[1].arg[1] == "global")
    bad_i = UOp(Ops.CONST, dt, (), 1.0) if dt == dtypes.float32 else \
        UOp(Ops.CONST, dt, (), True) if dt == dtypes.bool else UOp.const(dtypes.int32, 1).broadcast(2) \
        if hasattr(UOp, "broadcast") else UOp(Ops.VECTORIZE, dt, (UOp.const(dtypes.int32, 1),) * 2)
    bad = ix.replace(src=(ix.src[0], bad_i))
    e = refusal(lambda: assemble(k, substitute(k.sink, {ix: bad})))
    assert words(e) == f"index must be a scalar integer, got {dt}" and e.node is bad_i


def test_a_store_to_a_read_only_param_by_hand():
    k = axpy()
    st = k.sink.src[0]
    x = k.param_uops[0]
    bad = st.replace(src=(st.src[0].replace(src=(x, *st.src[0].src[1:])), st.src[1]))
    e = refusal(lambda: assemble(k, k.sink.replace(src=(bad,))))
    assert words(e) == "store to read-only param x" and e.node is bad


def test_a_store_of_another_dtype_by_hand():
    k = axpy()
    st = k.sink.src[0]
    val = st.src[1].cast(dtypes.float16)
    bad = st.replace(src=(st.src[0], val))
    e = refusal(lambda: assemble(k, k.sink.replace(src=(bad,))))
    assert words(e) == "store of dtypes.float16 into dtypes.float32 buffer" and e.node is bad


def test_stores_into_a_local_array_and_a_writable_param_are_accepted():
    k = ir.KernelBuilder("loc")
    out = k.param("out", dtypes.float32, 64, writable=True)
    t = k.local("t", dtypes.float32, 64)
    i = k.range(64, "local")
    t[i] = 2.0
    k.barrier()
    out[i] = t[63 - i]
    assert k.build().name == "loc"


@pytest.mark.parametrize("op, src_dt, dt", [(Ops.CAST, dtypes.float32.vec(2), dtypes.float32),
                                            (Ops.BITCAST, dtypes.int32.vec(2), dtypes.int64)])
def test_a_cast_that_changes_the_number_of_lanes(op, src_dt, dt):
    k = axpy()
    ld = node(k, Ops.LOAD, lambda u: u.src[0].src[1].arg[1] == "global")
    lane = UOp.const(src_dt.scalar(), 1.0 if src_dt.scalar().is_float else 1)
    vec = UOp(Ops.VECTORIZE, src_dt, (lane, lane))
    bad = UOp(op, dt, (vec,))
    val = bad if dt == dtypes.float32 else bad.cast(dtypes.float32)
    add = node(k, Ops.ADD)
    e = refusal(lambda: assemble(k, substitute(k.sink, {add: UOp(Ops.ADD, dtypes.float32, (ld, val))})))
    assert words(e) == f"{op.name} changes the number of lanes" and e.node is bad


def test_casts_that_keep_their_lanes_are_accepted():
    k = ir.KernelBuilder("c")
    x = k.param("x", dtypes.int32, 8)
    out = k.param("out", dtypes.float32, 8, writable=True)
    i = k.range(8, "global")
    out[i] = x[i].bitcast(dtypes.float32) + x[i].cast(dtypes.float32)
    assert k.build().name == "c"


# ---- reductions ---------------------------------------------------------------------------------------------------

def _reduce(k: Kernel) -> UOp:
    return node(k, Ops.REDUCE)


def test_a_reduce_op_other_than_add_max_mul():
    k = axpy()
    red = _reduce(k)
    bad = red.replace(arg=Ops.SUB)
    e = refusal(lambda: assemble(k, substitute(k.sink, {red: bad})))
    assert words(e) == "reduce op must be ADD, MAX or MUL, got Ops.SUB" and e.node is bad


@pytest.mark.parametrize("op", [Ops.ADD, Ops.MAX, Ops.MUL])
def test_each_reduce_op_is_accepted(op):
    k = axpy()
    red = _reduce(k)
    assert assemble(k, substitute(k.sink, {red: red.replace(arg=op)})).name == "axpy"


def test_a_reduce_over_bool_values():
    k = ir.KernelBuilder("b")
    x = k.param("x", dtypes.int32, 8)
    out = k.param("out", dtypes.int32, 1, writable=True)
    r = k.range(8, "reduce")
    out[0] = (x[r] > 0).cast(dtypes.int32).sum(r)
    kk = k.build()
    red = _reduce(kk)
    cmp = red.src[0].src[0]
    bad = UOp(Ops.REDUCE, dtypes.bool, (cmp, *red.src[1:]), Ops.MAX)
    e = refusal(lambda: assemble(kk, substitute(kk.sink, {red: bad.cast(dtypes.int32)})))
    assert words(e) == "reduce over bool values: cast to an integer type first" and e.node is bad


def test_a_reduce_over_something_that_is_not_a_range():
    k = axpy()
    red = _reduce(k)
    bad = red.replace(src=(red.src[0], k.var_uops[0]))
    e = refusal(lambda: assemble(k, substitute(k.sink, {red: bad})))
    assert words(e) == "reduce over something that is not a range" and e.node is bad


def test_a_second_range_of_a_reduce_is_checked_too():
    k = ir.KernelBuilder("two")
    x = k.param("x", dtypes.float32, 64)
    out = k.param("out", dtypes.float32, 1, writable=True)
    r, s = k.range(8, "reduce"), k.range(8, "reduce")
    out[0] = x[r * 8 + s].sum(r).sum(s)
    kk = k.build()
    inner = next(u for u in kk.uops() if u.op is Ops.REDUCE and u.src[0].op is not Ops.REDUCE)
    outer = next(u for u in kk.uops() if u.op is Ops.REDUCE and u.src[0].op is Ops.REDUCE)
    both = UOp(Ops.REDUCE, dtypes.float32, (inner.src[0], inner.src[1], outer.src[1]), Ops.ADD)
    assert assemble(kk, substitute(kk.sink, {outer: both})).name == "two"  # one REDUCE over r and s
    bad = UOp(Ops.REDUCE, dtypes.float32, (inner.src[0], inner.src[1], UOp.const(dtypes.index, 3)), Ops.ADD)
    e = refusal(lambda: assemble(kk, substitute(kk.sink, {outer: bad})))
    assert words(e) == "reduce over something that is not a range" and e.node is bad
    unused = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, 8),), (7, "reduce"))
    bad = UOp(Ops.REDUCE, dtypes.float32, (inner.src[0], inner.src[1], outer.src[1], unused), Ops.ADD)
    e = refusal(lambda: assemble(kk, substitute(kk.sink, {outer: bad})))
    assert words(e) == "reduce over range 7 that its expression does not use" and e.node is bad


def test_a_reduce_over_a_range_its_expression_does_not_use():
    k = ir.KernelBuilder("u")
    x = k.param("x", dtypes.float32, 8)
    out = k.param("out", dtypes.float32, 8, writable=True)
    i, r = k.range(8, "global"), k.range(8, "reduce")
    out[i] = x[i].sum(r)
    e = refusal(k.build)
    assert words(e) == "reduce over range 1 that its expression does not use"
    assert e.node.op is Ops.REDUCE


@pytest.mark.parametrize("kind", ["global", "local"])
def test_a_reduce_over_a_lane_range(kind):
    k = axpy()
    red = _reduce(k)
    r = red.src[1]
    lane = r.replace(arg=(r.arg[0], kind))
    e = refusal(lambda: assemble(k, substitute(k.sink, {r: lane})))
    assert words(e) == f"reduce over a {kind} range: use kind='reduce' (or loop/unroll)" and e.node is lane


@pytest.mark.parametrize("kind", ["loop", "unroll"])
def test_a_reduce_over_a_loop_or_unroll_range_is_accepted(kind):
    k = axpy()
    r = _reduce(k).src[1]
    assert assemble(k, substitute(k.sink, {r: r.replace(arg=(r.arg[0], kind))})).name == "axpy"


def test_a_reduction_nested_in_one_over_the_same_range_names_it():
    k = ir.KernelBuilder("nest")
    n = k.var("n", 1, 64)
    x = k.param("x", dtypes.float32, n * n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i, r = k.range(n, "global"), k.range(n, "reduce")
    out[i] = (x[i * n + r] * x[i * n + r].sum(r)).sum(r)
    e = refusal(k.build)
    assert words(e) == "range 1 is reduced inside a reduction over itself: build one range per nested reduction"
    assert e.node.op is Ops.REDUCE  # the outer one, holding the inner
    assert any(u.op is Ops.REDUCE for u in e.node.src[0].toposort())


def test_the_outer_reduction_seen_first_is_caught_too():
    """The same nesting with the outer REDUCE first in the node order: the other side of the check."""
    k = ir.KernelBuilder("nest2")
    x = k.param("x", dtypes.float32, 64)
    out = k.param("out", dtypes.float32, 8, writable=True)
    i, r = k.range(8, "global"), k.range(8, "reduce")
    inner = x[i * 8 + r].sum(r)
    out[i] = (x[i * 8 + r] + inner).max(r)
    e = refusal(k.build)
    assert "is reduced inside a reduction over itself" in words(e)


def test_sibling_reductions_over_one_range_are_accepted():
    k = ir.KernelBuilder("sib")
    x = k.param("x", dtypes.float32, 64)
    out = k.param("out", dtypes.float32, 8, writable=True)
    i, r = k.range(8, "global"), k.range(8, "reduce")
    out[i] = x[i * 8 + r].sum(r) + x[i * 8 + r].max(r) + x[i * 8 + r].sum(r) * 2.0
    assert k.build().name == "sib"


def test_a_reduced_range_used_outside_its_reduction():
    k = ir.KernelBuilder("scope")
    x = k.param("x", dtypes.float32, 64)
    out = k.param("out", dtypes.float32, 8, writable=True)
    i, r = k.range(8, "global"), k.range(8, "reduce")
    out[i] = x[i * 8 + r].sum(r) + x[r]
    e = refusal(k.build)
    assert words(e) == "range 1 used outside its scope: it is reduced elsewhere"
    assert e.node.op is Ops.STORE


def test_a_loop_range_reduced_and_used_outside():
    k = axpy()
    red = _reduce(k)
    r = red.src[1]
    loop = r.replace(arg=(r.arg[0], "loop"))
    k2 = assemble(k, substitute(k.sink, {r: loop}))
    st = k2.sink.src[0]
    ld = node(k2, Ops.LOAD, lambda u: u.src[0].src[1] is loop)
    bad = st.replace(src=(st.src[0], st.src[1] + ld))
    e = refusal(lambda: assemble(k2, k2.sink.replace(src=(bad,))))
    assert words(e) == "range 1 used outside its scope: it is reduced elsewhere" and e.node is bad


def test_a_reduce_range_no_reduction_consumes():
    k = ir.KernelBuilder("free")
    x = k.param("x", dtypes.float32, 8)
    out = k.param("out", dtypes.float32, 8, writable=True)
    r = k.range(8, "reduce")
    out[r] = x[r]
    e = refusal(k.build)
    assert words(e) == "range 0 used outside its scope: it is a reduce range that no reduction consumes"
    assert e.node.op is Ops.STORE


def test_reductions_nest_up_to_the_limit():
    def nested(depth: int) -> ir.KernelBuilder:
        k = ir.KernelBuilder("deep")
        x = k.param("x", dtypes.float32, 4)
        out = k.param("out", dtypes.float32, 1, writable=True)
        v = None
        for _ in range(depth):
            r = k.range(4, "reduce")
            v = (x[r] if v is None else x[r] * v).sum(r)
        out[0] = v
        return k
    assert nested(MAX_NESTED_REDUCTIONS).build().name == "deep"
    e = refusal(nested(MAX_NESTED_REDUCTIONS + 1).build)
    assert words(e) == (f"reductions nested {MAX_NESTED_REDUCTIONS + 1} deep: devicekit lowers at most "
                        f"{MAX_NESTED_REDUCTIONS} nested reductions (a reduction inside the expression of another); "
                        "split the kernel")
    assert e.node.op is Ops.REDUCE


def test_many_sibling_reductions_are_not_nested():
    k = ir.KernelBuilder("wide")
    x = k.param("x", dtypes.float32, 4)
    out = k.param("out", dtypes.float32, 1, writable=True)
    v = None
    for _ in range(MAX_NESTED_REDUCTIONS + 2):
        r = k.range(4, "reduce")
        v = x[r].sum(r) if v is None else v + x[r].sum(r)
    out[0] = v
    assert k.build().name == "wide"


# ---- provably out of bounds: flat indices -------------------------------------------------------------------------

def _flat(expr, lo: int = 2, size=None) -> KernelError:
    k = ir.KernelBuilder("oob")
    n = k.var("n", lo, 64)
    x = k.param("x", dtypes.float32, n if size is None else size)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = expr(k, x, i, n)
    return refusal(k.build)


def test_below_names_the_minimum_and_the_var_values():
    e = _flat(lambda k, x, i, n: x[i - 1])  # (-1 .. n - 2): exact, below, though most of it is inside
    assert words(e) == "index into x can be negative (min -1) with n=2" and e.node.op is Ops.INDEX
    assert e.node.src[0].arg[1] == "x"


def test_above_names_the_reach_and_the_size():
    e = _flat(lambda k, x, i, n: x[i + 1])  # (1 .. n): exact, above, though most of it is inside
    assert words(e) == "index into x out of bounds: reaches 2, size is 2 with n=2" and e.node.op is Ops.INDEX


def test_an_inexact_interval_wholly_outside_is_refused():
    """A triangular range's interval is not exact (its extremes need not be reached), but one wholly past an edge
    is still refused: j in [i + 1, n)."""
    def above(k, x, i, n):
        j = k.range(i + 1, n, "loop")
        return x[j + n - 1]
    e = _flat(above)
    assert words(e).startswith("index into x out of bounds: reaches ") and words(e).endswith(", size is 2 with n=2")

    def below(k, x, i, n):
        j = k.range(i + 1, n, "loop")
        return x[j - n]
    e = _flat(below)
    assert words(e).startswith("index into x can be negative (min ") and words(e).endswith(") with n=2")


def test_an_inexact_interval_that_only_may_leave_is_a_run_time_check():
    k = ir.KernelBuilder("tri")
    n = k.var("n", 2, 64)
    x = k.param("x", dtypes.float32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    j = k.range(i + 1, n, "loop")
    out[i] = x[j - i - 1] + x[j]  # inexact (-n + 2 .. n - 1): in bounds in fact, unproven
    assert k.build().name == "tri"


def test_the_edges_themselves_are_inside():
    k = ir.KernelBuilder("edge")
    x = k.param("x", dtypes.float32, 8)
    out = k.param("out", dtypes.float32, 8, writable=True)
    i = k.range(8, "global")
    out[i] = x[0] + x[7] + x[7 - i] + x[i]
    assert k.build().name == "edge"


def test_without_vars_the_message_has_no_values():
    def make(expr):
        k = ir.KernelBuilder("const")
        x = k.param("x", dtypes.float32, 8)
        out = k.param("out", dtypes.float32, 8, writable=True)
        i = k.range(8, "global")
        out[i] = expr(x, i)
        return refusal(k.build)
    assert words(make(lambda x, i: x[i + 1])) == "index into x out of bounds: reaches 8, size is 8"
    assert words(make(lambda x, i: x[i - 3])) == "index into x can be negative (min -3)"


def test_two_vars_are_named_in_order():
    k = ir.KernelBuilder("two")
    m, n = k.var("m", 1, 8), k.var("n", 1, 8)
    x = k.param("x", dtypes.float32, m * n)
    out = k.param("out", dtypes.float32, m * n, writable=True)
    i = k.range(m * n, "global")
    out[i] = x[i + 1]
    assert words(refusal(k.build)) == "index into x out of bounds: reaches 1, size is 1 with m=1, n=1"


def test_a_local_array_is_named_and_sized_by_its_declaration():
    k = ir.KernelBuilder("loc")
    out = k.param("out", dtypes.float32, 64, writable=True)
    t = k.local("tile", dtypes.float32, 64)
    i = k.range(64, "local")
    t[i] = 1.0
    k.barrier()
    out[i] = t[i + 1]
    e = refusal(k.build)
    assert words(e) == "index into tile out of bounds: reaches 64, size is 64" and e.node.src[0].op is Ops.DEFINE_LOCAL
    k = ir.KernelBuilder("loc2")
    out = k.param("out", dtypes.float32, 64, writable=True)
    t = k.local("tile", dtypes.float32, 64)
    i = k.range(64, "local")
    t[i] = 1.0
    k.barrier()
    out[i] = t[i - 2]
    assert words(refusal(k.build)) == "index into tile can be negative (min -2)"


def test_an_empty_range_skips_only_its_own_indexes():
    """With n = 0 the range is empty (its indexes never run); a later index that runs is still checked there."""
    k = ir.KernelBuilder("empty")
    n = k.var("n", 0, 8)
    x = k.param("x", dtypes.float32, n)
    y = k.param("y", dtypes.float32, 4)
    out = k.param("out", dtypes.float32, n, writable=True)
    out2 = k.param("out2", dtypes.float32, 4, writable=True)
    i = k.range(n, "global")
    out[i] = x[i]
    j = k.range(4, "loop")
    out2[j] = y[j + 1]
    e = refusal(k.build)
    assert words(e) == "index into y out of bounds: reaches 4, size is 4 with n=0"


def test_a_gated_access_is_left_to_its_gate():
    k = ir.KernelBuilder("gated")
    n = k.var("n", 1, 64)
    x = k.param("x", dtypes.float32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x.load(i + 1, gate=i + 1 < n, default=0.0) + x.load(i - 1, gate=i >= 1, default=0.0)
    assert k.build().name == "gated"


# ---- provably out of bounds: each dimension of a shaped access -------------------------------------------------------

def _shaped(expr, gate_first: bool = False) -> KernelError:
    k = ir.KernelBuilder("dims")
    m, n = k.var("m", 2, 8), k.var("n", 2, 8)
    a = k.param("A", dtypes.float32, shape=(m, n))
    out = k.param("out", dtypes.float32, m, writable=True)
    i = k.range(m, "global")
    v = a.load((i, 0), gate=i < m, default=0.0) if gate_first else 0.0
    out[i] = expr(a, i, m, n) + v
    return refusal(k.build)


def test_a_component_past_its_dimension_is_refused_though_the_flat_index_is_inside():
    e = _shaped(lambda a, i, m, n: a[0, n])  # A[0, n] is A[1, 0]
    assert words(e) == "index 1 into A reaches 2, dimension 1 has 2 with m=2, n=2"
    assert e.node is not None and e.node.op is Ops.VAR and e.node.arg[0] == "n"  # the component named
    e = _shaped(lambda a, i, m, n: a[i + 1, 0])
    assert words(e) == "index 0 into A reaches 2, dimension 0 has 2 with m=2, n=2"
    assert e.node is not None and e.node.op is Ops.ADD


def test_a_negative_component_is_refused_naming_its_minimum():
    e = _shaped(lambda a, i, m, n: a[1, i - 1])
    assert words(e) == "index 1 into A can be negative (min -1) with m=2, n=2"
    assert e.node is not None and e.node.op in (Ops.ADD, Ops.SUB)  # the component, not the flat access


def test_a_gated_component_before_a_bad_one_does_not_hide_it():
    e = _shaped(lambda a, i, m, n: a[0, n], gate_first=True)
    assert words(e) == "index 1 into A reaches 2, dimension 1 has 2 with m=2, n=2"


def test_gated_and_in_range_components_are_accepted():
    k = ir.KernelBuilder("ok")
    m, n = k.var("m", 1, 8), k.var("n", 1, 8)
    a = k.param("A", dtypes.float32, shape=(m, n))
    out = k.param("out", dtypes.float32, shape=(m, n), writable=True)
    i, j = k.range(m, "global"), k.range(n, "loop")
    out[i, j] = a[i, j] + a[m - 1 - i, n - 1 - j] + a.load((i, j + 1), gate=j + 1 < n, default=0.0)
    assert k.build().name == "ok"


def test_check_dimensions_directly():
    """The builder's records (param, dimension, component, extent, gated) against var specs."""
    from devicekit.render.program_spec import VarSpec
    n = ir.KernelBuilder("d").var("n", 3, 5)
    kk_vars = (VarSpec("n", 3, 5, None, None, None, None),)
    i = UOp(Ops.RANGE, dtypes.index, (n,), (0, "global"))
    check_dimensions([("B", 0, i, n, False)], kk_vars)  # 0 .. n - 1 < n
    e = refusal(lambda: check_dimensions([("B", 0, i, n, True), ("B", 1, i + 1, n, False)], kk_vars))
    assert words(e) == "index 1 into B reaches 3, dimension 1 has 3 with n=3"
    e = refusal(lambda: check_dimensions([("B", 2, i - n, n, False)], kk_vars))
    assert words(e) == "index 2 into B can be negative (min -3) with n=3"


# ---- races between lanes ------------------------------------------------------------------------------------------

def _race() -> ir.KernelBuilder:
    k = ir.KernelBuilder("race")
    n = k.var("n", 1, 64)
    x = k.param("x", dtypes.float32, n + 8, writable=True)
    i = k.range(n, "global")
    x[i] = x[i + 1] * 2.0
    return k


def test_a_race_names_the_lanes_the_range_and_the_statement():
    e = refusal(_race().build)
    assert words(e) == ("race on x: lane i of global range 0 loads the element of x that lane i+1 stores "
                        "(statement 0); a lane may only read what it writes itself, or share through local memory and "
                        "a barrier")
    assert e.node.op is Ops.LOAD and e.node.src[0].src[1].op is Ops.ADD


def test_a_race_backwards_and_with_a_stride():
    k = ir.KernelBuilder("back")
    x = k.param("x", dtypes.float32, 64, writable=True)
    i = k.range(1, 16, "global")
    x[2 * i] = x[2 * i - 2]
    assert "lane i of global range 0 loads the element of x that lane i-1 stores" in words(refusal(k.build))
    k = ir.KernelBuilder("local")
    x = k.param("x", dtypes.float32, 64, writable=True)
    i = k.range(16, "local")
    x[3 * i] = x[3 * i + 6]
    assert "lane i of local range 0 loads the element of x that lane i+2 stores" in words(refusal(k.build))


def test_not_races():
    """Same lane, another param, a loop range, an offset no lane reaches, a stride that skips it, gated accesses."""
    def ok(body, size=64):
        k = ir.KernelBuilder("ok")
        x = k.param("x", dtypes.float32, size, writable=True)
        y = k.param("y", dtypes.float32, size)
        body(k, x, y)
        return k.build()
    ok(lambda k, x, y: x.store((i := k.range(8, "global")), x[i] + y[i + 1]))
    ok(lambda k, x, y: x.store((i := k.range(8, "loop")), x[i + 1]))
    ok(lambda k, x, y: x.store((i := k.range(8, "global")), x[i + 8]))  # lane i + 8 does not exist
    ok(lambda k, x, y: x.store(2 * (i := k.range(8, "global")), x[2 * i + 1]))  # odd elements are never stored
    ok(lambda k, x, y: x.store((i := k.range(8, "global")), x.load(i + 1, gate=i < 7, default=0.0)))
    ok(lambda k, x, y: x.store((i := k.range(8, "global")), x[i + 1], gate=i < 0))
    ok(lambda k, x, y: x.store((i := k.range(8, "global")) + (j := k.range(8, "loop")) * 0, x[i + j]))


def test_a_race_is_found_past_a_store_it_cannot_analyse():
    k = ir.KernelBuilder("two")
    x = k.param("x", dtypes.float32, 64, writable=True)
    y = k.param("y", dtypes.float32, 64, writable=True)
    i = k.range(8, "global")
    y[i * i] = 1.0  # not affine: skipped
    x[i] = x[i + 1]
    assert words(refusal(k.build)).startswith("race on x: lane i of global range 0 loads the element of x that lane "
                                              "i+1 stores (statement 1)")


def test_a_race_is_found_past_a_load_it_cannot_analyse_or_of_another_buffer():
    k = ir.KernelBuilder("mix")
    x = k.param("x", dtypes.float32, 64, writable=True)
    y = k.param("y", dtypes.float32, 64)
    i = k.range(8, "global")
    x[i] = y[i + 1] + x[i * i] + x[2 * i] + x[i + 1]
    assert "lane i+1 stores" in words(refusal(k.build))


# ---- scalars: values, never sizes, indices or bounds --------------------------------------------------------------

def _scalars():
    k = ir.KernelBuilder("sc")
    n = k.var("n", 1, 64)
    return k, n, k.scalar("alpha", dtypes.float32), k.scalar("m", dtypes.int32)


def test_scalar_use_words_for_an_int_and_a_float():
    k, n, a, m = _scalars()
    e = refusal(lambda: scalar_use(m + 1, "in an index into x"))
    assert words(e) == ("scalar m (int32) used in an index into x: a k.scalar is a value for expressions, never a "
                        "size, index or range bound; an int that is an index is a var: k.var('m', lo, hi), checked "
                        "against its bounds at launch")
    assert e.node is m
    e = refusal(lambda: scalar_use(m * 2, "as a range's end"))
    assert words(e).endswith("; an int that sizes or bounds something is a var: k.var('m', lo, hi), checked against "
                             "its bounds at launch")
    e = refusal(lambda: scalar_use(a * 2.0, "as a range's end"))
    assert words(e) == ("scalar alpha (float32) used as a range's end: a k.scalar is a value for expressions, never a "
                        "size, index or range bound") and e.node is a
    scalar_use(n + 1, "as a range's end")  # a var is fine
    memo: dict = {}
    scalar_use(n * 2, "as a range's end", memo)
    assert refusal(lambda: scalar_use(n + m, "in the size of param y", memo)).node is m


def _sc_kernel():
    """A kernel with an int scalar m, to put where the builder would refuse it: the verifier must refuse it too."""
    k = ir.KernelBuilder("hand")
    n = k.var("n", 1, 64)
    m = k.scalar("m", dtypes.int32)
    x = k.param("x", dtypes.float32, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    t = k.local("t", dtypes.float32, 64)
    i = k.range(n, "global")
    j = k.range(1, n, "loop")
    t[j] = x[i]
    k.barrier()
    out[i] = t[j] + m.cast(dtypes.float32)
    return k.build(), m


def test_the_verifier_refuses_a_scalar_index_range_or_size_built_by_hand():
    kk, m = _sc_kernel()
    mi = m.cast(dtypes.index)
    ix = node(kk, Ops.INDEX, lambda u: u.src[0].op is Ops.PARAM and u.src[0].arg[1] == "x")
    e = refusal(lambda: assemble(kk, substitute(kk.sink, {ix: ix.replace(src=(ix.src[0], mi))})))
    assert words(e).startswith("scalar m (int32) used in an index into x: ") and e.node is m
    assert "an int that is an index is a var" in words(e)
    lx = node(kk, Ops.INDEX, lambda u: u.src[0].op is Ops.DEFINE_LOCAL and u.src[1].op is Ops.RANGE)
    e = refusal(lambda: assemble(kk, substitute(kk.sink, {lx: lx.replace(src=(lx.src[0], mi))})))
    assert words(e).startswith("scalar m (int32) used in an index into t: ") and e.node is m
    j = node(kk, Ops.RANGE, lambda u: len(u.src) == 2)
    e = refusal(lambda: assemble(kk, substitute(kk.sink, {j: j.replace(src=(mi, j.src[1]))})))
    assert words(e).startswith("scalar m (int32) used as a range's start: ")
    e = refusal(lambda: assemble(kk, substitute(kk.sink, {j: j.replace(src=(j.src[0], mi))})))
    assert words(e).startswith("scalar m (int32) used as a range's end: ")
    i = node(kk, Ops.RANGE, lambda u: u.arg[1] == "global")
    e = refusal(lambda: assemble(kk, substitute(kk.sink, {i: i.replace(src=(mi,))})))
    assert words(e).startswith("scalar m (int32) used as a range's end: ")
    out = kk.param_uops[1]
    bad = out.replace(src=(mi,))
    ps = tuple(dataclasses.replace(p, size=mi) if p.name == "out" else p for p in kk.params)
    e = refusal(lambda: assemble(kk, substitute(kk.sink, {out: bad}), params=ps,
                                 param_uops=(kk.param_uops[0], bad)))
    assert words(e).startswith("scalar m (int32) used in the size of param out: ") and e.node is m


def test_the_verifier_refuses_a_scalar_in_a_var_bound_built_by_hand():
    k = ir.KernelBuilder("rel")
    n = k.var("n", 1, 64)
    k.var("j", 0, n)
    m = k.scalar("m", dtypes.int32)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = m.cast(dtypes.float32)
    kk = k.build()
    for what in ("lo", "hi"):
        v = next(v for v in kk.vars if v.name == "j")
        bad = dataclasses.replace(v, **{f"{what}_rel": m.cast(dtypes.index)})
        vs = tuple(bad if x.name == "j" else x for x in kk.vars)
        e = refusal(lambda vs=vs: assemble(kk, kk.sink, vars=vs))
        assert words(e).startswith(f"scalar m (int32) used in the {what} bound of var j: ") and e.node is m


@pytest.mark.parametrize("order", ["ij", "ji"])
def test_a_race_on_a_second_lane_range_past_one_whose_step_leaves_it(order):
    """x[i + 4j] = x[i + 4j + 4]: over i the offset 4 is past the range (no lane i + 4), over j it is lane j + 1."""
    for spell in (lambda i, j: i + 4 * j, lambda i, j: 4 * j + i):
        k = ir.KernelBuilder("two")
        x = k.param("x", dtypes.float32, 32, writable=True)
        if order == "ij":
            i, j = k.range(4, "global"), k.range(4, "global")
        else:
            j, i = k.range(4, "global"), k.range(4, "global")
        x[spell(i, j)] = x[spell(i, j) + 4]
        e = refusal(k.build)
        assert f"lane i of global range {j.arg[0]} loads the element of x that lane i+1 stores" in words(e)
