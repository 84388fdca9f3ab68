"""The start of issue 14's PolyBench/C 4.2 suite (examples/polybench): gemm, gemver, gesummv and syrk at MINI size,
with the benchmark's own initialisation, against numpy on the reference and both CPU pairs; alpha and beta are
k.scalar params, so other values run without a new compile."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import devicekit as dk
import numpy as np
import pytest
from devicekit.testing.devices import device_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: `examples` is importable

DEVICES = ["PYTHON", "CPU/llvm", "CPU/c"]
NAMES = importlib.import_module("examples.polybench").KERNELS


@pytest.mark.parametrize("label", DEVICES)
@pytest.mark.parametrize("name", NAMES)
def test_polybench_mini_matches_numpy(name, label):
    mod = importlib.import_module(f"examples.polybench.{name}")
    dev = device_for(label)
    dims = mod.SIZES["MINI"]
    for alpha, beta in ((mod.ALPHA, mod.BETA), (-0.5, 2.0)):
        init = mod.init_arrays(**dims)
        got = mod.run(dev, "MINI", alpha=alpha, beta=beta)
        want = mod.reference(**init, alpha=alpha, beta=beta)
        assert set(want) <= set(got)
        for out, w in want.items():
            np.testing.assert_allclose(got[out], w, rtol=1e-12, atol=1e-12, err_msg=f"{name} {out} on {label}")


def test_alpha_and_beta_are_launch_values_not_compiled_in():
    """The kernels take alpha and beta as scalars: rebuilding gives the same kernel (one Program on a device), and
    the source holds neither value."""
    dev = dk.device("CPU")
    for name in NAMES:
        mod = importlib.import_module(f"examples.polybench.{name}")
        build = getattr(mod, "kernel", None) or (lambda m=mod: m.kernels()[-1])
        assert dev.compile(build()) is dev.compile(build())
        src = dev.renderer.render(build()).src
        assert "1.5" not in src and "1.2" not in src and "dku_alpha" in src
