"""The differential fuzzer as part of the suite: a CI-sized run on both CPU compiler pairs against PYTHON (100
kernels per pair by default, DEVICEKIT_FUZZ_N to change, in chunks of 50 seeds that xdist runs in parallel), the long run behind DEVICEKIT_SLOW=1, and the fuzzer's
own machinery (shrinker, printer, crash isolation) checked on real kernels."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
from devicekit import settings

CI_N = settings.get("DEVICEKIT_FUZZ_N")


def _report(rep) -> str:
    lines = [f"{rep.tried} kernels in {rep.seconds:.1f} s, checks {rep.checks}"]
    lines += [f"seed {f.seed} {f.target} {f.kind}: {f.message[:300]}" for f in rep.findings]
    return "\n".join(lines)


# the CI run in chunks of seeds, one test each, so that pytest-xdist spreads them over the workers (each chunk in
# its worker's process: a native crash fails that chunk; test_a_native_crash_is_bisected_to_its_seed covers the
# fuzzer's own crash isolation)
CHUNK = 50


@pytest.mark.parametrize("first", range(0, CI_N, CHUNK), ids=lambda s: f"seeds{s}-{min(s + CHUNK, CI_N) - 1}")
def test_ci_fuzz_both_cpu_pairs_match_reference(first, record_property):
    from devicekit.testing.fuzz import fuzz
    n = min(CHUNK, CI_N - first)
    t0 = time.perf_counter()
    rep = fuzz(n, seed=first, kind="CPU", pairs=["llvm", "c"], profile="mixed", jobs=1)
    record_property("fuzz_seconds", round(time.perf_counter() - t0, 1))
    print(_report(rep))
    assert rep.tried == n and rep.checks == {"CPU/llvm": n, "CPU/c": n}
    assert not rep.findings, _report(rep)


def test_ci_fuzz_packed_gemms():
    """The gemms the optimizer packs (testing/fuzz_gemm.py: var and constant sizes no tile, panel or K block
    divides, transposes, epilogues) against the reference, a bounded run; the long one is test_long_fuzz's."""
    from devicekit.testing.fuzz import fuzz
    rep = fuzz(12, seed=720_000, kind="CPU", pairs=["llvm"], profile="gemm", jobs=1)
    assert rep.optimized >= 8, rep.optimized
    assert not rep.findings, [str(f) for f in rep.findings[:3]]


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["mixed", "ints", "floats", "memory", "gemm"])
def test_long_fuzz(profile):
    from devicekit.testing.fuzz import fuzz
    n = settings.get("DEVICEKIT_FUZZ_LONG_N")
    rep = fuzz(n, seed=1_000_000, kind="CPU", profile=profile, jobs=os.cpu_count() or 1)
    print(_report(rep))
    assert not rep.findings, _report(rep)


def test_fuzz_compile_only_for_kinds_that_cannot_run_here():
    """CUDA kernels compile to cubin with NVRTC where the wheels are installed, with no GPU (compile-only)."""
    import devicekit as dk
    from devicekit.testing.fuzz import fuzz_seeds
    try:
        t = dk.target("CUDA")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no CUDA compile toolchain here: {e}")
    if any(d.kind == "CUDA" and d.available for d in dk.devices()):
        pytest.skip("a CUDA device is present: the run-and-compare fuzz covers it")
    rep = fuzz_seeds(range(40), kind="CUDA", pairs=[t.pair_names[0]], profile="scalar")  # vectors: regressions
    assert rep.checks == {f"CUDA/{t.pair_names[0]}": 40}
    assert not rep.findings, _report(rep)


def test_fuzz_render_only_where_the_compiler_cannot_run_either():
    """METAL off macOS: the MSL renderer takes every kernel except float64 ones (documented as unsupported)."""
    import devicekit as dk
    from devicekit.testing.fuzz import Runner, fuzz_seeds
    try:
        dk.target("METAL")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no METAL renderer installed: {e}")
    if not Runner("METAL").render_only:
        pytest.skip("the Metal compiler runs here: the compile-only fuzz covers it")
    rep = fuzz_seeds(range(100), kind="METAL")
    assert rep.checks == {"METAL/metal": 100} and 0 < rep.unsupported.get("METAL/metal", 0) < 50
    assert not rep.findings, _report(rep)


