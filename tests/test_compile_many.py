"""Device.compile_many: many kernels compiled at once on threads, in order, each the Program `compile` memoizes."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir, kernels


@pytest.mark.parametrize("pair", ["llvm", "c"])
def test_compile_many_matches_compile_one_by_one(pair):
    dev = dk.device("CPU")
    ks = [kernels.elementwise(f"a * b + {i}.5", name=f"many_{pair}_{i}") for i in range(6)]
    progs = dev.compile_many(ks, pair=pair, jobs=3)
    assert [p.name for p in progs] == [f"many_{pair}_{i}" for i in range(6)]
    assert all(dev.compile(k, pair=pair) is p for k, p in zip(ks, progs))  # the memo's own Programs
    a, b = np.arange(8, dtype=np.float32), np.full(8, 2, np.float32)
    for i, p in enumerate(progs):
        np.testing.assert_array_equal(dk.run(p, a=a, b=b, n=8)["out"], a * b + np.float32(i + 0.5))


def test_compile_many_raises_the_first_error_and_checks_jobs():
    dev = dk.device("CPU")
    good = kernels.elementwise("a + b", name="many_ok")
    with pytest.raises(TypeError, match=r"got a KernelBuilder \(kernel 'late', not built\); call its .build\(\)"):
        dev.compile_many([good, ir.KernelBuilder("late"), good])
    with pytest.raises(ValueError, match=r"compile_many\(jobs=\) takes an int >= 1, got 0"):
        dev.compile_many([good], jobs=0)
    assert dev.compile_many([]) == []
