#!/usr/bin/env python3
"""PolyBench/C 4.2 (examples/polybench, all 30 kernels) on the default CPU device against each module's numpy
reference, at PolyBench's MEDIUM sizes by default: issue 14's table. See docs/polybench.md.

    python bench/polybench.py                       # prints the table
    python bench/polybench.py --update-docs         # also writes it into docs/polybench.md
    python bench/polybench.py --only gemm,lu --size SMALL
"""

from __future__ import annotations

import os
import sys

# as bench/run.py: numpy's BLAS must use the whole machine (these two pin OpenBLAS to a core type on some hosts)
for _v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_v, None)

import argparse
import functools
import importlib
import platform
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from devicekit.bench import machine as bench_machine
from devicekit.bench.definition import best

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `examples` is importable from the repository root

from examples.polybench import CATEGORIES, KERNELS, NAMES
from examples.polybench._common import call

DOCS = ROOT / "docs" / "polybench.md"
BEGIN, END = "<!-- polybench:begin -->", "<!-- polybench:end -->"
SIZES = ("MINI", "SMALL", "MEDIUM")
ONE_RUN_S = 10.0  # a side whose warm-up call took longer is timed by that call alone (a Python loop in numpy)


@dataclass
class Row:
    """One kernel's line of the table: times are seconds (best of `dk_reps` / `np_reps` calls)."""
    kernel: str
    category: str
    directly: str
    correct: bool
    error: float
    checked_on: str
    dk_s: float
    np_s: float
    dk_reps: int
    np_reps: int


@contextmanager
def built_once(mod: Any) -> Iterator[None]:
    """`mod.kernel` / `mod.kernels` return the same ir.Kernel on every call while timing: building and verifying the
    IR (about 5 ms for gemm) is compile time, like the compile itself (memoized by the device)."""
    saved = {n: getattr(mod, n) for n in ("kernel", "kernels") if callable(getattr(mod, n, None))}
    try:
        for n, fn in saved.items():
            setattr(mod, n, functools.cache(fn))
        yield
    finally:
        for n, fn in saved.items():
            setattr(mod, n, fn)


def timed(fn: Any, first: float, reps: int, budget: float) -> tuple[float, int]:
    """(best time, calls timed) of `fn` after a warm-up call that took `first` seconds: that call alone when it took
    over ONE_RUN_S, else the best of up to `reps` calls stopping once `budget` seconds are spent."""
    if first > ONE_RUN_S:
        return first, 1
    n = 0

    def counted() -> None:
        nonlocal n
        n += 1
        fn()
    return best(counted, reps, warmup=0, budget=budget), n


def check(mod: Any, got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> tuple[bool, float]:
    """(every output allclose at the module's TOL, the largest |got - want| / (1 + |want|))."""
    tol = getattr(mod, "TOL", 1e-12)
    missing = set(want) - set(got)
    if missing:
        return False, float("inf")
    ok = all(np.allclose(got[k], w, rtol=tol, atol=tol) for k, w in want.items())
    err = max(float(np.max(np.abs(got[k] - w) / (1 + np.abs(w)))) for k, w in want.items())
    return ok, err


def measure(name: str, size: str, dev: Any, reps: int = 5, budget: float = 2.0) -> Row:
    """Build and compile (the warm-up call, untimed), time and check kernel `name` of examples.polybench at `size`
    on `dev`.

    Times use PolyBench's own sizes and initialisation. The check uses the same outputs, except for a module with
    test data (test_arrays / TEST_SIZES: PolyBench's data leaves an output unchanged or ill-defined), which is
    checked on that data in one more untimed call."""
    mod = importlib.import_module(f"examples.polybench.{name}")
    dims = mod.SIZES[size]
    scalars = getattr(mod, "SCALARS", {})
    arrs = call(mod.init_arrays, **dims)
    run_dk = lambda: mod.compute(dev, arrs, dims, **scalars)
    run_np = lambda: call(mod.reference, **arrs, **dims, **scalars)
    with built_once(mod):
        got = run_dk()  # builds and compiles
        t0 = time.perf_counter()
        run_dk()
        dk_s, dk_n = timed(run_dk, time.perf_counter() - t0, reps, budget)
    t0 = time.perf_counter()
    want = run_np()
    np_s, np_n = timed(run_np, time.perf_counter() - t0, reps, budget)
    checked_on = "PolyBench's data"
    if hasattr(mod, "test_arrays") or hasattr(mod, "TEST_SIZES"):
        tdims = getattr(mod, "TEST_SIZES", {}).get(size, dims)
        tarrs = call(getattr(mod, "test_arrays", mod.init_arrays), **tdims)
        got = mod.compute(dev, tarrs, tdims, **scalars)
        want = call(mod.reference, **tarrs, **tdims, **scalars)
        checked_on = "the tests' data" + ("" if tdims == dims else " (" + ", ".join(
            f"{k}={v}" for k, v in tdims.items()) + ")")
    ok, err = check(mod, got, want)
    workaround, note = getattr(mod, "WORKAROUND", None), getattr(mod, "NOTE", None)
    directly = f"no: {workaround}" if workaround else f"yes ({note})" if note else "yes"
    return Row(NAMES[name], CATEGORIES[name], directly, ok, err, checked_on,
               dk_s, np_s, dk_n, np_n)


def fmt_ms(t: float) -> str:
    ms = t * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}" if ms >= 1 else f"{ms:.3f}"