def test_shrinker_minimizes_and_prints_a_rebuildable_kernel():
    """A planted 'bug' (any non-zero output) shrinks to a tiny kernel whose printed source rebuilds it exactly."""
    import devicekit as dk
    from devicekit.testing.fuzzgen import make_case
    from devicekit.testing.shrink import PRELUDE, shrink, to_python
    py = dk.device("PYTHON")

    def fails(k, inputs):
        try:
            out = dk.run(k, py, **inputs)
        except Exception:  # noqa: BLE001
            return False
        return any(np.nan_to_num(np.asarray(v, dtype=np.float64)).any() for v in out.values())

    case = make_case(11)
    assert fails(case.kernel, case.inputs)
    k, inputs, tried = shrink(case.kernel, case.inputs, fails)
    assert fails(k, inputs) and 0 < tried <= 400
    assert len(k.sink.toposort()) < len(case.kernel.sink.toposort()) // 2
    ns: dict = {}
    exec(PRELUDE + to_python(k, inputs), ns)  # noqa: S102 - the printed regression source is ours
    k2, inputs2 = ns["build"]()
    assert k2.key == k.key or all(np.array_equal(a, b) for a, b in zip(
        dk.run(k, py, **inputs).values(), dk.run(k2, py, **inputs2).values()))


