"""The peer columns of bench/run.py (devicekit.bench.peers): a missing peer is "not installed", never an error; a
peer's answer is checked against numpy before it is timed; numba runs at its fastest configuration; the fastest peer
is the ratio's reference; the header names the CPU model."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from devicekit import settings
from devicekit.bench import machine as bench_machine
from devicekit.bench import peers as bench_peers
from devicekit.bench.definition import cases

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLOW = settings.get("DEVICEKIT_SLOW")  # every case for every peer (numba's parallel compiles: ~30 s on two cores)


def _case(name: str):
    return next(c for c in cases(profile="quick") if c.name == name)


@pytest.mark.parametrize("peer, module", [("torch", "torch"), ("torch.compile", "torch"), ("jax.jit", "jax"),
                                          ("numba", "numba")])
def test_a_missing_peer_is_not_installed(monkeypatch, peer, module):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as without the package
    assert bench_peers.missing(peer).startswith("not installed (bash scripts/bench-setup.sh installs")
    case = _case("sum")
    inputs = case.inputs()
    got = bench_peers.time_peer(peer, case, inputs, case.reference(inputs))
    assert got.seconds is None and got.note.startswith("not installed"), got


@pytest.mark.parametrize("peer, module", [("torch", "torch"), ("jax.jit", "jax"), ("numba", "numba")])
def test_a_peer_is_checked_against_numpy_before_it_is_timed(peer, module):
    pytest.importorskip(module)
    for name in ("fma", "sum", "softmax", "matmul", "gather") if SLOW else ("sum",):
        case = _case(name)
        inputs = case.inputs()
        want = case.reference(inputs)
        ok = bench_peers.time_peer(peer, case, inputs, want, reps=2)
        assert ok.seconds is not None and ok.seconds > 0, (name, ok)
        wrong = bench_peers.time_peer(peer, case, inputs, want + 1.0, reps=2)
        assert wrong.seconds is None and wrong.note.startswith("wrong: max abs error"), (name, wrong)


def test_numba_runs_its_fastest_configuration():
    pytest.importorskip("numba")
    from devicekit.bench.numba_versions import _kernels
    k = _kernels()
    for name in ("sum", "softmax", "matmul"):  # reductions vectorize only with fastmath
        assert k[name].targetoptions.get("fastmath") is True, name
    assert all(f.targetoptions.get("parallel") is True for f in k.values())


def test_the_fastest_peer_is_the_reference():
    assert bench_peers.best_peer({"numpy": 3e-3, "numba": 1e-3, "torch": None, "jax.jit": 2e-3}) == ("numba", 1e-3)
    assert bench_peers.best_peer({"torch": None}) is None


def test_the_cpu_model_names_the_host_as_llvm_does():
    llvm = pytest.importorskip("llvmlite.binding")
    model = bench_machine.cpu_model()
    assert f"LLVM host cpu {llvm.get_host_cpu_name()}" in model, model


@pytest.mark.skipif(not SLOW, reason="a bench/run.py run at its large sizes (~20 s): DEVICEKIT_SLOW=1")
def test_run_py_says_not_installed_in_a_missing_peers_column(tmp_path):
    """bench/run.py with torch absent: its column says "not installed", the run succeeds."""
    code = ("import runpy, sys; sys.modules['torch'] = None; "
            "sys.argv = ['run.py', '--quick', '--only', 'sum', '--peers', 'torch']; "
            "runpy.run_path('bench/run.py', run_name='__main__')")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    env["DEVICEKIT_CACHE_DIR"] = str(tmp_path / "dk-cache")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                       check=False)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "- torch: not installed (bash scripts/bench-setup.sh installs torch)" in p.stdout
    row = next(ln for ln in p.stdout.splitlines() if ln.startswith("| sum 16M f32 |"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    head = next(ln for ln in p.stdout.splitlines() if ln.startswith("| benchmark |"))
    cols = [c.strip() for c in head.split("|")[1:-1]]
    assert cells[cols.index("torch")] == "not installed", row
    assert cells[cols.index("numba")] == "not run", row
    assert "CPU: " in p.stdout and "load at start" in p.stdout and "load at end" in p.stdout
    assert np.isfinite(float(cells[cols.index("numpy")].split()[0]))


def test_every_case_has_a_peer_version():
    """A case added to the shared definition gets the peers' version of its product, not a "no version" cell."""
    for case in cases(profile="quick", proposals=True):
        assert bench_peers._base(case.name) in ("fma", "sum", "softmax", "matmul", "gather"), case.name



def test_best_warms_for_warmup_s_then_times_reps(monkeypatch):
    """bench/run.py warms every column for WARMUP_S before timing (a woken pool's first tens of milliseconds):
    `best` keeps calling until that long has passed, then times `reps` calls; a peer's timing passes it on."""
    import time

    from devicekit.bench import definition
    calls = []

    def fn():
        calls.append(time.perf_counter())
        time.sleep(0.005)

    definition.best(fn, reps=2, warmup=1, warmup_s=0.05)
    assert len(calls) >= 2 + 0.05 / 0.006, len(calls)  # ~10 warm calls of 5 ms, then the 2 timed
    calls.clear()
    definition.best(fn, reps=2, warmup=1)
    assert len(calls) == 3
    seen = {}
    monkeypatch.setattr(definition, "best", lambda *a, **k: seen.update(k) or 1.0)
    monkeypatch.setattr(bench_peers, "version_for", lambda peer, name: lambda d: np.zeros(1))
    monkeypatch.setattr(bench_peers, "missing", lambda peer: None)
    case = next(c for c in cases(quick=True) if c.name == "fma")
    got = bench_peers.time_peer("numba", case, {}, np.zeros(1), reps=3, warmup_s=0.1)
    assert got.seconds == 1.0 and seen.get("warmup_s") == 0.1, (got, seen)
