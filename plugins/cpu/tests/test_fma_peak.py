"""devicekit_cpu.fma_peak: the multiply-add loop bench/run.py measures the host's compute peak with. Its speed is the
bench's business; here, that it does the work it counts (every chain, every iteration) and refuses bad arguments."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from devicekit_cpu import fma_peak


def _expected(n: int, lanes: int, chains: int) -> float:
    """The loop's result computed in numpy float32: each chain a -> a * 0.5 + 0.25 (a * 0.5 is exact, so fused and
    unfused agree) n times from c + 1, then every lane of every chain summed in the kernel's order."""
    total = np.zeros(lanes, np.float32)
    for c in range(chains):
        a = np.float32(c + 1)
        for _ in range(n):
            a = np.float32(a * np.float32(0.5) + np.float32(0.25))
        total = total + np.full(lanes, a, np.float32) if c else np.full(lanes, a, np.float32)
    return float(np.float32(sum(total.tolist(), 0.0)))


@pytest.mark.parametrize("n", [1, 3, 7])
def test_the_loop_runs_every_chain_n_times(n):
    _, fn, per_iter = fma_peak._function()
    lanes, chains = fma_peak._shape()
    assert per_iter == 2 * lanes * chains
    out = ctypes.c_float(-1.0)
    fn(n, ctypes.addressof(out))
    assert out.value == pytest.approx(_expected(n, lanes, chains), rel=1e-6)


def test_each_iteration_is_one_multiply_add_per_chain():
    src = fma_peak.source(16, 24)
    assert src.count("call <16 x float> @llvm.fma.v16f32(") == 24
    assert "load" not in src  # registers only: the peak of the FMA units, not of a cache


def test_the_chains_fill_three_quarters_of_the_register_file(monkeypatch):
    for regs, shape in ((32 * 64, (16, 24)), (16 * 32, (8, 12)), (32 * 16, (8, 12)), (16 * 16, (4, 12)), (0, (4, 12))):
        monkeypatch.setattr(fma_peak.hostinfo, "vector_register_bytes", lambda regs=regs: regs)
        assert fma_peak._shape() == shape, regs


def test_peak_is_a_positive_rate():
    assert fma_peak.peak(1, seconds=0.01, rounds=1) > 0


@pytest.mark.parametrize("kw", [{"threads": 0}, {"seconds": 0}, {"rounds": 0}])
def test_bad_arguments_are_refused_by_name(kw):
    with pytest.raises(ValueError, match="peak needs threads >= 1"):
        fma_peak.peak(**kw)
