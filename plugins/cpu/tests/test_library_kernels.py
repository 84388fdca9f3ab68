"""Every kernel of devicekit.kernels, on both CPU pairs, against the PYTHON reference device."""

from __future__ import annotations

import pytest
from devicekit import kernels

PAIRS = ("llvm", "c")
NAMES = sorted(kernels.all_kernels())


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("name", NAMES)
def test_library_kernel_matches_reference(name, pair, single_pair, python_ref, close):
    import devicekit as dk
    kernel = kernels.all_kernels()[name]()
    named = kernels.example_inputs(name)
    want = python_ref(kernel, **named)
    got = dk.run(kernel, device=single_pair(pair), **named)
    assert set(got) == set(want)
    for k in want:
        close(got[k], want[k], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("pair", PAIRS)
def test_large_matmul_tiles(pair, single_pair, close):
    """A bigger tiled matmul (threads split the tile rows) against numpy."""
    import devicekit as dk
    import numpy as np
    rng = np.random.default_rng(3)
    M, N, K = 64, 48, 40
    a, b = rng.standard_normal(M * K).astype(np.float32), rng.standard_normal(K * N).astype(np.float32)
    got = dk.run(kernels.matmul(M, N, K), device=single_pair(pair), a=a, b=b)["c"]
    close(got, (a.reshape(M, K) @ b.reshape(K, N)).reshape(-1), rtol=1e-4, atol=1e-4)
