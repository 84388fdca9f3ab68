"""The PYTHON reference (which defines the semantics) on a vector reduction over an empty range: its identity in
every lane. It gave one lane, so folding the lanes read empty arrays and the whole result vanished:
`kernels.reduce("sum", vec=4)` of 3 values was 0 on PYTHON and 6 on CPU (found by the kernel library's softmax
tests with rows shorter than the vector width)."""

import devicekit as dk
import numpy as np
import pytest
from devicekit import kernels


@pytest.mark.parametrize("op", ["sum", "prod", "max"])
@pytest.mark.parametrize("n", [1, 3])
def test_a_vector_reduction_over_an_empty_range_keeps_every_lane(op, n):
    k = kernels.reduce(op, vec=4)
    x = np.arange(1, n + 1, dtype=np.float32)
    want = {"sum": x.sum(), "prod": x.prod(), "max": x.max()}[op]
    got = dk.run(k, "PYTHON", x=x, m=1, n=n)["out"]
    np.testing.assert_array_equal(got, [want])
    np.testing.assert_array_equal(dk.run(k, "CPU", x=x, m=1, n=n)["out"], [want])
