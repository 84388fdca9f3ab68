"""`devicekit bench`: the standard kernels (elementwise fma, row sum, softmax, matmul) on each device, timed against
numpy on the same data, checked against numpy, and shown as a table (optionally a PNG). Sizes are modest so a full
run on every device finishes in well under a minute on two cores; `quick` shrinks them for tests and smoke runs."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BenchCase", "BenchResult", "cases", "format_table", "plot", "run_bench"]


@dataclass(frozen=True)
class BenchCase:
    """One kernel at one size: how to build it and its inputs, the numpy version, and the work it does."""

    name: str
    size: str  # human-readable shape
    kernel: Callable[[], Any]  # -> ir.Kernel
    inputs: Callable[[], dict[str, Any]]  # named numpy arrays and int vars, as dk.run takes them
    output: str  # the writable param compared with numpy
    reference: Callable[[dict[str, Any]], np.ndarray]  # numpy on the same inputs
    work: float  # bytes moved (unit GB/s) or flops (unit GFLOP/s)
    unit: str


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

    @property
    def rate(self) -> float | None:
        return None if not self.seconds else self.work / self.seconds / 1e9

    @property
    def vs_numpy(self) -> float | None:
        """numpy time / device time: above 1 the device is faster than numpy."""
        return None if not self.seconds else self.numpy_seconds / self.seconds

    def to_dict(self) -> dict:
        return {"kernel": self.case, "size": self.size, "device": self.device, "seconds": self.seconds,
                "numpy_seconds": self.numpy_seconds, "rate": self.rate, "unit": self.unit, "vs_numpy": self.vs_numpy,
                "ok": self.ok, "error": self.error}


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def cases(quick: bool = False) -> list[BenchCase]:
    """The standard set: fma (bandwidth), row sum (bandwidth), softmax (bandwidth + exp), matmul (compute)."""
    from . import kernels

    rng = np.random.default_rng(0)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    n = 1 << 14 if quick else 1 << 21
    rows, cols = (64, 256) if quick else (1024, 2048)
    srows, scols = (32, 256) if quick else (512, 1024)
    mm = 32 if quick else 256
    fma_in = {"a": f32(n), "b": f32(n), "c": f32(n), "n": n}
    sum_in = {"x": f32(rows * cols), "m": rows, "n": cols}
    sm_in = {"x": f32(srows * scols), "m": srows, "n": scols}
    mm_in = {"a": f32(mm * mm), "b": f32(mm * mm)}
    return [
        BenchCase("fma", f"n={n}", lambda: kernels.elementwise("a * b + c", name="bench_fma"), lambda: fma_in, "out",
                  lambda d: d["a"] * d["b"] + d["c"], 16.0 * n, "GB/s"),
        BenchCase("sum", f"{rows}x{cols}", lambda: kernels.reduce("sum", name="bench_sum"), lambda: sum_in, "out",
                  lambda d: d["x"].reshape(rows, cols).sum(axis=1), 4.0 * rows * (cols + 1), "GB/s"),
        BenchCase("softmax", f"{srows}x{scols}", lambda: kernels.softmax(name="bench_softmax"), lambda: sm_in, "out",
                  lambda d: _softmax(d["x"].reshape(srows, scols)).reshape(-1), 8.0 * srows * scols, "GB/s"),
        BenchCase("matmul", f"{mm}x{mm}x{mm}", lambda: kernels.matmul(mm, mm, mm, name="bench_matmul"),
                  lambda: mm_in, "c", lambda d: (d["a"].reshape(mm, mm) @ d["b"].reshape(mm, mm)).reshape(-1),
                  2.0 * mm ** 3, "GFLOP/s"),
    ]


def _best(fn: Callable[[], float | None], budget: float = 0.25, max_reps: int = 5) -> float:
    """Best of up to `max_reps` timed calls (at least one), stopping once `budget` seconds are spent."""
    best, spent, reps = float("inf"), 0.0, 0
    while reps < max_reps and (reps == 0 or spent < budget):
        t0 = time.perf_counter()
        measured = fn()
        wall = time.perf_counter() - t0
        best = min(best, measured if measured else wall)  # a runtime that reports no time (or 0): the wall clock
        spent += wall
        reps += 1
    return best


def _numpy_time(case: BenchCase, inputs: dict[str, Any]) -> tuple[float, np.ndarray]:
    want = case.reference(inputs)
    case.reference(inputs)  # a second warm-up: BLAS starts its threads lazily
    return _best(lambda: (case.reference(inputs), None)[1]), want


def _device_time(case: BenchCase, dev: Any, inputs: dict[str, Any]) -> tuple[float, np.ndarray]:
    """Compile (not timed), copy in (not timed), run once to warm up, then time launches; returns the output."""
    from .memory import Buffer

    kernel = case.kernel()
    program = dev.compile(kernel)
    spec = program.spec
    vals = [int(inputs[v.name]) for v in spec.vars]
    var_vals = spec.check_vars(vals)
    bufs = []
    for p, size in zip(spec.params, spec.buffer_sizes(var_vals)):
        b = Buffer(dev, size, p.dtype)
        if p.name in inputs:
            b.copyin(inputs[p.name])
        bufs.append(b)
    program.execute(bufs, vals, wait=True)
    seconds = _best(lambda: program.execute(bufs, vals, wait=True))
    out = bufs[[p.name for p in spec.params].index(case.output)].numpy()
    return seconds, out


def run_bench(devices: list[str], quick: bool = False,
              progress: Callable[[str], None] | None = None) -> list[BenchResult]:
    """Every case on every device (spec strings). A device or case that fails is a result with its error, never an
    exception: the other rows still run."""
    from .registry import device as get_device

    results: list[BenchResult] = []
    for case in cases(quick):
        inputs = case.inputs()
        np_seconds, want = _numpy_time(case, inputs)
        for spec in devices:
            if progress is not None:
                progress(f"{case.name} {case.size} on {spec}")
            try:
                seconds, got = _device_time(case, get_device(spec), inputs)
                ok = bool(np.allclose(got, want, rtol=1e-3, atol=1e-3))
                err = "" if ok else f"max abs error {float(np.max(np.abs(got - want))):.3g} against numpy"
                results.append(BenchResult(case.name, case.size, spec, seconds, np_seconds, case.work, case.unit,
                                           ok, err))
            except Exception as e:  # noqa: BLE001 - one failing device must not stop the table
                results.append(BenchResult(case.name, case.size, spec, None, np_seconds, case.work, case.unit, False,
                                           f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))
    return results


def format_table(results: list[BenchResult]) -> str:
    """A fixed-width text table: kernel, size, device, time, rate, ratio to numpy, check."""
    head = ("kernel", "size", "device", "time", "rate", "vs numpy", "check")
    rows = []
    for r in results:
        if not r.seconds:
            rows.append((r.case, r.size, r.device, "-", "-", "-", f"ERROR {r.error}"))
            continue
        t = f"{r.seconds * 1e3:.3f} ms" if r.seconds < 1 else f"{r.seconds:.2f} s"
        rows.append((r.case, r.size, r.device, t, f"{r.rate:.2f} {r.unit}", f"{r.vs_numpy:.2f}x",
                     "ok" if r.ok else f"MISMATCH {r.error}"))
    widths = [max(len(str(x[i])) for x in [head, *rows]) for i in range(len(head))]
    fmt = lambda row: "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()
    lines = [fmt(head), fmt(tuple("-" * w for w in widths))] + [fmt(r) for r in rows]
    lines.append("")
    lines.append("vs numpy: numpy's time / the device's time on the same data (above 1x: faster than numpy). "
                 "Best of up to 5 launches after a warm-up; compile and copies not timed.")
    return "\n".join(lines)


def plot(results: list[BenchResult], path: str) -> None:
    """A grouped bar chart of the speed relative to numpy (log scale), one group per kernel, one bar per device.
    Needs matplotlib (pip install 'devicekit[bench]'): ImportError otherwise."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kernels_ = list(dict.fromkeys(r.case for r in results))
    devices = list(dict.fromkeys(r.device for r in results))
    width = 0.8 / max(1, len(devices))
    fig, ax = plt.subplots(figsize=(2 + 1.6 * len(kernels_), 4))
    for j, dev in enumerate(devices):
        ys = [next((r.vs_numpy or 0.0 for r in results if r.case == k and r.device == dev), 0.0) for k in kernels_]
        ax.bar([i + j * width for i in range(len(kernels_))], ys, width, label=dev)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks([i + width * (len(devices) - 1) / 2 for i in range(len(kernels_))])
    ax.set_xticklabels([f"{k}\n{next(r.size for r in results if r.case == k)}" for k in kernels_])
    ax.set_yscale("log")
    ax.set_ylabel("speed vs numpy (x)")
    ax.set_title("devicekit bench")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


class Progress:
    """A progress bar on stderr: rich's when rich is installed and stderr is a terminal, else one plain line per
    step ("[3/16] matmul 256x256x256 on CPU")."""

    def __init__(self, total: int, plain: bool | None = None):
        self.total, self.done = total, 0
        self._rich = None
        if plain is None:
            plain = not sys.stderr.isatty()
        if not plain:
            try:
                from rich.console import Console
                from rich.progress import Progress as RichProgress
            except ImportError:
                pass
            else:  # on stderr, like the plain lines: stdout carries only the table (or JSON)
                self._rich = RichProgress(console=Console(stderr=True), transient=True)
                self._task = self._rich.add_task("bench", total=total)
                self._rich.start()

    def __call__(self, what: str) -> None:
        self.done += 1
        if self._rich is not None:
            self._rich.update(self._task, completed=self.done - 1, description=what)
        else:
            print(f"[{self.done}/{self.total}] {what}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._rich is not None:
            self._rich.update(self._task, completed=self.total)
            self._rich.stop()
