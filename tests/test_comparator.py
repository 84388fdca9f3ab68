"""The comparator every differential test leans on (testing.random_kernels.assert_matches): an infinity matches only
the same infinity, a NaN only a NaN, finite values within the dtype's tolerance, integers exactly. Before the fix an
expected +-inf matched any value (|inf - x| <= tol * (1 + inf)), so every fuzz campaign was blind to a wrong infinity."""

import numpy as np
import pytest
from devicekit.ir import dtypes
from devicekit.testing.random_kernels import assert_matches, tolerance

INF, NAN = np.inf, np.nan


@pytest.mark.parametrize("got, want", [
    (1.0, INF), (-INF, INF), (INF, -INF), (0.0, -INF), (3.4e38, INF), (INF, 1.0), (NAN, INF), (INF, NAN),
    (NAN, 1.0), (1.0, NAN), (0.0, NAN), (1.0, 1.1), (-1.0, 1.0), (1e6, 1e6 * 1.1),
])
@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64, dtypes.float16])
def test_mismatches_are_caught(got, want, dt):
    with pytest.raises(AssertionError, match="differ"):
        assert_matches(np.array([0.5, got], np.float64), np.array([0.5, want], np.float64), dt, "x")


@pytest.mark.parametrize("got, want", [(INF, INF), (-INF, -INF), (NAN, NAN), (1.0, 1.0), (0.0, -0.0),
                                       (1e6, 1e6 * (1 + 1e-11))])
@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64, dtypes.float16])
def test_equal_values_match(got, want, dt):
    assert_matches(np.array([got]), np.array([want]), dt, "x")


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64])
def test_tolerance_is_relative_and_bounded(dt):
    tol = tolerance(dt)
    for w in (0.0, 1.0, -250.0, 1e4):
        inside, outside = w + 0.5 * tol * (1 + abs(w)), w + 2 * tol * (1 + abs(w))
        assert_matches(np.array([inside]), np.array([w]), dt, "inside")
        with pytest.raises(AssertionError):
            assert_matches(np.array([outside]), np.array([w]), dt, "outside")


def test_integers_bools_and_shapes_are_exact():
    assert_matches(np.array([1, 2, 3], np.int32), np.array([1, 2, 3], np.int32), dtypes.int32)
    with pytest.raises(AssertionError, match="mismatches"):
        assert_matches(np.array([1, 2, 4], np.int32), np.array([1, 2, 3], np.int32), dtypes.int32)
    with pytest.raises(AssertionError, match="mismatches"):
        assert_matches(np.array([True]), np.array([False]), dtypes.bool)
    with pytest.raises(AssertionError, match="shape"):
        assert_matches(np.zeros(3), np.zeros(4), dtypes.float32)


def test_bfloat16_bits_compare_as_floats():
    # bfloat16 travels as uint16 bits: 0x3F80 is 1.0, 0x7F80 is +inf, 0xFF80 is -inf
    assert_matches(np.array([0x3F80, 0x7F80], np.uint16), np.array([0x3F80, 0x7F80], np.uint16), dtypes.bfloat16)
    with pytest.raises(AssertionError):
        assert_matches(np.array([0xFF80], np.uint16), np.array([0x7F80], np.uint16), dtypes.bfloat16)
    with pytest.raises(AssertionError):
        assert_matches(np.array([0x3F80], np.uint16), np.array([0x7F80], np.uint16), dtypes.bfloat16)


def test_the_tolerances_are_docs_ir_md_s():
    """docs/ir.md's table; integers and bools exact (0.0, not None: the comparator multiplies by it)."""
    want = {dtypes.float16: 1e-2, dtypes.bfloat16: 2e-2, dtypes.float32: 1e-4, dtypes.float64: 1e-9,
            dtypes.int32: 0.0, dtypes.uint8: 0.0, dtypes.bool: 0.0}
    assert {dt: tolerance(dt) for dt in want} == want
    assert all(isinstance(tolerance(dt), float) for dt in want)


def test_a_difference_of_exactly_the_tolerance_matches():
    assert_matches(np.array([1e-4]), np.array([0.0]), dtypes.float32, "at the bound")
    with pytest.raises(AssertionError):
        assert_matches(np.array([1.0001e-4]), np.array([0.0]), dtypes.float32, "past it")


