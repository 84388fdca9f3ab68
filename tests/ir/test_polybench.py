"""Issue 14's PolyBench/C 4.2 suite (examples/polybench, all 30 kernels): each at MINI size, with the benchmark's
own initialisation, against its numpy reference. The default run checks PYTHON and the CPU llvm pair; with
DEVICEKIT_SLOW=1 also the CPU c pair, OPENCL (skipped with the reason where it is missing) and SMALL sizes.
alpha and beta are k.scalar params, so other values run without a new compile (a second set is checked)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import devicekit as dk
import numpy as np
import pytest
from devicekit import settings
from devicekit.testing.devices import device_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: `examples` is importable

from examples.polybench._common import call

SLOW = settings.get("DEVICEKIT_SLOW")
NAMES = importlib.import_module("examples.polybench").KERNELS
DEVICES = ["PYTHON", "CPU/llvm"] + (["CPU/c", "OPENCL"] if SLOW else [])
SIZES = ["MINI"] + (["SMALL"] if SLOW else [])
# The reference device interprets a one-lane `loop` kernel an iteration at a time (~0.25 ms each): at MINI,
# floyd-warshall (216,000 iterations) and seidel-2d (29,000) take about a minute there. The default run checks
# these on PYTHON at a smaller size; DEVICEKIT_SLOW=1 at MINI as everywhere else.
PYTHON_QUICK = {"floyd_warshall": {"n": 16}, "seidel_2d": {"tsteps": 2, "n": 12}, "gramschmidt": {"m": 12, "n": 8},
                "nussinov": {"n": 24}, "ludcmp": {"n": 16}}
OTHER = {"alpha": -0.5, "beta": 2.0}  # a second set of scalar values (deriche's alpha: 0.5, below)


def device(label: str):
    try:
        return device_for(label)
    except Exception as e:  # noqa: BLE001 - the kind is not installed or has no device here
        pytest.skip(f"{label}: {e}")


def scalar_sets(mod) -> list[dict]:
    base = getattr(mod, "SCALARS", {})
    other = {k: (0.5 if mod.__name__.endswith("deriche") else OTHER[k]) for k in base}
    return [base, other] if base else [{}]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("label", DEVICES)
@pytest.mark.parametrize("name", NAMES)
def test_polybench_matches_numpy(name, label, size):
    mod = importlib.import_module(f"examples.polybench.{name}")
    dev = device(label)
    dims = getattr(mod, "TEST_SIZES", mod.SIZES)[size]
    if label == "PYTHON" and not SLOW and name in PYTHON_QUICK:
        dims = PYTHON_QUICK[name]
    tol = getattr(mod, "TOL", 1e-12)
    for scalars in scalar_sets(mod):
        arrs = call(getattr(mod, "test_arrays", mod.init_arrays), **dims)
        got = mod.compute(dev, arrs, dims, **scalars)
        want = call(mod.reference, **arrs, **dims, **scalars)
        assert set(want) <= set(got)
        for out, w in want.items():
            assert np.any(w != arrs.get(out, 0)), f"{name} {out}: the reference left it as it was (a vacuous check)"
            np.testing.assert_allclose(got[out], w, rtol=tol, atol=tol, err_msg=f"{name} {out} on {label} {scalars}")


def test_run_uses_polybench_sizes():
    """run(device, size) is compute on init_arrays at SIZES[size]: the MINI outputs have PolyBench's shapes."""
    mod = importlib.import_module("examples.polybench.mm2")
    got = mod.run("PYTHON", "MINI")
    d = mod.SIZES["MINI"]
    assert got["D"].shape == (d["ni"], d["nl"]) and got["tmp"].shape == (d["ni"], d["nj"])


def test_scalars_are_launch_values_not_compiled_in():
    """The kernels with alpha/beta take them as scalars: rebuilding gives the same kernel (one Program on a device),
    and the source holds neither value."""
    dev = dk.device("CPU")
    for name in NAMES:
        mod = importlib.import_module(f"examples.polybench.{name}")
        if "beta" not in getattr(mod, "SCALARS", {}):
            continue
        build = getattr(mod, "kernel", None) or (lambda m=mod: m.kernels()[-1])
        assert dev.compile(build()) is dev.compile(build())
        src = dev.renderer.render(build()).src
        assert "1.5" not in src and "1.2" not in src and "dku_alpha" in src
