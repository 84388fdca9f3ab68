"""bench/run.py's MLP forward and Jacobi rows (devicekit.bench.more_cases): devicekit's kernels, as the bench builds
and launches them, match numpy at a small size on CPU and on the PYTHON reference; every peer has a version of both,
checked against numpy; run.py lists both rows and holds them to issue 36's bars."""

from __future__ import annotations

import os
import runpy

import numpy as np
import pytest
from devicekit import settings
from devicekit.bench import more_cases
from devicekit.bench import peers as bench_peers
from devicekit.bench.definition import prepare

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLOW = settings.get("DEVICEKIT_SLOW")  # numba's parallel compiles and torch.compile: tens of seconds on two cores


def _case(name: str):
    return next(c for c in more_cases.cases("quick") if c.name == name)


@pytest.mark.parametrize("kind, name", [("CPU", "mlp"), ("CPU", "jacobi"), ("PYTHON", "mlp"), ("PYTHON", "jacobi")])
def test_devicekit_matches_numpy(kind, name):
    import devicekit as dk
    case = _case(name)
    inputs = case.inputs()
    want = case.reference(inputs)
    prepared = prepare(case, dk.device(kind), inputs)
    for _ in range(2 if kind == "CPU" else 1):  # a second launch (the timed ones) gives the same: the hidden layer
        prepared.launch()
        got = prepared.output()
        assert case.check(got, want) == "", (kind, name, case.check(got, want))


def test_the_references_are_what_the_cases_say():
    """numpy's MLP is relu(x @ w1 + b1) @ w2 + b2; jacobi's interior is the 5-point mean, its border a's."""
    d = _case("mlp").inputs()
    k, h, o = more_cases.MLP_DIMS
    x, w1, w2 = (d[n].astype(np.float64) for n in ("x", "w1", "w2"))
    want = np.maximum(x.reshape(-1, k) @ w1.reshape(k, h) + d["b1"], 0) @ w2.reshape(h, o) + d["b2"]
    assert np.allclose(more_cases.mlp_reference(d), want.reshape(-1), rtol=1e-4, atol=1e-4)
    d = _case("jacobi").inputs()
    a, got = d["a"], more_cases.jacobi_reference(d).reshape(d["a"].shape)
    n = a.shape[0]
    i, j = 5, 7
    assert np.isclose(got[i, j], 0.2 * (a[i, j] + a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1]), rtol=1e-6)
    border = np.ones((n, n), bool)
    border[1:-1, 1:-1] = False
    assert np.array_equal(got[border], a[border])


def test_a_wrong_result_is_caught():
    case = _case("jacobi")
    inputs = case.inputs()
    want = case.reference(inputs)
    assert case.check(want + 1e-3, want).startswith("max abs error")


@pytest.mark.parametrize("peer, module", [("torch", "torch"), ("jax.jit", "jax"), ("numba", "numba"),
                                          ("torch.compile", "torch")])
@pytest.mark.parametrize("name", ["mlp", "jacobi"])
def test_every_peer_has_a_version_checked_against_numpy(peer, module, name):
    pytest.importorskip(module)
    if peer in ("numba", "torch.compile") and not SLOW:
        pytest.skip("numba's parallel compiles and inductor take tens of seconds: DEVICEKIT_SLOW=1")
    case = _case(name)
    inputs = case.inputs()
    want = case.reference(inputs)
    ok = bench_peers.time_peer(peer, case, inputs, want, reps=2)
    assert ok.seconds is not None and ok.seconds > 0, (peer, name, ok)
    wrong = bench_peers.time_peer(peer, case, inputs, want + 1.0, reps=2)
    assert wrong.seconds is None and wrong.note.startswith("wrong: max abs error"), (peer, name, wrong)


def test_run_py_has_both_rows_and_their_bars():
    run = runpy.run_path(os.path.join(ROOT, "bench", "run.py"), run_name="bench_run")  # defines, does not run
    titles = {c.name: c.title for c in more_cases.cases("large")}
    assert {"mlp", "jacobi"} <= set(run["ROWS"].values())
    assert run["BARS"][titles["mlp"]] == ("every", 1.2) and run["BARS"][titles["jacobi"]] == ("every", 1.2)
    assert titles == {"mlp": "MLP fwd 256x784-512-10 f32", "jacobi": "jacobi 5-point 4096^2 f32"}
    assert any(name.startswith("jacobi") and need == 0.85 for name, need in run["COPY_BARS"].items())


def test_an_unknown_profile_is_named():
    with pytest.raises(ValueError, match="profile must be one of quick, standard, large, got 'huge'"):
        more_cases.cases("huge")


def test_the_fused_rows_copy_reads_as_many_distinct_sources():
    """The copy the fused row is held to launches from COPY_SOURCES sources in turn (each launch reads bytes the
    last did not: the fused row's read set), the one-source copy always from one; both copy right."""
    import devicekit as dk
    run = runpy.run_path(os.path.join(ROOT, "bench", "run.py"), run_name="bench_run")
    g = run["bench_bandwidth"].__globals__
    g["COPY_N"] = 4096
    made, seen = [], []

    class D:
        cpu = dk.device("CPU")

        def buf(self, a):
            return dk.Buffer(self.cpu, a.size, dk.dtypes.float32).copyin(a)

        def empty(self, n):
            made.append(dk.Buffer(self.cpu, n, dk.dtypes.float32))
            return made[-1]

    def best(f, reps, warmup=0):  # each launch's output, not its time
        seen.append([(f(), made[-1].numpy()[:8].tobytes())[1] for _ in range(reps)])
        return 1e-3

    g["best"] = best
    assert run["bench_bandwidth"](D()) == (1e-3, 1e-3, 1e-3)
    one, turns = seen[0], seen[1]
    assert g["COPY_SOURCES"] == 3 and len(set(one)) == 1 and len(set(turns)) == 3, (one, turns)
    assert turns[:3] == turns[3:6]  # in turn, as the fused row reads its three inputs every launch


