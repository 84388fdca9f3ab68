"""The widened reference (devicekit.reference.wide) and the fuzzer's rule for a compiler that reassociates
(`Compiler.reassociates`, WGSL's drivers): an element matches the exact reference or the float64 one. Before it,
lavapipe's folding of `(x * -1.7e38) * 0` to -0 (fuzz seed 30073 of profile mixed) was an open finding, and a bug
that gave neither value could hide among such findings."""

import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes as dt
from devicekit.reference.interpreter import evaluate
from devicekit.reference.wide import evaluate_wide
from devicekit.testing.random_kernels import assert_matches


def _kernel(expr, dtype):
    k = ir.KernelBuilder("wide_" + dtype.name)
    n = k.var("n", 1, 64)
    a, b = k.param("a", dtype, n), k.param("b", dtype, n)
    o = k.param("o", dtype, n, writable=True)
    i = k.range(n, "global")
    o[i] = expr(a[i], b[i])
    return k.build()


def _both(kernel, a, b):
    arrays = {"a": a, "b": b, "o": np.zeros_like(a)}
    return evaluate(kernel, arrays, n=len(a))["o"], evaluate_wide(kernel, arrays, {"n": len(a)})["o"]


def test_an_overflow_folded_away_is_the_wide_value():
    k = _kernel(lambda a, b: (a * -1.7e38) * b, dt.float32)
    exact, wide = _both(k, np.array([4.0, 1e-3], np.float32), np.array([0.0, 1.0], np.float32))
    assert np.isnan(exact[0]) and wide[0] == 0.0  # float32 overflows to inf, inf * 0 is NaN; float64 does not
    assert exact[1] == wide[1] == np.float32(-1.7e38 * 1e-3)


def test_a_rounding_error_term_is_zero_wide():
    k = _kernel(lambda a, b: b - ((a + b) - a), dt.float16)
    exact, wide = _both(k, np.array([1000.0], np.float16), np.array([0.3], np.float16))
    assert exact[0] != 0.0 and wide[0] == 0.0


def test_integers_and_casts_stay_exact():
    k = _kernel(lambda a, b: (a * b).cast(dt.int32).cast(dt.float32), dt.float32)
    exact, wide = _both(k, np.array([2.5, -3.5], np.float32), np.array([3.0, 2.0], np.float32))
    assert exact.tolist() == wide.tolist() == [7.0, -7.0]


def test_an_element_may_match_either_reference_never_neither():
    got = np.array([-0.0, np.nan, 5.0], np.float32)
    exact = np.array([np.nan, np.nan, 5.0], np.float32)
    wide = np.array([0.0, 0.0, 5.0], np.float32)
    with pytest.raises(AssertionError):
        assert_matches(got, exact, dt.float32, "o")
    assert_matches(got, exact, dt.float32, "o", also=wide)  # [0] wide, [1] exact, [2] both
    with pytest.raises(AssertionError, match="widened"):
        assert_matches(np.array([-0.0, np.nan, 6.0], np.float32), exact, dt.float32, "o", also=wide)


def test_the_fuzzer_applies_it_only_to_a_reassociating_compiler(webgpu_runner):
    """On lavapipe (WEBGPU), seed 30073 gave -0 where float32 gives NaN and seed 94093 0 where the exact value is
    -inf: accepted (widened reference, indeterminate non-finite values) because WGSL's compiler reassociates and
    assumes finite math; the same results from a compiler that says it does not are a mismatch."""
    from devicekit.testing.fuzzgen import make_case
    from devicekit.testing.random_kernels import _mismatches
    runner = webgpu_runner
    label = next(iter(runner.targets))
    compiler = runner.targets[label].compiler
    assert compiler.reassociates
    for seed in (30073, 94093):
        case = make_case(seed, "mixed")
        want = runner.reference(case)
        got = runner._run(case.kernel, runner.targets[label], case.inputs)
        if any(p.writable and _mismatches(np.asarray(got[p.name]), np.asarray(want[p.name]), p.dtype).any()
               for p in case.kernel.params):
            break
    else:
        pytest.skip("this adapter computes both seeds exactly (it folds nothing away)")
    assert runner.check_one(label, case.kernel, case.inputs, want) is None
    type(compiler).reassociates = False
    try:
        bad = runner.check_one(label, case.kernel, case.inputs, want)
    finally:
        type(compiler).reassociates = True
    assert bad is not None and bad[0] == "mismatch"