def test_cli_reports_numbers_and_exit_status():
    p = subprocess.run([sys.executable, "-m", "devicekit.testing.fuzz", "--device", "CPU", "--pair", "c", "--n", "5",
                        "--seed", "0", "--jobs", "1"], capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "fuzz: 5 kernels (seeds 0..4" in p.stdout and "CPU/c: 5" in p.stdout and "0 findings" in p.stdout
    p = subprocess.run([sys.executable, "-m", "devicekit.testing.fuzz", "--n", "0"], capture_output=True, text=True,
                       timeout=60, check=False)
    assert p.returncode == 2 and "--n must be at least 1" in p.stderr


def test_a_native_crash_is_bisected_to_its_seed(monkeypatch):
    """A worker killed by a signal does not end the run: its chunk is split until the one seed is found."""
    from pathlib import Path

    from devicekit.testing import fuzz as fz
    helpers = str(Path(__file__).parent / "fixtures" / "helpers")
    monkeypatch.setenv("PYTHONPATH", helpers + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.syspath_prepend(helpers)
    import dkrel_crash_worker
    rep = fz.fuzz(40, seed=0, jobs=2, chunk=16, worker=dkrel_crash_worker.crash_on_13)
    crashes = [f for f in rep.findings if f.kind == "crash"]
    assert [f.seed for f in crashes] == [13] and rep.tried == 40


@pytest.mark.parametrize("profile", ["mixed", "memory", "wide", "shapes", "tiles", "gemm"])
def test_printed_source_rebuilds_the_same_kernel(profile):
    """`to_python` is the regression a finding becomes, so it must rebuild the very kernel: range numbering (the
    loop order) and each load of a written param at its build point (memory order) included. Before, memory
    kernels came back with their loops swapped or a load moved past a store (8 of 60 seeds)."""
    from devicekit.testing.fuzzgen import make_case
    from devicekit.testing.shrink import PRELUDE, to_python
    for seed in range(25):
        case = make_case(seed, profile)
        ns: dict = {}
        exec(PRELUDE + to_python(case.kernel, case.inputs), ns)  # noqa: S102 - the printed source is ours
        assert ns["build"]()[0].key == case.kernel.key, (profile, seed)


def test_printed_source_rebuilds_local_memory_and_barriers():
    """A kernel over a local array with a barrier (the memory profile draws local arrays; a GPU finding may have a
    barrier) is printed as `k.local` and `k.barrier()` at its place, and rebuilds the very kernel."""
    import numpy as np
    from devicekit import ir
    from devicekit.ir.dtypes import dtypes
    from devicekit.testing.shrink import PRELUDE, to_python
    k = ir.KernelBuilder("tile")
    x, out = k.param("x", dtypes.float32, 64), k.param("out", dtypes.float32, 64, writable=True)
    t = k.local("t", dtypes.float32, 16)
    g, i = k.range(4, "global"), k.range(16, "local")
    t[i] = x[g * 16 + i]
    k.barrier()
    out[g * 16 + i] = t[15 - i] * 2.0
    kern = k.build()
    src = to_python(kern, {"x": np.zeros(64, np.float32)})
    assert "k.local('t', dtypes.float32, 16)" in src and "k.barrier()" in src, src
    ns: dict = {}
    exec(PRELUDE + src, ns)  # noqa: S102 - the printed source is ours
    assert ns["build"]()[0].key == kern.key


def test_the_shrinker_keeps_the_indexes_of_written_params():
    """Shrinking `y[row + j]` to `y[j]` lets two lanes share an element (a race the verifier cannot always prove):
    candidates keep every index and gate into a param the kernel writes."""
    from devicekit.testing.fuzzgen import make_case
    from devicekit.testing.shrink import _expr_candidates, _written_indexing
    case = make_case(9019, "memory")
    kept = _written_indexing(case.kernel.sink.toposort())
    idx = {u.src[1] for u in kept if u.op.name == "INDEX"}
    assert idx
    for cand in _expr_candidates(case.kernel):
        cand_idx = {u.src[1] for u in cand.sink.toposort() if u.op.name == "INDEX" and u.src[0].arg[2]}
        assert cand_idx <= idx


def test_the_fuzzer_shows_progress(tmp_path):
    """`python -m devicekit.testing.fuzz` prints one line per chunk on stderr (kernels done, findings, time left)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEKIT_")}
    env["DEVICEKIT_CACHE_DIR"] = str(tmp_path)
    # the llvm pair: the progress lines are the pair's either way, and it compiles in-process (the c pair runs cc)
    p = subprocess.run([sys.executable, "-m", "devicekit.testing.fuzz", "--device", "CPU", "--pair", "llvm", "--n", "20",
                        "--jobs", "1"], capture_output=True, text=True, timeout=300, env=env, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("fuzz: ")]
    assert re.match(r"fuzz: 10/20 kernels, 0 findings, \d+ optimized, \d+ s, about \d+ s left$", lines[0]), lines
    assert lines[-1].startswith("fuzz: 20/20 kernels, 0 findings"), lines
    q = subprocess.run([sys.executable, "-m", "devicekit.testing.fuzz", "--device", "CPU", "--pair", "llvm", "--n", "2",
                        "--jobs", "1", "--no-progress"], capture_output=True, text=True, timeout=300, env=env,
                       check=False)
    assert q.returncode == 0 and "fuzz: 2/2" not in q.stderr, q.stderr


def test_red_zones_catch_a_store_outside_its_buffer():
    """The fuzzer runs every kernel with red zones around its buffers (testing/redzones.py): an unchecked scatter
    one element past the end is reported by param and side; in-bounds kernels give dk.run's results."""
    import devicekit as dk
    import numpy as np
    from devicekit import ir
    from devicekit.ir import dtypes
    from devicekit.testing import redzones

    k = ir.KernelBuilder("scatter")
    n = k.var("n", 1, 64)
    idx, out = k.param("idx", dtypes.int32, size=n), k.param("out", dtypes.float32, size=n, writable=True)
    i = k.range(n, "global")
    out[idx[i]] = 1.0
    unchecked = k.build(checked=False)  # no run-time guard: the index is trusted
    dev = dk.device("CPU")
    assert redzones.supported(dev)
    with pytest.raises(redzones.RedZoneError, match=r"scatter: the launch wrote 4 byte\(s\) after param 'out' "
                                                    r"\(16 bytes\), up to 4 byte\(s\) after it"):
        redzones.run(unchecked, dev, {"idx": np.array([0, 1, 2, 4], np.int32), "n": 4})
    with pytest.raises(redzones.RedZoneError, match="before param 'out'"):
        redzones.run(unchecked, dev, {"idx": np.array([0, -2, 2, 3], np.int32), "n": 4})
    ok = {"idx": np.array([3, 2, 1, 0], np.int32), "n": 4, "out": np.zeros(4, np.float32)}
    np.testing.assert_array_equal(redzones.run(unchecked, dev, ok)["out"], dk.run(unchecked, dev, **ok)["out"])


def test_no_cancelling_huge_terms_in_unordered_float_reductions():
    """docs/ir.md leaves a float sum's order open (the llvm pair keeps four partial sums): inputs of ±max/2 that
    cancel make any two orders disagree completely, so `wide` puts ±inf there instead (seed 3,095,419 of the llvm
    campaign: -1.187 in order, 0.0 with partial sums). Kernels without such a reduction keep ±max/2."""
    from devicekit.testing import fuzzgen

    seen = {True: 0, False: 0}
    for seed in [3095419, *range(1, 400, 2)]:
        case = fuzzgen.make_case(seed, "wide")
        unordered = fuzzgen._unordered_float_reduce(case.kernel)
        floats = [a for a in case.inputs.values() if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
        huge = any(np.any(np.isfinite(a) & (np.abs(a.astype(np.float64)) >= float(np.finfo(a.dtype).max) / 4))
                   for a in floats)
        if unordered:
            assert not huge, seed
        seen[unordered] += huge or unordered
    assert seen[True] >= 5 and seen[False] >= 5, seen  # both kinds occur, and the others still get ±max/2


def test_a_fuzz_run_in_this_process_leaves_the_disk_cache_alone(tmp_path, monkeypatch):
    """`--jobs 1` ran in the caller's process with its disk cache: a 40,000-kernel campaign left 114,000 entries in
    ~/.cache/devicekit. Memory only unless --disk-cache, in-process too; the caller's setting comes back after."""
    from devicekit.compile.cache import reset_default_cache
    from devicekit.testing.fuzz import fuzz

    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(tmp_path / "dk"))
    reset_default_cache()
    rep = fuzz(4, seed=5150, pairs=["llvm"], jobs=1)
    assert rep.tried == 4 and not rep.findings
    assert not [p for p in (tmp_path / "dk").rglob("*") if p.is_file() and p.suffix == ".dkc"]
    assert "DEVICEKIT_CACHE" not in os.environ
    fuzz(2, seed=5150, pairs=["llvm"], jobs=1, disk_cache=True)
    assert [p for p in (tmp_path / "dk").rglob("*.dkc")]  # asked for: stored
