"""dk.search and Kernel.with_tiles on the real CPU device: the candidates are timed, the fastest kept, the choice
remembered in memory and in the compile cache (a second process reuses it without timing)."""

from __future__ import annotations

import os
import subprocess
import sys

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir, kernels
from devicekit import tile_search as search
from devicekit.ir import dtypes


def _gemm(n: int, name: str):
    k = ir.KernelBuilder(name)
    a, b = k.param("a", dtypes.float32, size=n * n), k.param("b", dtypes.float32, size=n * n)
    c = k.param("c", dtypes.float32, size=n * n, writable=True)
    i, j, r = k.range(n, "global"), k.range(n, "global"), k.range(n, "reduce")
    c[i * n + j] = (a[i * n + r] * b[r * n + j]).sum(r)
    return k.build()


# the searching tests share one kernel (SEARCHED): a process compiles each of its candidates once, and the next test's
# search, with its own memory of choices and its own disk cache, times them again without compiling them again
# (three searches of three names compiled every candidate three times: 5 to 9 s each)
SEARCHED = "search_gemm"


def _var_gemm(name: str):
    k = ir.KernelBuilder(name)
    n = k.var("n", 1, 4096)
    a, b = k.param("a", dtypes.float32, size=n * n), k.param("b", dtypes.float32, size=n * n)
    c = k.param("c", dtypes.float32, size=n * n, writable=True)
    i, j, r = k.range(n, "global"), k.range(n, "global"), k.range(n, "reduce")
    c[i * n + j] = (a[i * n + r] * b[r * n + j]).sum(r)
    return k.build()


def test_search_keeps_a_candidate_that_computes_the_product(monkeypatch, tmp_path):
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(search, "_CHOSEN", search.LRU(search.CHOSEN_MEMO_SIZE))
    kern = _var_gemm(SEARCHED)
    cpu = dk.device("CPU")
    prog = dk.search(kern, cpu, n=96)
    assert prog.spec.get_meta("opts"), "a candidate the optimizer rewrote (as written is far slower at 96)"
    key = search._key(kern, cpu, cpu.compiler, [96])
    assert search._CHOSEN.get(key) in ("heuristic", *([r, lane] for r in search.ROWS for lane in search.LANES))
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal(96 * 96).astype(np.float32) for _ in range(2))
    got = dk.run(prog, a=a, b=b, n=96)["c"]
    np.testing.assert_allclose(got.reshape(96, 96), a.reshape(96, 96) @ b.reshape(96, 96), rtol=2e-4, atol=2e-4)
    assert dk.search(kern, cpu, n=96) is prog  # remembered: no timing, the same Program


def test_a_second_process_reuses_the_choice_without_timing(tmp_path):
    code = (
        "import devicekit as dk, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from test_search import _gemm\n"
        "p = dk.search(_gemm(48, 'search_two_processes'), 'CPU')\n"
        "print('OPTS', p.spec.get_meta('opts'))\n")
    env = {**os.environ, "DEVICEKIT_CACHE_DIR": str(tmp_path), "DEVICEKIT_DEBUG": "2"}
    runs = [subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__)], env=env, capture_output=True, check=False,
                           text=True, timeout=120) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    first, second = runs
    assert "search chose tiles" in first.stderr and "search result reused" not in first.stderr
    assert "search result reused" in second.stderr and "search chose tiles" not in second.stderr
    opts = [line for line in first.stdout.splitlines() if line.startswith("OPTS")]
    assert opts == [line for line in second.stdout.splitlines() if line.startswith("OPTS")]


def test_nothing_to_search_returns_the_compiled_kernel():
    cpu = dk.device("CPU")
    ew = kernels.elementwise("a * b", name="search_elementwise")
    assert dk.search(ew, cpu, n=8) is cpu.compile(ew)  # no reduction: the optimizer does not rewrite it
    k = ir.KernelBuilder("search_as_written")
    a = k.param("a", dtypes.float32, size=64)
    out = k.param("out", dtypes.float32, size=8, writable=True)
    i, r = k.range(8, "global"), k.range(8, "reduce")
    out[i] = a[i * 8 + r].sum(r)
    as_written = k.build(optimize=False)
    assert dk.search(as_written, cpu) is cpu.compile(as_written)