def table(rows: list[Row]) -> list[str]:
    """The markdown table: ratios are numpy time / devicekit time (above 1: devicekit is faster)."""
    lines = ["| kernel | category | directly | correct | devicekit ms | numpy ms | numpy / devicekit |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        correct = ("yes" if r.correct else "**NO**") + f" ({r.error:.1e}" + (
            "" if r.checked_on == "PolyBench's data" else f", on {r.checked_on}") + ")"
        np_ms = fmt_ms(r.np_s) + (" (1 run)" if r.np_reps == 1 else "")
        dk_ms = fmt_ms(r.dk_s) + (" (1 run)" if r.dk_reps == 1 else "")
        lines.append(f"| {r.kernel} | {r.category} | {r.directly} | {correct} | {dk_ms} | {np_ms} | "
                     f"{r.np_s / r.dk_s:.2f}x |")
    return lines


def header(dev: Any, load0: float | None, load1: float | None) -> str:
    """The machine, the devicekit pair and the load, as bench/run.py states them."""
    from devicekit_cpu import hostinfo
    pair = dev.pair_names[0]
    fmt = lambda x: "n/a" if x is None else f"{x:.2f}"
    return (f"Machine: {hostinfo.cpu_fingerprint().split(' flags=')[0]}, {os.cpu_count()} CPUs, devicekit CPU "
            f"threads {hostinfo.num_threads()}; python {platform.python_version()}, numpy {np.__version__}. "
            f"devicekit pair: {pair} ({dev.compiler.identity().split(' features=')[0]}). "
            f"Load average before/after the run: {fmt(load0)} / {fmt(load1)}. {bench_machine.describe()}.")


def select(only: str) -> list[str]:
    """The modules named in `only` (module or PolyBench names, comma-separated; empty: all 30), in table order."""
    if not only:
        return list(KERNELS)
    by_name = {**{m: m for m in KERNELS}, **{v: m for m, v in NAMES.items()}}
    asked = [s.strip() for s in only.split(",") if s.strip()]
    unknown = [s for s in asked if s not in by_name]
    if unknown:
        raise SystemExit(f"--only: unknown kernel(s) {', '.join(unknown)}; known: {', '.join(NAMES.values())}")
    picked = {by_name[s] for s in asked}
    return [m for m in KERNELS if m in picked]


def update_docs(text: str, path: Path = DOCS) -> None:
    """Replace what lies between BEGIN and END in `path` with `text`."""
    doc = path.read_text()
    if BEGIN not in doc or END not in doc or doc.index(BEGIN) > doc.index(END):
        raise SystemExit(f"{path}: no {BEGIN} ... {END} markers to write the table between")
    head, rest = doc.split(BEGIN, 1)
    path.write_text(head + BEGIN + "\n" + text + "\n" + END + rest.split(END, 1)[1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="kernels, comma-separated (gemm,floyd-warshall or floyd_warshall)")
    ap.add_argument("--size", default="MEDIUM", choices=SIZES, help="PolyBench's dataset size (default MEDIUM)")
    ap.add_argument("--reps", type=int, default=5, help="timed calls per side, at most (default 5)")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds per side and kernel (default 2)")
    ap.add_argument("--update-docs", action="store_true", help="also write the table into docs/polybench.md")
    args = ap.parse_args(argv)
    names = select(args.only)
    import devicekit as dk

    load0 = bench_machine.load()
    if (busy := bench_machine.busy_warning()) is not None:
        print(busy, file=sys.stderr)
    dev = dk.device("CPU")
    rows = []
    for i, name in enumerate(names, 1):
        print(f"[{i}/{len(names)}] {NAMES[name]} at {args.size}", file=sys.stderr, flush=True)
        rows.append(measure(name, args.size, dev, args.reps, args.budget))
    cmd = "python bench/polybench.py" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    text = "\n".join([(f"_Last run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, `{cmd}`, "
                      f"size {args.size}._"), "", header(dev, load0, bench_machine.load()), "", *table(rows)])
    print(text)
    if args.update_docs:
        update_docs(text)
    return 0 if all(r.correct for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