def test_where_the_exact_value_is_not_finite_a_finite_math_compiler_is_indeterminate():
    """WGSL lets a compiler assume no infinities or NaNs: where the exact value is inf or NaN the result is an
    indeterminate value (fuzz seed 94093: lavapipe folded `(x * 0 + 0) - x * 0` to 0 for an infinite x, under a max
    whose exact value was -inf). Such elements are not compared; every finite one still is."""
    from devicekit.testing.fuzz import _indeterminate_ok
    got = np.array([0.0, 5.0, 7.0], np.float32)
    want = np.array([-np.inf, np.nan, 1.0], np.float32)
    wide = np.array([-np.inf, np.nan, 2.0], np.float32)
    also = _indeterminate_ok(got, want, wide, dt.float32)
    assert also.tolist()[:2] == [0.0, 5.0] and also[2] == 2.0
    with pytest.raises(AssertionError, match="first at \\[2\\]"):
        assert_matches(got, want, dt.float32, "o", also=also)
    assert_matches(np.array([0.0, 5.0, 2.0], np.float32), want, dt.float32, "o", also=also)
    ints = np.array([1, 2], np.int32)
    assert _indeterminate_ok(ints, ints, ints + 1, dt.int32).tolist() == [2, 3]


def test_the_wide_reference_says_whether_a_value_on_the_way_was_not_finite():
    """evaluate_wide_finite: False when an op computed an inf or NaN anywhere (sqrt of a negative, 1 / 0)
    even where a later op absorbs it into a finite result; True for a kernel whose every computed value is finite
    (loads and constants are read, not computed)."""
    from devicekit.ir.uop import UOp
    from devicekit.reference.wide import evaluate_wide_finite
    absorbed = _kernel(lambda a, b: ir.maximum(UOp.const(dt.float32, 0.0), (ir.sqrt(a) + b) - ir.sqrt(a)), dt.float32)
    arrays = {"a": np.array([-1.4, 4.0], np.float32), "b": np.array([1.0, 1.0], np.float32),
              "o": np.zeros(2, np.float32)}
    out, finite = evaluate_wide_finite(absorbed, arrays, {"n": 2})
    assert not finite and out["o"].tolist() == [0.0, 1.0]  # max(0, NaN) is 0 (docs/ir.md): finite, yet indeterminate
    arrays["a"] = np.array([1.0, 4.0], np.float32)
    assert evaluate_wide_finite(absorbed, arrays, {"n": 2})[1]
    by_zero = _kernel(lambda a, b: (b / (a - 1.0)) * 0.0, dt.float32)  # 1 / 0 = inf, inf * 0 = NaN
    one = {"a": np.array([1.0], np.float32), "b": np.array([1.0], np.float32), "o": np.zeros(1, np.float32)}
    assert not evaluate_wide_finite(by_zero, one, {"n": 1})[1]
    assert evaluate_wide_finite(by_zero, {**one, "a": np.array([2.0], np.float32)}, {"n": 1})[1]


def test_a_nan_absorbed_on_the_way_leaves_a_finite_math_compilers_result_uncompared(webgpu_runner):
    """Fuzz seed 46075 (profile mixed) on WEBGPU: max(0, fma(1, sqrt(x), 1) - sqrt(x)) of a negative x is 0 exactly
    (a NaN second operand drops out of the max), 1 on lavapipe, which folds (s + 1) - s to 1 under WGSL's finite math. Its
    result is indeterminate (docs/ir.md): not compared, and counted (`Runner.indeterminate`); the same result from a
    compiler that does not reassociate is a mismatch."""
    from devicekit.ir.ops import Ops
    from devicekit.ir.uop import UOp, make_alu
    runner = webgpu_runner
    k = ir.KernelBuilder("fz46075")
    n = k.var("n", 1, 64)
    x = k.param("x", dt.float32, n)
    o = k.param("o", dt.float32, n, writable=True)
    i = k.range(n, "global")
    one = ir.vectorize(*[UOp.const(dt.float32, 1.0)] * 4)
    s = make_alu(Ops.SQRT, (ir.vectorize(x[i], *[UOp.const(dt.float32, 0.0)] * 3),))
    o[i] = ir.maximum(UOp.const(dt.float32, 0.0), (make_alu(Ops.MULACC, (one, s, one)) - s).gep(0))
    kern = k.build()
    inputs = {"x": np.array([-1.38, 0.25], np.float32), "n": 2}
    label = next(iter(runner.targets))
    want = runner.reference(type("Case", (), {"kernel": kern, "inputs": inputs})())
    got = runner._run(kern, runner.targets[label], inputs)
    assert want["o"].tolist() == [0.0, 1.0]
    if got["o"][0] == 0.0:
        pytest.skip("this adapter computes the NaN exactly (it folds nothing away)")
    assert runner.check_one(label, kern, inputs, want) is None and runner.indeterminate == 1
    compiler = runner.targets[label].compiler
    type(compiler).reassociates = False
    try:
        bad = runner.check_one(label, kern, inputs, want)
    finally:
        type(compiler).reassociates = True
    assert bad is not None and bad[0] == "mismatch"
