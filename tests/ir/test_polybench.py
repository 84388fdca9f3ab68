"""Issue 14's PolyBench/C 4.2 suite (examples/polybench, all 30 kernels): each at MINI size, with the benchmark's
own initialisation, against its numpy reference. The default run checks PYTHON and the CPU llvm pair; with
DEVICEKIT_SLOW=1 also the CPU c pair, OPENCL (skipped with the reason where it is missing) and SMALL sizes.
alpha and beta are k.scalar params, so other values run without a new compile (a second set is checked)."""

from __future__ import annotations

import importlib
import importlib.util
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


def _bench():
    """bench/polybench.py as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location("bench_polybench", Path(__file__).resolve().parents[2] / "bench" /
                                                  "polybench.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


def test_bench_rows_at_mini(capsys):
    """bench/polybench.py's path at MINI on CPU for three kernels (one not written directly, one checked on the
    tests' data, one through a dk.Plan): every row correct, with its PolyBench name, category and "directly"; the
    printed table has those rows. No timing is asserted. ~2 s (compiles of three kernels)."""
    bench = _bench()
    assert bench.main(["--size", "MINI", "--only", "gemm,durbin,heat-3d", "--reps", "1", "--budget", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(ln.startswith("Machine: ") and "devicekit pair: llvm (" in ln and "Load average before/after" in ln
               for ln in lines)
    rows = [ln.split(" | ") for ln in lines if ln.startswith("| ") and not ln.startswith("| kernel")]
    assert [r[0].lstrip("| ") for r in rows] == ["gemm", "durbin", "heat-3d"]
    by = {r[0].lstrip("| "): r for r in rows}
    assert by["gemm"][1:3] == ["linear-algebra/blas", "yes"] and by["heat-3d"][1] == "stencils"
    assert by["durbin"][2].startswith("no: beta kept in a one-element param")
    assert all(r[3].startswith("yes (") for r in rows), rows
    assert "on the tests' data" in by["heat-3d"][3]
    for r in rows:
        assert float(r[4].split()[0]) > 0 and float(r[5].split()[0]) > 0 and r[6].rstrip(" |").endswith("x")


def test_bench_wrong_result_is_reported(monkeypatch):
    """A kernel whose output is off the reference gives a row marked not correct."""
    bench = _bench()
    mod = importlib.import_module("examples.polybench.atax")
    right = mod.compute
    monkeypatch.setattr(mod, "compute", lambda *a, **kw: {k: v + 1.0 for k, v in right(*a, **kw).items()})
    row = bench.measure("atax", "MINI", dk.device("CPU"), reps=1, budget=0)
    assert not row.correct and row.error > 0.1
    assert "**NO**" in bench.table([row])[-1]


def test_bench_options_and_docs_markers(tmp_path):
    """--only takes module or PolyBench names and names what it does not know; --update-docs needs the markers."""
    bench = _bench()
    assert bench.select("floyd-warshall,mm2,gemm") == ["mm2", "gemm", "floyd_warshall"]
    with pytest.raises(SystemExit, match="unknown kernel.*gemmm"):
        bench.select("gemm,gemmm")
    doc = tmp_path / "p.md"
    doc.write_text(f"intro\n{bench.BEGIN}\nold\n{bench.END}\nafter\n")
    bench.update_docs("new table", doc)
    assert doc.read_text() == f"intro\n{bench.BEGIN}\nnew table\n{bench.END}\nafter\n"
    doc.write_text("no markers\n")
    with pytest.raises(SystemExit, match="no <!-- polybench:begin -->"):
        bench.update_docs("x", doc)