def test_search_names_a_missing_or_unknown_var():
    kern = _var_gemm("search_missing")
    with pytest.raises(TypeError, match="needs a value for every var.*missing n"):
        dk.search(kern, "CPU")
    with pytest.raises(TypeError, match="unexpected argument.*m"):
        dk.search(kern, "CPU", n=8, m=3)
    with pytest.raises(ValueError, match="reps"):
        dk.search(kern, "CPU", reps=0, n=8)


def test_with_tiles_sets_the_tile_and_the_key():
    kern = _gemm(32, "tiles_gemm")
    cpu = dk.device("CPU")
    assert cpu.compile(kern.with_tiles(1, 1)).spec.get_meta("opts") in (None, ())  # as written
    opts = cpu.compile(kern.with_tiles(2, 8)).spec.get_meta("opts")
    assert opts == ("unroll global range 0 x2", "upcast global range 1 x8")
    assert len({kern.key, kern.with_tiles(2, 8).key, kern.with_tiles(8, 2).key}) == 3
    for bad in (0, 17, "4", True):
        with pytest.raises(ValueError, match="with_tiles"):
            kern.with_tiles(bad, 4)


def test_run_searches_when_asked(monkeypatch, tmp_path):
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("DEVICEKIT_SEARCH", "1")
    monkeypatch.setattr(search, "_CHOSEN", search.LRU(search.CHOSEN_MEMO_SIZE))
    kern = _var_gemm(SEARCHED)
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal(40 * 40).astype(np.float32) for _ in range(2))
    got = dk.run(kern, "CPU", a=a, b=b, n=40)["c"]
    np.testing.assert_allclose(got.reshape(40, 40), a.reshape(40, 40) @ b.reshape(40, 40), rtol=2e-4, atol=2e-4)
    cpu = dk.device("CPU")
    assert search._key(kern, cpu, cpu.compiler, [40]) in search._CHOSEN


@pytest.mark.parametrize("stored", [b"[99, 3]", b"\xff not json", b'"fastest"', b"[4]", b"[true, 4]", b"[1.0, 4]",
                                    b"[4, true]", b"[2, 4.0]", b"[[2], 4]", b"null", b"[" * 100_000,
                                    b'["heuristic"]', b"[2, 4, 8]"])
def test_a_stored_choice_that_makes_no_sense_is_searched_again(monkeypatch, tmp_path, stored):
    """A choice entry is MAC-checked like compiled bytes (a planted one never verifies); one that verifies but that
    this version does not understand (another version's candidates, damage before it was written) is searched
    again and replaced."""
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(search, "_CHOSEN", search.LRU(search.CHOSEN_MEMO_SIZE))
    kern = _var_gemm(SEARCHED)
    cpu = dk.device("CPU")
    key = search._key(kern, cpu, cpu.compiler, [24])
    store = search._store(cpu.compiler)
    store.put(search._cache_key(key), stored, replace=True)
    prog = dk.search(kern, cpu, n=24)
    choice = search._CHOSEN.get(key)
    assert search.valid_choice(choice)
    assert store.get(search._cache_key(key)) != stored  # replaced by the new search's choice
    assert prog.spec.name == SEARCHED
    search._CHOSEN.clear()  # the next search of the kernel reads the replaced entry and reuses it
    assert dk.search(kern, cpu, n=24).spec.name == SEARCHED


def test_a_bad_stored_choice_is_said_at_debug_level(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("DEVICEKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("DEVICEKIT_DEBUG", "1")
    monkeypatch.setattr(search, "_CHOSEN", search.LRU(search.CHOSEN_MEMO_SIZE))
    kern = _var_gemm("search_bool_entry")
    cpu = dk.device("CPU")
    key = search._key(kern, cpu, cpu.compiler, [24])
    search._store(cpu.compiler).put(search._cache_key(key), b"[true, 4]", replace=True)
    assert search._recall(key, cpu.compiler) is None
    assert "stored dk.search choice [True, 4] is not one this version makes: searching again" in capsys.readouterr().err
