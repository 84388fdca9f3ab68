"""The builder API: hash-consing, signatures, symbolic sizes, content keys."""

import pickle

import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import Ops, UOp, dtypes, sym_eval


def saxpy(name="saxpy"):
    k = ir.KernelBuilder(name)
    n = k.var("n", lo=1, hi=2**31 - 1)
    x = k.param("x", dtypes.float32, size=n)
    y = k.param("y", dtypes.float32, size=n)
    out = k.param("out", dtypes.float32, size=n, writable=True)
    i = k.range(n, kind="global")
    out[i] = x[i] * 2.0 + y[i]
    return k.build()


def test_uops_are_hash_consed_and_immutable():
    a = UOp.const(dtypes.int32, 3)
    assert a is UOp.const(dtypes.int32, 3)
    assert (a + 1) is (a + 1)
    with pytest.raises(AttributeError):
        a.arg = 4


def test_signature_keeps_declaration_order():
    k = saxpy()
    assert [p.name for p in k.params] == ["x", "y", "out"]
    assert [p.writable for p in k.params] == [False, False, True]
    assert [(v.name, v.lo, v.hi) for v in k.vars] == [("n", 1, 2**31 - 1)]


def test_key_is_stable_across_builds_and_differs_by_content():
    assert saxpy().key == saxpy().key
    assert saxpy().key != saxpy("other").key


def test_symbolic_sizes_evaluate_with_c_division():
    k = ir.KernelBuilder("s")
    m, n = k.var("m"), k.var("n")
    assert sym_eval(m * n + 3, {"m": 4, "n": 5}) == 23
    assert sym_eval((m - 7) // n, {"m": 0, "n": 2}) == -3  # truncates toward zero
    with pytest.raises(KeyError, match="no value given for var 'n'"):
        sym_eval(n, {})


def test_uops_pickle_back_to_the_same_node():
    k = saxpy()
    assert pickle.loads(pickle.dumps(k.sink)) is k.sink


def test_vector_values_and_lanes():
    v = ir.vectorize(UOp.const(dtypes.float32, 1.0), 2.0, 3.0, 4.0)
    assert v.dtype == dtypes.float32.vec(4)
    assert v.gep(2).op is Ops.GEP and v[2].arg == 2
    with pytest.raises(ir.KernelError):
        v.gep(4)


def test_type_rules():
    f = UOp.const(dtypes.float32, 1.0)
    i = UOp.const(dtypes.int32, 1)
    assert (f < 2.0).dtype == dtypes.bool
    assert (i // 2).dtype == dtypes.int32
    with pytest.raises(ir.KernelError, match="needs a float"):
        ir.exp2(i)
    with pytest.raises(ir.KernelError, match="use // for integer division"):
        _ = i / 2
    with pytest.raises(ir.KernelError, match="integer operands"):
        _ = f % 2.0


def test_numpy_bridge_for_bfloat16():
    from devicekit.ir.dtypes import bf16_to_f32, f32_to_bf16
    x = np.array([1.0, 1.00390625, -2.5, np.inf, 3.1415926], np.float32)
    back = bf16_to_f32(f32_to_bf16(x))
    assert back[0] == 1.0 and back[2] == -2.5 and np.isinf(back[3])
    assert abs(back[4] - 3.140625) < 1e-6  # round to nearest even
    assert np.isnan(bf16_to_f32(f32_to_bf16(np.array([np.nan], np.float32))))[0]
