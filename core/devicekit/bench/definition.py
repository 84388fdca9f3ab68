"""The benchmark definition shared by `devicekit bench` and bench/run.py: the standard kernels (elementwise fma, sum,
softmax, matmul; plus proposals for bench/run.py) at three sizes, each with its inputs, its numpy version (timed and
used as the expected result), its tolerance, the work it does and, for bench/run.py, its tinygrad expression. Also
the timing rule (best of a few launches after a warm-up) and running every case on devices; the CLI's table, plot
and progress bar are in report.py.

Profiles: "quick" (a smoke run in seconds), "standard" (`devicekit bench`: a full run on every device in well under a
minute on two cores), "large" (bench/run.py: sizes where one launch takes milliseconds on a CPU)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PROFILES", "BenchCase", "BenchResult", "Prepared", "best", "cases", "prepare", "run_bench", "time_numba",
           "time_numpy"]

PROFILES = ("quick", "standard", "large")


@dataclass(frozen=True)
class Prepared:
    """A case compiled and its inputs copied onto a device: `launch()` runs it once (waiting; returns the device's
    own time in seconds when it reports one), `output()` reads the result back as a flat numpy array."""

    launch: Callable[[], float | None]
    output: Callable[[], np.ndarray]


@dataclass(frozen=True)
class BenchCase:
    """One kernel at one size: how to build it and its inputs, the numpy version, and the work it does."""

    name: str  # "fma": the CLI's row
    size: str  # human-readable shape
    title: str  # bench/run.py's row: "fused a*b+c 16M f32"
    kernel: Callable[[], Any]  # -> ir.Kernel (the first of them when `setup` launches several)
    inputs: Callable[[], dict[str, Any]]  # named numpy arrays and int vars, as dk.run takes them (made on call)
    output: str  # the writable param compared with numpy
    reference: Callable[[dict[str, Any]], np.ndarray]  # numpy on the same inputs: timed, and the expected result
    work: float  # bytes moved (unit GB/s) or flops (unit GFLOP/s)
    unit: str
    rtol: float = 1e-3
    atol: float = 1e-3
    # (function over tinygrad Tensors, its numpy arguments) for bench/run.py's tinygrad column; None: no such row
    tinygrad: Callable[[dict[str, Any]], tuple[Callable[..., Any], tuple[np.ndarray, ...]]] | None = None
    # compile + copy in when one kernel launch is not the whole case (a two-stage sum, a pack then a matmul)
    setup: Callable[[Any, dict[str, Any]], Prepared] | None = None

    def check(self, got: np.ndarray, want: np.ndarray) -> str:
        """"" when `got` matches numpy within the case's tolerance, else the error in words."""
        got, want = np.asarray(got, np.float64).reshape(-1), np.asarray(want, np.float64).reshape(-1)
        if got.shape != want.shape:
            return f"{got.size} values, numpy gives {want.size}"
        if np.allclose(got, want, rtol=self.rtol, atol=self.atol):
            return ""
        return f"max abs error {float(np.max(np.abs(got - want))):.3g} against numpy"


@dataclass
class BenchResult:
    case: str
    size: str
    device: str
    seconds: float | None  # best time of one launch, None when it failed
    numpy_seconds: float
    work: float
    unit: str
    ok: bool
    error: str = ""
    numba_seconds: float | None = None  # the case's parallel numba version on the same data (numba_versions.py)

    @property
    def rate(self) -> float | None:
        return None if not self.seconds else self.work / self.seconds / 1e9

    @property
    def vs_numpy(self) -> float | None:
        """numpy time / device time: above 1 the device is faster than numpy."""
        return None if not self.seconds else self.numpy_seconds / self.seconds

    @property
    def vs_numba(self) -> float | None:
        """numba time / device time (None without a numba time)."""
        return None if not self.seconds or not self.numba_seconds else self.numba_seconds / self.seconds

    def to_dict(self) -> dict:
        return {"kernel": self.case, "size": self.size, "device": self.device, "seconds": self.seconds,
                "numpy_seconds": self.numpy_seconds, "rate": self.rate, "unit": self.unit, "vs_numpy": self.vs_numpy,
                "numba_seconds": self.numba_seconds, "vs_numba": self.vs_numba, "ok": self.ok, "error": self.error}


