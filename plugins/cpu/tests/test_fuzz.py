"""Differential fuzzing: random kernels (devicekit.testing.random_kernels) on both CPU pairs vs PYTHON: seeds 0-29
(the c pair compiles each with cc), 0-59 with DEVICEKIT_SLOW=1; DK_CPU_FUZZ_SEEDS=N runs N seeds. A c pair built
with -ffast-math and without -fwrapv fails seed 24 of either range; tests/reliability/test_fuzz.py fuzzes both pairs
with 100 more kernels each (fuzzgen's mixed profile)."""

from __future__ import annotations

import os

import pytest
from devicekit import settings
from devicekit.testing.random_kernels import assert_matches, random_kernel

PAIRS = ("llvm", "c")
SEEDS = range(int(os.environ.get("DK_CPU_FUZZ_SEEDS", "60" if settings.get("DEVICEKIT_SLOW") else "30")))


@pytest.mark.parametrize("pair", PAIRS)
def test_random_kernels_match_reference(pair, single_pair, python_ref):
    import devicekit as dk
    dev = single_pair(pair)
    failures = []
    for seed in SEEDS:
        rk = random_kernel(seed)
        try:
            want = python_ref(rk.kernel, **rk.inputs)
            got = dk.run(rk.kernel, device=dev, **rk.inputs)
            out = rk.kernel.params[-1]
            assert_matches(got["out"], want["out"], out.dtype, f"seed {seed}")
        except Exception as e:  # noqa: BLE001 - collect every failing seed
            failures.append(f"seed {seed}: {type(e).__name__}: {str(e)[:300]}")
    assert not failures, f"{len(failures)} of {len(SEEDS)} seeds failed:\n" + "\n".join(failures)
