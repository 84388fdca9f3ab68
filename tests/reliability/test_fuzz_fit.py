"""`fuzz --fit`: the generators kept to the dtypes a device renders (WEBGPU refused 3,790 of a 5,000-kernel
campaign's kernels by dtype, so only 1,210 ran). Without it, and with a pool that holds every dtype (the CPU's),
a seed must give the kernel it always gave: earlier campaigns stay reproducible by seed."""

from __future__ import annotations

import pytest
from devicekit.ir import dtypes
from devicekit.testing.fuzzgen import PROFILES, make_case
from devicekit.testing.random_kernels import ALL_DTYPES

# the dtypes WEBGPU renders on lavapipe (shader-f16): what Runner("WEBGPU").fit_pool() gives there
WGSL_POOL = (dtypes.float32, dtypes.float16, dtypes.int32, dtypes.uint32, dtypes.bool)


def _same(a, b) -> bool:
    """The same kernel (UOps are interned: the same graph is the same sink) and the same launch values."""
    import numpy as np
    return a.kernel.key == b.kernel.key and a.kernel.sink is b.kernel.sink and a.inputs.keys() == b.inputs.keys() \
        and all(np.array_equal(a.inputs[x], b.inputs[x]) for x in a.inputs)


@pytest.mark.parametrize("profile", [p for p in PROFILES if p != "deep"] + ["deep"])
def test_a_full_pool_gives_the_unfitted_kernel(profile):
    """make_case(seed, profile, ALL_DTYPES) is make_case(seed, profile), kernel and inputs, for every generator:
    `--fit` on a device that renders every dtype (CPU) is the campaign it always was."""
    seeds = range(4) if profile == "deep" else range(48)
    for seed in seeds:
        assert _same(make_case(seed, profile, ALL_DTYPES), make_case(seed, profile)), (profile, seed)


def test_the_cpu_fit_pool_holds_every_dtype():
    from devicekit.testing.fuzz import Runner
    assert Runner("CPU", ["llvm"]).fit_pool() == ALL_DTYPES


@pytest.mark.parametrize("profile", ["mixed", "base", "wide", "ints", "floats", "memory", "shapes", "tiles"])
def test_fitted_kernels_keep_to_the_pool(profile):
    """Every param, k.scalar and value of a fitted kernel has a dtype of the pool; int64 only as index arithmetic
    (vars, ranges, bounds), which a 32-bit target narrows by proof."""
    pool = set(WGSL_POOL)
    for seed in range(200):
        k = make_case(seed, profile, WGSL_POOL).kernel
        for p in k.params:
            assert p.dtype.scalar() in pool, (profile, seed, p)
        for v in k.vars:
            assert v.scalar is None or v.scalar in pool, (profile, seed, v)  # the declared dtype (bool: uint8 wire)
        bad = {u.dtype.scalar().name for u in k.uops()
               if u.dtype.name != "void" and u.dtype.scalar() not in pool | {dtypes.int64}}
        assert not bad, (profile, seed, bad)


def test_an_empty_pool_is_refused_by_name():
    with pytest.raises(ValueError, match="empty dtype pool"):
        make_case(1, "mixed", ())


def _webgpu() -> None:
    import devicekit as dk
    rows = [d for d in dk.devices() if d.kind == "WEBGPU"]
    if not rows or not rows[0].available:
        pytest.skip(f"no WebGPU adapter here: {rows[0].reason if rows else 'devicekit-webgpu is not installed'}")


def test_a_fitted_webgpu_campaign_runs_its_kernels():
    """60 seeds of the 5,000-kernel campaign's range: unfitted, WEBGPU refuses most by dtype; fitted, it runs all of
    them (gathers through int32/uint32 indices and small triangular loops included), with no finding either way."""
    _webgpu()
    from devicekit.testing.fuzz import fuzz
    plain = fuzz(60, seed=95000, kind="WEBGPU", jobs=1)
    fitted = fuzz(60, seed=95000, kind="WEBGPU", jobs=1, fit=True)
    assert not plain.findings and not fitted.findings, (plain.findings, fitted.findings)
    refused, refused_fit = sum(plain.unsupported.values()), sum(fitted.unsupported.values())
    assert refused >= 20 and refused_fit == 0, (plain.unsupported, fitted.unsupported)
    assert {"float32", "int32", "uint32", "bool"} <= set(fitted.pool) <= {d.name for d in WGSL_POOL}, fitted.pool


def test_the_cli_names_the_fitted_pool(capsys):
    from devicekit.testing.fuzz import main
    assert main(["--device", "CPU", "--pair", "llvm", "--n", "3", "--seed", "7", "--jobs", "1", "--fit",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "fitted to float32/float16/float64/bfloat16/int8" in out and "0 findings" in out, out


def test_a_fitted_finding_is_shrunk_from_the_fitted_kernel():
    """shrink_finding rebuilds a --fit campaign's kernel from the campaign's pool (Report.pool), not the seed's
    unfitted kernel (which may hold a dtype the device refuses)."""
    from devicekit.testing.fuzz import Finding
    from devicekit.testing.shrink import shrink_finding
    seed = next(s for s in range(1, 200, 2) if "float64" in {p.dtype.name for p in make_case(s, "wide").kernel.params})
    finding = Finding(seed, "CPU/llvm", "mismatch", "")
    pool = (dtypes.float32, dtypes.int32, dtypes.bool)
    assert "dtypes.float64" in shrink_finding(finding, "wide", "CPU", budget=1)
    fitted = shrink_finding(finding, "wide", "CPU", budget=1, pool=pool)
    assert "no longer fails" in fitted and "dtypes.float64" not in fitted, fitted
