"""Differential fuzzer: random well-formed kernels (`fuzzgen.make_case`) run on every compiler pair of a device and
compared with the PYTHON reference at docs/ir.md's tolerances. Kinds that cannot run here are compiled only (CUDA
without a GPU: NVRTC) or rendered only (METAL off macOS). Each finding is shrunk to a minimal kernel (`shrink.py`)
and printed as Python for a regression test. A kernel whose program starts on a quick build (tiers,
`Compiler.first_build`) runs again on its final build, which must give the same bits (`tier-mismatch` otherwise);
a kernel the optimizer rewrote runs again with other register tiles (`Kernel.with_tiles`, what `dk.search` picks
among).

    python -m devicekit.testing.fuzz --device CPU --pair llvm --n 2000 --seed 0 [--jobs 2] [--profile mixed] [--fit]

`--fit` keeps the generators to the dtypes every pair of the device renders (`Runner.fit_pool`: WEBGPU has no
64-bit or 8-bit data), so its whole campaign runs instead of being refused; what is still refused (a loop the
adapter caps, an int64 index the bounds proof cannot narrow) is counted as unsupported. Without it a seed gives
the kernel it always gave, on every device.

Seeds are split across worker processes (spawned: LLVM state is not fork-safe); a worker that dies (a native
crash) is bisected to the seed that kills it, reported as a `crash` finding. Compiles use a memory-only cache
unless `--disk-cache`. Exit status 1 when anything was found.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import redzones
from .fuzzgen import PROFILES, make_case
from .random_kernels import assert_matches, tolerance


@dataclass
class Finding:
    seed: int
    target: str  # "CPU/llvm"
    kind: str  # mismatch | error | compile-error | crash | reference-error | oob-write | tier-mismatch
    message: str


@dataclass
class Report:
    tried: int = 0  # kernels generated
    checks: dict[str, int] = field(default_factory=dict)  # target -> kernels checked on it
    unsupported: dict[str, int] = field(default_factory=dict)  # target -> kernels outside its documented dtypes
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    optimized: int = 0  # kernels the heuristic optimizer rewrote on some target (ir/optimize.py)
    tiered: int = 0  # kernels that ran on a quick build and then on their final build (same bits required)
    retiled: int = 0  # optimized kernels checked again with random other tiles (dk.search's candidates)
    indeterminate: int = 0  # checks not compared: an inf or NaN on the way, on a finite-math target (docs/ir.md)
    pool: tuple[str, ...] = ()  # --fit: the dtypes the generators were kept to

    def merge(self, other: Report) -> None:
        self.tried += other.tried
        self.optimized += other.optimized
        self.tiered += other.tiered
        self.retiled += other.retiled
        self.indeterminate += other.indeterminate
        self.pool = self.pool or other.pool
        for mine, theirs in ((self.checks, other.checks), (self.unsupported, other.unsupported)):
            for t, c in theirs.items():
                mine[t] = mine.get(t, 0) + c
        self.findings.extend(other.findings)


class Runner:
    """The targets of one device kind: one single-pair Device per pair when the kind runs here, else the pairs of
    its Target (compile only)."""

    def __init__(self, kind: str = "CPU", pairs: Iterable[str] | None = None, reference: str = "PYTHON"):
        import devicekit as dk
        from devicekit.errors import DeviceKitError
        from devicekit.targets import Device

        self.ref = dk.device(reference)
        self.compile_only = False
        try:
            dev = dk.device(kind)
            base = dev
        except DeviceKitError:
            base = dk.target(kind)
            self.compile_only = True
        names = list(pairs) if pairs else list(base.pair_names)
        self.targets: dict[str, Any] = {}
        for name in names:
            r, c = base.pair(name)
            label = f"{base.spec.kind}/{name}"
            self.targets[label] = (r, c) if self.compile_only else Device(base.spec, dev.allocator, r, c, dev.runtime)
        self._made = 0
        self.tiered = 0  # kernels checked on both tiers
        self.retiled = 0  # kernels the optimizer rewrote, checked again with other tiles (Kernel.with_tiles)
        self.indeterminate = 0  # checks on a finite-math target whose float results met an inf or NaN on the way
        self.unsupported: dict[str, int] = {}  # target -> kernels it refused as unsupported (not findings)
        self.render_only = self.compile_only and not self._can_compile()

    def fit_pool(self) -> tuple:
        """The dtypes of the generators' pool that every target renders, in ALL_DTYPES's order: what a `--fit`
        campaign's kernels use. bool always; bfloat16 also where the renderer lacks it but has uint16 (the core
        emulates it as uint16 bits, ir/linearize.py: the CPU pairs)."""
        from devicekit.ir import dtypes

        from .random_kernels import ALL_DTYPES
        ok = set(ALL_DTYPES)
        for t in self.targets.values():
            for r, _ in [t] if self.compile_only else t.compilers:
                has = set(getattr(r, "supported_dtypes", ALL_DTYPES)) | {dtypes.bool}
                ok &= has | ({dtypes.bfloat16} if dtypes.uint16 in has else set())
        return tuple(d for d in ALL_DTYPES if d in ok)

    def _can_compile(self) -> bool:
        """Whether the compilers of a kind that cannot run here still work (NVRTC does; Metal off macOS not)."""
        from devicekit.errors import CompileError
        from devicekit.ir import KernelError

        from .fuzzgen import fuzz_kernel
        r, c = next(iter(self.targets.values()))
        for seed in range(1, 65):  # the first kernel the kind renders (WEBGPU refuses 64-bit and 8-bit data)
            try:
                spec = r.render(fuzz_kernel(seed, shapes=("elementwise",)).kernel)
            except KernelError:
                continue
            try:
                c.compile(spec)
            except CompileError:
                return False
            return True
        return False

    def reference(self, case) -> dict:
        import devicekit as dk
        return dk.run(case.kernel, self.ref, **case.inputs)  # positional: a param may be named `device`

    def check_one(self, label: str, kernel, inputs: dict, want: dict | None) -> tuple[str, str] | None:
        """(kind, message) when `kernel` misbehaves on target `label`, else None."""
        from devicekit.errors import CompileError, DataRangeError
        from devicekit.ir import KernelError

        target = self.targets[label]
        try:
            if self.compile_only:
                r, c = target
                spec = r.render(kernel)
                if not self.render_only:
                    c.compile(spec)
                return None
            got = self._run(kernel, target, inputs)
            program = target.compile(kernel)  # the memo's Program, the one that just ran
            if program.tier == "quick":  # tiers: the final build must compute the very same values
                self.tiered += 1
                program.upgrade()
                final = self._run(kernel, target, inputs)
                for p in kernel.params:
                    if p.writable and (bad := tier_difference(got[p.name], final[p.name])):
                        return "tier-mismatch", f"{p.name}: the quick build and the final build differ: {bad}"
        except redzones.RedZoneError as e:
            return "oob-write", str(e)
        except IndexError as e:  # a run-time bounds check (ir/bounds.py): right when the reference raised it too
            if isinstance(want, IndexError) and _oob_access(e) == _oob_access(want):
                return None
            return "error", f"IndexError: {str(e)[:400]}" + (f" (reference: {want})" if isinstance(want, IndexError)
                                                            else "")
        except CompileError as e:
            return "compile-error", f"{e.message}: {str(e.log)[:400]}"
        except DataRangeError as e:  # a documented data limit of the target (int64 data on WEBGPU): not a bug
            return "unsupported", str(e).splitlines()[0]
        except KernelError as e:
            if "does not support" in str(e):  # a documented limit of the target (float64 on METAL): not a bug
                return "unsupported", str(e).splitlines()[0]
            return "error", f"KernelError: {str(e)[:400]}"
        except Exception as e:  # noqa: BLE001 - the fuzzer reports every failure
            return "error", f"{type(e).__name__}: {str(e)[:400]}"
        if isinstance(want, IndexError):
            return "mismatch", f"the reference raised IndexError ({want}); the target returned results"
        loose = _loosest_float(kernel)
        wide, finite, excused = None, True, False
        for p in kernel.params:
            if p.writable:
                dt = loose if p.dtype.is_float and loose is not None and tolerance(loose) > tolerance(p.dtype) \
                    else p.dtype
                try:
                    assert_matches(got[p.name], want[p.name], dt, p.name)
                except AssertionError as e:
                    if not getattr(getattr(target, "compiler", None), "reassociates", False):
                        return "mismatch", str(e)
                    if wide is None:
                        wide, finite = _wide_reference(kernel, inputs, want)
                    if not finite and p.dtype.is_float:  # an inf or NaN on the way: indeterminate from there on
                        excused = True
                        continue
                    try:  # each element: the exact value or the real-number one it approximates (reference/wide.py)
                        assert_matches(got[p.name], want[p.name], dt, p.name,
                                       also=_indeterminate_ok(got[p.name], want[p.name], wide[p.name], p.dtype))
                    except AssertionError as e2:
                        return "mismatch", str(e2)
        self.indeterminate += excused
        return None

    @staticmethod
    def _run(kernel, target, inputs: dict) -> dict:
        import devicekit as dk
        if redzones.supported(target):  # stores outside a buffer show, instead of corrupting a neighbour
            return redzones.run(kernel, target, inputs)
        return dk.run(kernel, target, **inputs)  # positional: a param may be named `device`

    def check(self, case) -> list[Finding]:
        try:
            want = self.reference(case)
        except IndexError as e:  # an index out of bounds (fuzzgen's gather shape): every target must raise it too
            want = e
        except Exception as e:  # noqa: BLE001 - a generator bug: the kernel should have been defined
            return [Finding(case.seed, "PYTHON", "reference-error", f"{type(e).__name__}: {str(e)[:400]}")]
        out = []
        from devicekit.ir import optimize
        before = optimize.applied
        for label in self.targets:
            if (bad := self.check_one(label, case.kernel, case.inputs, want)) is not None:
                if bad[0] == "unsupported":
                    self.unsupported[label] = self.unsupported.get(label, 0) + 1
                else:
                    out.append(Finding(case.seed, label, *bad))
        if optimize.applied > before and case.kernel.tiles is None:  # the optimizer rewrote it: one of the other
            import random  # tiles dk.search may pick must give the same results

            from devicekit.tile_search import LANES, ROWS
            r = random.Random(case.seed * 7919 + 3)
            tiles = (r.choice(ROWS), r.choice(LANES))
            variant = case.kernel.with_tiles(*tiles)
            self.retiled += 1
            for label in self.targets:
                if (bad := self.check_one(label, variant, case.inputs, want)) is not None and bad[0] != "unsupported":
                    out.append(Finding(case.seed, label, bad[0], f"with_tiles{tiles}: {bad[1]}"))
        self._made += 1
        if self._made % 500 == 0 and not self.compile_only:  # Device.compile memoizes every Program: start afresh
            self.targets = {lb: type(d)(d.spec, d.allocator, runtime=d.runtime, pairs=d.compilers,
                                        pair_names=d.pair_names) for lb, d in self.targets.items()}
        return out


def _indeterminate_ok(got, want, wide, dtype):
    """The widened reference, with the result itself where the exact value is inf or NaN: a compiler that may assume
    finite math (WGSL) gives an indeterminate value there (docs/ir.md), so such an element is not compared."""
    import numpy as np

    from .random_kernels import _as_f64
    if not dtype.is_float:
        return wide
    got, want, wide = np.asarray(got), np.asarray(want), np.asarray(wide)
    return np.where(np.isfinite(_as_f64(want, dtype)), wide, got)


def _wide_reference(kernel, inputs: dict, want: dict) -> tuple[dict, bool]:
    """kernel's results with its float arithmetic in float64 (reference/wide.py), from the case's inputs (an
    output the case leaves out starts zeroed, as `dk.run` allocates it, sized like the exact reference's), and
    whether every float value computed on the way was finite: where one was not, a compiler that assumes finite math
    may give anything for the float results (docs/ir.md), which are then not compared (`Runner.indeterminate`)."""
    import numpy as np

    from devicekit.reference.wide import evaluate_wide_finite
    names = {p.name for p in kernel.params}
    arrays = {k: np.asarray(v) for k, v in inputs.items() if k in names}
    arrays.update((n, np.zeros_like(np.asarray(want[n]))) for n in names - arrays.keys())
    return evaluate_wide_finite(kernel, arrays, {k: v for k, v in inputs.items() if k not in names})


def tier_difference(quick, final) -> str:
    """"" when two results hold the same bits (any NaN equals any NaN), else where they first differ."""
    import numpy as np
    a, b = np.ascontiguousarray(quick), np.ascontiguousarray(final)
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"shape/dtype {a.shape} {a.dtype} vs {b.shape} {b.dtype}"
    same = a.view(np.uint8).reshape(a.size, -1) == b.view(np.uint8).reshape(b.size, -1)
    same = same.all(axis=1) if a.size else same.reshape(0)
    if a.dtype.kind in "fc":
        same |= (np.isnan(a) & np.isnan(b)).reshape(-1)
    if same.all():
        return ""
    i = int(np.flatnonzero(~same)[0])
    return f"{int((~same).sum())} of {a.size} elements, first at flat index {i}: {a.reshape(-1)[i]!r} vs " \
           f"{b.reshape(-1)[i]!r}"


def _oob_access(e: IndexError) -> str:
    """'kernel K: access to P[' of a bounds-check message: the kernel and param (which lane's index is reported
    differs between devices when several are out of bounds)."""
    msg = str(e)
    return msg[: msg.find("[") + 1]


def _loosest_float(kernel) -> Any:
    """The float dtype of the kernel's computation with the widest tolerance: a float32 output computed through
    float16 ops may differ as float16 results do (a fused mulacc, libm vs numpy), so it is compared at that
    tolerance, not float32's."""
    floats = {u.dtype.scalar() for u in kernel.uops() if u.dtype.scalar().is_float}
    return max(floats, key=tolerance, default=None)


def fuzz_seeds(seeds: Iterable[int], kind: str = "CPU", pairs: Iterable[str] | None = None,
               profile: str = "mixed", fit: bool = False) -> Report:
    """Check each seed's kernel on every target, in this process (`fit`: kernels in the targets' dtypes only)."""
    t0 = time.perf_counter()
    runner = Runner(kind, pairs)
    pool = runner.fit_pool() if fit else None
    rep = Report(pool=tuple(d.name for d in pool) if pool else ())
    from devicekit.ir import optimize
    for seed in seeds:
        case = make_case(seed, profile, pool)
        rep.tried += 1
        before = optimize.applied
        rep.findings.extend(runner.check(case))
        rep.optimized += optimize.applied > before
        for t in runner.targets:
            rep.checks[t] = rep.checks.get(t, 0) + 1
    rep.unsupported = dict(runner.unsupported)
    rep.tiered = runner.tiered
    rep.retiled = runner.retiled
    rep.indeterminate = runner.indeterminate
    rep.seconds = time.perf_counter() - t0
    return rep


def _worker(args: tuple) -> Report:
    seeds, kind, pairs, profile, disk, fit = args
    if not disk:
        os.environ["DEVICEKIT_CACHE"] = "0"
    import warnings
    warnings.simplefilter("ignore")
    return fuzz_seeds(seeds, kind, pairs, profile, fit)


@contextlib.contextmanager
def _memory_only_cache():
    """DEVICEKIT_CACHE=0 for the block, the process's compile cache rebuilt on entry and exit: a fuzz run in this
    process must not fill the user's disk cache (a 40,000-kernel campaign left 114,000 entries)."""
    from devicekit.compile.cache import reset_default_cache
    old = os.environ.pop("DEVICEKIT_CACHE", None)  # the caller's raw value, put back as it was (not a read)
    os.environ["DEVICEKIT_CACHE"] = "0"
    reset_default_cache()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("DEVICEKIT_CACHE", None)
        else:
            os.environ["DEVICEKIT_CACHE"] = old
        reset_default_cache()


def fuzz(n: int, seed: int = 0, kind: str = "CPU", pairs: Iterable[str] | None = None, profile: str = "mixed",
         jobs: int = 1, disk_cache: bool = False, chunk: int = 100, worker: Any = None,
         progress: Callable[[Report, int], None] | None = None, fit: bool = False) -> Report:
    """Seeds seed..seed+n-1 on `jobs` worker processes (1: in this process). `worker` replaces the per-chunk
    function (a picklable module-level function, for tests of the crash handling). `progress(report so far, n)` is
    called after each chunk of seeds (`--jobs 1`: every `chunk` seeds too). `fit`: kernels in the dtypes the
    device renders (`Runner.fit_pool`)."""
    t0 = time.perf_counter()
    pairs = list(pairs) if pairs else None
    seeds = list(range(seed, seed + n))
    if jobs <= 1 and not disk_cache:  # in this process too: a memory-only cache (the workers set it for theirs)
        with _memory_only_cache():
            return fuzz(n, seed, kind, pairs, profile, jobs, True, chunk, worker, progress, fit)
    if jobs <= 1:
        if progress is None:
            rep = fuzz_seeds(seeds, kind, pairs, profile, fit)
        else:
            rep = Report()
            for i in range(0, len(seeds), chunk):
                rep.merge(fuzz_seeds(seeds[i:i + chunk], kind, pairs, profile, fit))
                rep.seconds = time.perf_counter() - t0
                progress(rep, n)
        rep.seconds = time.perf_counter() - t0
        return rep
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    chunks = [seeds[i:i + chunk] for i in range(0, len(seeds), chunk)]
    rep, broken = Report(), []
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=ctx) as ex:
        futs = [(c, ex.submit(worker or _worker, (c, kind, pairs, profile, disk_cache, fit))) for c in chunks]
        for c, f in futs:
            try:
                rep.merge(f.result())
            except BrokenProcessPool:  # this chunk, or another in the same pool, killed a worker
                broken.append(c)
            if progress is not None:
                rep.seconds = time.perf_counter() - t0
                progress(rep, n)

    def isolate(c: list[int]) -> None:
        """Run `c` alone; when its worker dies, halve it until the seed that kills it is found."""
        try:
            with ProcessPoolExecutor(1, mp_context=ctx) as ex:
                rep.merge(ex.submit(worker or _worker, (c, kind, pairs, profile, disk_cache, fit)).result())
        except BrokenProcessPool:
            if len(c) == 1:
                rep.tried += 1
                rep.findings.append(Finding(c[0], kind, "crash", "the worker process died (native crash)"))
            else:
                isolate(c[:len(c) // 2])
                isolate(c[len(c) // 2:])

    for c in broken:
        isolate(c)
    rep.seconds = time.perf_counter() - t0
    return rep


def _dtypes(names: Iterable[str]) -> tuple:
    from devicekit.ir import dtypes
    return tuple(getattr(dtypes, n) for n in names)


def print_progress(rep: Report, n: int) -> None:
    """One line on stderr per finished chunk: kernels done, findings and optimized kernels so far, time spent and
    left (a campaign stopped by hand still says what it reached)."""
    done = min(rep.tried, n)
    left = rep.seconds / done * (n - done) if done else 0.0
    print(f"fuzz: {done}/{n} kernels, {len(rep.findings)} findings, {rep.optimized} optimized, {rep.seconds:.0f} s"
          + (f", about {left:.0f} s left" if done < n else ""), file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m devicekit.testing.fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="CPU", help="device kind (default CPU)")
    ap.add_argument("--pair", action="append", help="compiler pair (repeatable; default: every pair)")
    ap.add_argument("--n", type=int, default=1000, help="kernels to try")
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--profile", default="mixed", choices=PROFILES)
    ap.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 8))
    ap.add_argument("--fit", action="store_true",
                    help="kernels only in the dtypes every pair of the device renders (refusals still counted)")
    ap.add_argument("--disk-cache", action="store_true", help="store compiled kernels in the disk cache")
    ap.add_argument("--no-shrink", action="store_true", help="report findings without shrinking them")
    ap.add_argument("--max-shrink", type=int, default=10, help="shrink at most this many findings")
    ap.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    args = ap.parse_args(argv)
    if args.n < 1:
        ap.error("--n must be at least 1")
    rep = fuzz(args.n, args.seed, args.device, args.pair, args.profile, args.jobs, args.disk_cache,
               chunk=min(100, max(10, args.n // 20)), progress=None if args.no_progress else print_progress,
               fit=args.fit)
    rate = ", ".join(f"{t}: {c}" for t, c in rep.checks.items())
    print(f"fuzz: {rep.tried} kernels (seeds {args.seed}..{args.seed + args.n - 1}, profile {args.profile}"
          f"{', fitted to ' + '/'.join(rep.pool) if args.fit else ''}) in "
          f"{rep.seconds:.1f} s; checked {rate}; optimized {rep.optimized}; "
          f"on both tiers {rep.tiered}; "
          f"retiled {rep.retiled}; {len(rep.findings)} findings"
          + (f"; refused as unsupported (not findings): {rep.unsupported}" if rep.unsupported else "")
          + (f"; not compared, an inf or NaN on the way on a finite-math target: {rep.indeterminate}"
             if rep.indeterminate else ""))
    for f in rep.findings:
        print(f"  seed {f.seed} {f.target} {f.kind}: {f.message.splitlines()[0][:300]}")
    if rep.findings and not args.no_shrink:
        from .shrink import shrink_finding
        os.environ.setdefault("DEVICEKIT_CACHE", "0")
        for f in rep.findings[:args.max_shrink]:
            if f.kind in ("crash", "reference-error"):
                continue
            print(f"\n# ---- seed {f.seed} on {f.target} ({f.kind}), shrunk:")
            print(shrink_finding(f, args.profile, args.device, pool=_dtypes(rep.pool) if args.fit else None))
    return 1 if rep.findings else 0


if __name__ == "__main__":
    sys.exit(main())