def test_bfloat16_bits_are_compared_as_values_not_as_integers():
    # +-1 ulp of the smallest subnormal: 9e-41 and -9e-41 match within 2e-2; as integers 1 and 32769 would not
    assert_matches(np.array([0x0001], np.uint16), np.array([0x8001], np.uint16), dtypes.bfloat16, "tiny")


def test_works_where_the_caller_raises_on_floating_point_errors():
    """inf - inf and 1e308 - -1e308 inside the comparator are its business: no FloatingPointError leaks."""
    with np.errstate(all="raise"):
        assert_matches(np.array([INF, -INF, NAN, 1e308]), np.array([INF, -INF, NAN, 1e308]), dtypes.float64, "x")
        with pytest.raises(AssertionError, match="differ"):
            assert_matches(np.array([1e308]), np.array([-1e308]), dtypes.float64, "x")


def F(x: float) -> str:
    """A value as the messages print it (numpy's repr of a float64)."""
    return repr(np.float64(x))


def test_messages_name_the_count_the_first_index_and_both_values():
    """The report a fuzz finding carries: exact, so a campaign's log says which element and by how much."""
    with pytest.raises(AssertionError) as e:
        assert_matches(np.array([1.0, 2.0, 9.0], np.float32), np.array([1.0, 3.0, 5.0], np.float32), dtypes.float32,
                       "out")
    assert str(e.value) == f"out: 2 of 3 differ beyond 0.0001, first at [1]: got {F(2)}, want {F(3)}"
    with pytest.raises(AssertionError) as e:
        assert_matches(np.array([1, 5, 7], np.int32), np.array([1, 4, 6], np.int32), dtypes.int32, "n")
    assert str(e.value) == "n: 2 mismatches, first at [1]: got 5, want 4"
    with pytest.raises(AssertionError) as e:
        assert_matches(np.array([1.0]), np.array([2.0]), dtypes.float64)
    assert str(e.value).startswith(": 1 of 1 differ beyond 1e-09, first at [0]")


def test_also_accepts_an_element_that_matches_either_reference_only():
    """`also=` (the widened reference of a compiler that reassociates): per element, want OR also; never neither;
    and the message gives the widened value too."""
    got = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    want = np.array([1.0, 9.0, 3.0, 8.0], np.float32)
    also = np.array([7.0, 2.0, 3.0, 6.0], np.float32)
    assert_matches(got[:3], want[:3], dtypes.float32, "o", also=also[:3])  # [0] want, [1] also, [2] both
    with pytest.raises(AssertionError) as e:
        assert_matches(got, want, dtypes.float32, "o", also=also)
    assert str(e.value) == f"o: 1 of 4 differ beyond 0.0001, first at [3]: got {F(4)}, want {F(8)} (widened: {F(6)})"
    with pytest.raises(AssertionError):  # also alone does not excuse elements where it does not match either
        assert_matches(got, want, dtypes.float32, "o", also=want)
    with pytest.raises(AssertionError) as e:  # integers: exact against either
        assert_matches(np.array([1, 2], np.int32), np.array([1, 3], np.int32), dtypes.int32, "i",
                       also=np.array([0, 4], np.int32))
    assert str(e.value) == "i: 1 mismatches, first at [1]: got 2, want 3"
    assert_matches(np.array([1, 2], np.int32), np.array([0, 3], np.int32), dtypes.int32, "i",
                   also=np.array([1, 2], np.int32))


def test_also_of_bfloat16_bits_compares_as_floats():
    from devicekit.ir.dtypes import f32_to_bf16
    got = f32_to_bf16(np.array([1.0, 2.0], np.float32))
    want = f32_to_bf16(np.array([1.0, 5.0], np.float32))
    also = f32_to_bf16(np.array([3.0, 2.0], np.float32))
    assert_matches(got, want, dtypes.bfloat16, "b", also=also)
    with pytest.raises(AssertionError) as e:
        assert_matches(got, want, dtypes.bfloat16, "b", also=f32_to_bf16(np.array([1.0, 6.0], np.float32)))
    assert str(e.value) == f"b: 1 of 2 differ beyond 0.02, first at [1]: got {F(2)}, want {F(5)} (widened: {F(6)})"