# ------------------------------------------------------------------ the cases
def _count(n: int) -> str:
    for unit, shift in (("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _normal(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _buffers(dev: Any, program: Any, inputs: dict[str, Any], extra: dict[str, Any] | None = None) -> tuple[list, list]:
    """(buffers in param order, var values) for `program`: inputs copied in, other params allocated; `extra` names
    buffers to pass as they are."""
    from ..memory import Buffer

    spec = program.spec
    vals = [int(inputs[v.name]) for v in spec.vars]
    bufs = []
    for p, size in zip(spec.user_params, spec.buffer_sizes(spec.check_vars(vals))):
        if extra and p.name in extra:
            bufs.append(extra[p.name])
            continue
        b = Buffer(dev, size, p.dtype)
        if p.name in inputs:
            b.copyin(inputs[p.name])
        bufs.append(b)
    return bufs, vals


def final(program: Any) -> Any:
    """`program` on its final build (tiers: a new kernel starts on a quick one): what a benchmark times."""
    program.upgrade()
    return program


def prepare(case: BenchCase, dev: Any, inputs: dict[str, Any]) -> Prepared:
    """Compile `case` for `dev` and copy its inputs in (neither is timed)."""
    if case.setup is not None:
        return case.setup(dev, inputs)
    return _prepared(dev, final(dev.compile(case.kernel())), inputs, case.output)


def _prepared(dev: Any, program: Any, inputs: dict[str, Any], output: str) -> Prepared:
    """One launch of `program` on buffers holding `inputs`, and the readback of its param `output`."""
    bufs, vals = _buffers(dev, program, inputs)
    out = bufs[[p.name for p in program.spec.user_params].index(output)]
    return Prepared(lambda: program.execute(bufs, vals, wait=True), out.numpy)


def _two(t1: float | None, t2: float | None) -> float | None:
    return None if t1 is None or t2 is None else t1 + t2


def _total_sum_setup(parts: int) -> Callable[[Any, dict[str, Any]], Prepared]:
    """A full sum as two launches of one row-sum kernel built for `dev` (its vector register's lanes): `parts` rows
    of n/parts (on the device's threads), then the sum of the `parts` partials (a few microseconds: the first launch,
    the read of the input, is the case's time)."""
    def setup(dev: Any, inputs: dict[str, Any]) -> Prepared:
        from .. import kernels

        program = final(dev.compile(kernels.reduce("sum", name="bench_sum", device=dev)))
        n = inputs["x"].size
        rows, _ = _buffers(dev, program, {"x": inputs["x"], "m": parts, "n": n // parts})
        (_, total), _ = _buffers(dev, program, {"m": 1, "n": parts}, {"x": rows[1]})
        stage1, stage2 = [rows[0], rows[1]], [rows[1], total]
        return Prepared(lambda: _two(program.execute(stage1, [parts, n // parts], wait=True),
                                     program.execute(stage2, [1, parts], wait=True)), total.numpy)
    return setup


def _packed_setup(s: int, pack_timed: bool = True) -> Callable[[Any, dict[str, Any]], Prepared]:
    """pack_b then the panels matmul; `pack_timed=False`: b packed once here (a weight, as an MLP's is), the matmul
    alone timed."""
    def setup(dev: Any, inputs: dict[str, Any]) -> Prepared:
        from .. import kernels
        pack, mm = kernels.pack_b(s, s), kernels.matmul(s, s, s, b_layout="panels", name="bench_matmul_panels",
                                                     device=dev)
        pp, pm = final(dev.compile(pack)), final(dev.compile(mm))
        pbufs, _ = _buffers(dev, pp, inputs)
        mbufs, _ = _buffers(dev, pm, inputs, {"bp": pbufs[1]})
        if not pack_timed:
            pp.execute(pbufs, [], wait=True)
            return Prepared(lambda: pm.execute(mbufs, [], wait=True), mbufs[2].numpy)
        return Prepared(lambda: _two(pp.execute(pbufs, [], wait=True), pm.execute(mbufs, [], wait=True)),
                        mbufs[2].numpy)
    return setup


def naive_matmul(s: int, optimize: bool = True):
    """c = a @ b written the obvious way, one output per lane: fast only through the core's optimizer (ir/optimize.py,
    issue 17's "naive kernels made fast by the core"); `optimize=False` is the kernel as written."""
    from .. import ir
    from ..ir import dtypes
    k = ir.KernelBuilder("bench_matmul_naive")
    a, b = k.param("a", dtypes.float32, shape=(s, s)), k.param("b", dtypes.float32, shape=(s, s))
    c = k.param("c", dtypes.float32, shape=(s, s), writable=True)
    i, j, r = k.range(s, "global"), k.range(s, "global"), k.range(s, "reduce")
    c[i, j] = (a[i, r] * b[r, j]).sum(r)
    return k.build(optimize=optimize)


def gather_kernel(checked: bool = True):
    """out[i] = x[idx[i]]: a data-dependent index, guarded at run time unless `checked` is False (docs/ir.md)."""
    from .. import ir
    from ..ir import dtypes
    k = ir.KernelBuilder("bench_gather" if checked else "bench_gather_unchecked")
    n, m = k.var("n", 1), k.var("m", 1)
    x, idx = k.param("x", dtypes.float32, m), k.param("idx", dtypes.int64, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[idx[i]]
    return k.build(checked=checked)


def _made_for(make: Callable[[Any], Any], output: str = "out") -> Callable[[Any, dict[str, Any]], Prepared]:
    """The kernel `make(dev)` builds for the device it runs on (library kernels sized by its registers)."""
    def setup(dev: Any, inputs: dict[str, Any]) -> Prepared:
        return _prepared(dev, final(dev.compile(make(dev))), inputs, output)
    return setup


def _searched_setup(make: Callable[[], Any]) -> Callable[[Any, dict[str, Any]], Prepared]:
    """The kernel with the tile dk.search times fastest on `dev` (the search itself is not timed here)."""
    def setup(dev: Any, inputs: dict[str, Any]) -> Prepared:
        from ..tile_search import search
        return _prepared(dev, search(make(), dev), inputs, "c")
    return setup


def _wall_clock_setup(make: Callable[[], Any]) -> Callable[[Any, dict[str, Any]], Prepared]:
    """One launch timed on the wall clock: the checked gather's cost includes the hidden record's allocation and
    read-back, which happen in Program.execute, outside the time a runtime reports."""
    def setup(dev: Any, inputs: dict[str, Any]) -> Prepared:
        program = final(dev.compile(make()))
        bufs, vals = _buffers(dev, program, inputs)
        return Prepared(lambda: (program.execute(bufs, vals, wait=True), None)[1], bufs[2].numpy)
    return setup


def naive_sum():
    """A full sum written the obvious way, `o[0] = x[r].sum(r)`: one launch with no global range; a CPU splits it
    across its threads itself (devicekit_cpu/split_reduce.py), as the sum row's two launches do by hand."""
    from .. import ir
    from ..ir import dtypes
    k = ir.KernelBuilder("bench_sum_naive")
    n = k.var("n", 0)
    x, o = k.param("x", dtypes.float32, n), k.param("o", dtypes.float32, 1, writable=True)
    r = k.range(n, "reduce")
    o[0] = x[r].sum(r)
    return k.build()


def _naive_sum_setup(dev: Any, inputs: dict[str, Any]) -> Prepared:
    program = final(dev.compile(naive_sum()))
    bufs, vals = _buffers(dev, program, {**inputs, "n": inputs["x"].size})
    return Prepared(lambda: program.execute(bufs, vals, wait=True), bufs[1].numpy)


_SIZES = {  # profile -> fma n, sum n, softmax (rows, cols), matmul s
    "quick": (1 << 14, 1 << 14, (32, 256), 32),
    "standard": (1 << 21, 1 << 21, (512, 1024), 256),
    "large": (16 << 20, 16 << 20, (4096, 1024), 1024),
}
SUM_PARTS = 64  # a full sum runs as 64 row sums, then one sum of the partials


def cases(quick: bool = False, profile: str | None = None, proposals: bool = False) -> list[BenchCase]:
    """The standard set: fma (bandwidth), sum (bandwidth), softmax (bandwidth + exp), matmul (compute), at the sizes
    of `profile` ("quick" when `quick`, else "standard" by default). `proposals` adds the kernels proposed for the
    library's packed-B matmul (`kernels.pack_b`, then `kernels.matmul(b_layout="panels")`) and the naive matmul the core's optimizer tiles, which bench/run.py reports."""
    from .. import kernels

    profile = profile or ("quick" if quick else "standard")
    if profile not in _SIZES:
        raise ValueError(f"benchmark profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    n, ns, (srows, scols), s = _SIZES[profile]
    out = [
        BenchCase("fma", f"n={n}", f"fused a*b+c {_count(n)} f32",
                  lambda: kernels.elementwise("a * b + c", name="bench_fma"),
                  lambda: {"a": _normal(0, n), "b": _normal(1, n), "c": _normal(2, n), "n": n}, "out",
                  lambda d: d["a"] * d["b"] + d["c"], 16.0 * n, "GB/s", rtol=1e-5, atol=1e-5,
                  tinygrad=lambda d: (lambda x, y, z: x * y + z, (d["a"], d["b"], d["c"]))),
        BenchCase("sum", f"n={ns}", f"sum {_count(ns)} f32", lambda: kernels.reduce("sum", name="bench_sum"),
                  lambda: {"x": _normal(3, ns)}, "out", lambda d: d["x"].sum(),
                  4.0 * ns, "GB/s", rtol=0.0, atol=1e-3 * ns ** 0.5,
                  tinygrad=lambda d: (lambda x: x.sum(), (d["x"],)), setup=_total_sum_setup(SUM_PARTS)),
        BenchCase("softmax", f"{srows}x{scols}", f"softmax {srows}x{scols} f32",
                  lambda: kernels.softmax(name="bench_softmax"),
                  lambda: {"x": _normal(4, srows * scols), "m": srows, "n": scols}, "out",
                  lambda d: _softmax(d["x"].reshape(srows, scols)).reshape(-1), 8.0 * srows * scols, "GB/s",
                  rtol=1e-4, atol=1e-6, setup=_made_for(lambda dev: kernels.softmax(name="bench_softmax", device=dev)),
                  tinygrad=lambda d: (lambda t: t.softmax(axis=1), (d["x"].reshape(srows, scols),))),
        BenchCase("matmul", f"{s}x{s}x{s}", f"matmul {s} f32", lambda: kernels.matmul(s, s, s, name="bench_matmul"),
                  lambda: {"a": _normal(5, s * s), "b": _normal(6, s * s)}, "c",
                  lambda d: (d["a"].reshape(s, s) @ d["b"].reshape(s, s)).reshape(-1), 2.0 * s ** 3, "GFLOP/s",
                  setup=_made_for(lambda dev: kernels.matmul(s, s, s, name="bench_matmul", device=dev), "c"),
                  tinygrad=lambda d: (lambda x, y: x @ y, (d["a"].reshape(s, s), d["b"].reshape(s, s)))),
    ]
    gather_in = lambda: {"x": _normal(7, n), "idx": np.random.default_rng(8).integers(0, n, n), "n": n, "m": n}
    for checked in (True, False):
        out.append(BenchCase("gather" if checked else "gather-unchecked", f"n={n}",
                             f"gather x[idx[i]] {_count(n)} f32{'' if checked else ', unchecked'}",
                             lambda c=checked: gather_kernel(c), gather_in, "out", lambda d: d["x"][d["idx"]],
                             16.0 * n, "GB/s", rtol=0.0, atol=0.0, setup=_wall_clock_setup(lambda c=checked: gather_kernel(c)),
                             tinygrad=None))
    if proposals:
        out.append(BenchCase("matmul-packed", f"{s}x{s}x{s}", f"matmul {s} f32, packed B (pack_b + panels, pack timed)",
                             lambda: kernels.matmul(s, s, s, b_layout="panels"), out[3].inputs, "c",
                             out[3].reference, 2.0 * s ** 3, "GFLOP/s", setup=_packed_setup(s)))
        out.append(BenchCase("matmul-packed-once", f"{s}x{s}x{s}", f"matmul {s} f32, B packed once (a weight)",
                             lambda: kernels.matmul(s, s, s, b_layout="panels"), out[3].inputs, "c",
                             out[3].reference, 2.0 * s ** 3, "GFLOP/s", setup=_packed_setup(s, pack_timed=False)))
        out.append(BenchCase("matmul-default", f"{s}x{s}x{s}",
                             f"matmul {s} f32, kernels.matmul({s}, {s}, {s}) as a user calls it",
                             out[3].kernel, out[3].inputs, "c", out[3].reference, 2.0 * s ** 3, "GFLOP/s"))
        out.append(BenchCase("sum-naive", f"n={ns}", f"sum {_count(ns)} f32, o[0] = x[r].sum(r) as written",
                             naive_sum, out[1].inputs, "o", out[1].reference, out[1].work, "GB/s", rtol=out[1].rtol,
                             atol=out[1].atol, setup=_naive_sum_setup))
        out.append(BenchCase("matmul-naive", f"{s}x{s}x{s}", f"matmul {s} f32, naive kernel (core optimizer)",
                             lambda: naive_matmul(s), out[3].inputs, "c", out[3].reference, 2.0 * s ** 3, "GFLOP/s",
                             tinygrad=out[3].tinygrad))
        out.append(BenchCase("matmul-naive-searched", f"{s}x{s}x{s}", f"matmul {s} f32, naive kernel (dk.search)",
                             lambda: naive_matmul(s), out[3].inputs, "c", out[3].reference, 2.0 * s ** 3, "GFLOP/s",
                             setup=_searched_setup(lambda: naive_matmul(s))))
    return out


# ------------------------------------------------------------------ timing
def best(fn: Callable[[], float | None], reps: int = 5, warmup: int = 1, budget: float | None = None,
         warmup_s: float = 0.0) -> float:
    """Best time of up to `reps` calls (at least one) after `warmup` untimed calls, and more until `warmup_s`
    seconds of them have passed (a thread pool that has just woken, or another's still spinning on the cores, slows
    the first tens of milliseconds of calls), stopping early once `budget` seconds are spent. A call that returns a
    positive float (a device's own measurement) counts that, anything else (None, an array) the wall clock."""
    start = time.perf_counter()
    done = 0
    while done < warmup or time.perf_counter() - start < warmup_s:
        fn()
        done += 1
    best_t, spent, n = float("inf"), 0.0, 0
    while n < reps and (n == 0 or budget is None or spent < budget):
        t0 = time.perf_counter()
        measured = fn()
        wall = time.perf_counter() - t0
        best_t = min(best_t, measured if isinstance(measured, float) and measured > 0 else wall)
        spent += wall
        n += 1
    return best_t


def time_numpy(case: BenchCase, inputs: dict[str, Any], reps: int = 5, budget: float | None = 0.25) \
        -> tuple[float, np.ndarray]:
    """(best numpy time, numpy's result). One more warm-up than a device: BLAS starts its threads lazily."""
    want = case.reference(inputs)
    return best(lambda: case.reference(inputs), reps, warmup=1, budget=budget), want


def _device_time(case: BenchCase, dev: Any, inputs: dict[str, Any], reps: int = 5,
                 budget: float | None = 0.25) -> tuple[float, np.ndarray]:
    """Compile and copy in (not timed), run once to warm up, then time launches; returns the output."""
    prepared = prepare(case, dev, inputs)
    seconds = best(prepared.launch, reps, warmup=1, budget=budget)
    return seconds, prepared.output()


def time_numba(case: BenchCase, inputs: dict[str, Any], want: np.ndarray, reps: int = 5,
               budget: float | None = 0.25) -> float | None:
    """Best time of the case's numba version (numba_versions.py; compiled in the warm-up call), None when there is none
    or it disagrees with numpy (a numba time for a wrong answer is no comparison)."""
    from .numba_versions import version_for
    fn = version_for(case.name)
    if fn is None:
        return None
    got = fn(inputs)  # the warm-up: numba compiles here
    if case.check(np.asarray(got), want):
        return None
    return best(lambda: fn(inputs), reps, warmup=0, budget=budget)


def run_bench(devices: list[str], quick: bool = False,
              progress: Callable[[str], None] | None = None, numba: bool = True) -> list[BenchResult]:
    """Every case on every device (spec strings), with numpy's and (when `numba` and it is installed) numba's time of
    the same case on the same data. A device or case that fails is a result with its error, never an exception: the
    other rows still run."""
    from ..registry import device as get_device

    results: list[BenchResult] = []
    for case in cases(quick):
        inputs = case.inputs()
        np_seconds, want = time_numpy(case, inputs)
        nb_seconds = time_numba(case, inputs, want) if numba else None
        for spec in devices:
            if progress is not None:
                progress(f"{case.name} {case.size} on {spec}")
            try:
                seconds, got = _device_time(case, get_device(spec), inputs)
                err = case.check(got, want)
                results.append(BenchResult(case.name, case.size, spec, seconds, np_seconds, case.work, case.unit,
                                           not err, err, nb_seconds))
            except Exception as e:  # noqa: BLE001 - one failing device must not stop the table
                results.append(BenchResult(case.name, case.size, spec, None, np_seconds, case.work, case.unit, False,
                                           f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                                           nb_seconds))
    return results