def test_the_readme_shows_the_command_without_the_json_file():
    """bench/README.md's "Last run" line shows the command, never the runner's own --json file (a path of its
    machine)."""
    run = runpy.run_path(os.path.join(ROOT, "bench", "run.py"), run_name="bench_run")
    shown = run["shown_args"]
    assert shown(["--json", "/somewhere/b.json", "--update-readme"]) == ["--update-readme"]
    assert shown(["--only", "sum", "--json=/x.json"]) == ["--only", "sum"]
    assert shown(["--quick", "--peers", "numba"]) == ["--quick", "--peers", "numba"]


def test_the_compute_rows_are_read_as_fractions_of_the_measured_fma_peak(monkeypatch):
    """peak_rows measures the FMA peak on one thread and on every thread (devicekit_cpu.fma_peak, run for real),
    then reads the matmul and MLP rows against the all-threads figure: devicekit's fraction, the best peer's, and
    what the row's bar asks (the peer's fraction x the bar)."""
    from devicekit_cpu import fma_peak
    from devicekit_cpu.hostinfo import num_threads
    run = runpy.run_path(os.path.join(ROOT, "bench", "run.py"), run_name="bench_run")
    g = run["peak_rows"].__globals__
    g["SETTLE_S"] = 0.0
    measured = []
    real = fma_peak.peak

    def peak(threads=1, seconds=0.2, rounds=3):
        measured.append((threads, real(threads, seconds=0.01, rounds=1)))
        return 1e11 * threads  # the arithmetic below is checked against round figures
    monkeypatch.setattr(fma_peak, "peak", peak)
    by_name = {c.name: c for c in more_cases.cases("large")}
    by_name["matmul"] = type("C", (), {"title": "matmul 1024 f32", "work": 2.0 * 1024 ** 3})()
    mlp = by_name["mlp"]
    rows = [(mlp.title, {"devicekit": mlp.work / 2.4e11, "numpy": mlp.work / 1.5e11, "torch": mlp.work / 1.8e11,
                         "numba": "not installed"})]
    out = run["peak_rows"](rows, by_name)
    assert [t for t, _ in measured] == [1, num_threads()] and all(r > 0 for _, r in measured)
    every = 1e11 * num_threads()
    assert out[0] == ("float32 FMA peak, one thread (registers only)", None, "100 GFLOP/s")
    assert out[1][2] == f"{every / 1e9:.0f} GFLOP/s"
    assert len(out) == 3  # the matmul row did not run: no fraction for it
    name, t, detail = out[2]
    assert name == f"{mlp.title}: fraction of the FMA peak" and t == rows[0][1]["devicekit"]
    assert detail == (f"240 GFLOP/s = {2.4e11 / every:.2f} of the peak; best peer (torch) {1.8e11 / every:.2f}; "
                      f"the bar (1.2x torch) asks {1.8e11 / every * 1.2:.2f}")
    # matmul's bar is against numpy (its BLAS) alone: what it asks follows numpy's time, not the faster torch's
    mm = by_name["matmul"]
    rows = [(mm.title, {"devicekit": mm.work / 3e11, "numpy": mm.work / 2.5e11, "torch": mm.work / 2.8e11})]
    detail = run["peak_rows"](rows, by_name)[2][2]
    assert detail.endswith(f"; best peer (torch) {2.8e11 / every:.2f}; the bar (1.0x numpy) asks {2.5e11 / every:.2f}")


def test_each_rows_columns_are_timed_in_rounds_and_each_keeps_its_best():
    """bench_case times every column ROUNDS times in turn (devicekit, the peers, then again) and keeps each
    column's least time; a result that was wrong in any round stays wrong, a note (not installed) stays a note."""
    run = runpy.run_path(os.path.join(ROOT, "bench", "run.py"), run_name="bench_run")
    g = run["bench_case"].__globals__
    script = iter([{"devicekit": 2.0, "numpy": 1.0, "numba": "not installed", "torch": 3.0, "jax.jit": 1.0},
                   {"devicekit": 1.5, "numpy": 1.2, "numba": "not installed", "torch": "wrong: max abs error 1",
                    "jax.jit": 0.5}])
    calls = []

    def once(dk, tg, case, reps, peers, compare=True):
        calls.append(compare)
        return next(script)
    g["bench_case_once"] = once
    assert g["ROUNDS"] == 2
    row = run["bench_case"](None, None, None, 3, set(), compare=True)
    assert calls == [True, True]
    assert row == {"devicekit": 1.5, "numpy": 1.0, "numba": "not installed", "torch": "wrong: max abs error 1",
                   "jax.jit": 0.5}
    merge = run["merge_rounds"]
    assert merge([{"x": "error: boom"}, {"x": 1.0}]) == {"x": "error: boom"}
    assert merge([{"x": 1.0}]) == {"x": 1.0}
    assert merge([{"x": "unavailable"}, {"x": "wrong: max abs error 2"}]) == {"x": "wrong: max abs error 2"}
