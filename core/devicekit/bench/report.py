"""`devicekit bench`'s output: the fixed-width table (one row per case and device, and one column per device when
there are several), the bar chart (matplotlib) and its path check, and the progress bar on stderr. Apart from
definition.py, which keeps the cases, the timing and the run."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .definition import BenchResult

__all__ = ["Progress", "check_plot_path", "format_columns", "format_table", "plot"]


def format_table(results: list[BenchResult], numba_note: str | None = None) -> str:
    """A fixed-width text table: kernel, size, device, time, rate, ratio to numpy, ratio to numba, check.
    `numba_note`: why there is no numba column (printed under the table)."""
    head = ("kernel", "size", "device", "time", "rate", "vs numpy", "vs numba", "check")
    rows = []
    for r in results:
        if not r.seconds:
            rows.append((r.case, r.size, r.device, "-", "-", "-", "-", f"ERROR {r.error}"))
            continue
        t = f"{r.seconds * 1e3:.3f} ms" if r.seconds < 1 else f"{r.seconds:.2f} s"
        rows.append((r.case, r.size, r.device, t, f"{r.rate:.2f} {r.unit}", f"{r.vs_numpy:.2f}x",
                     "-" if r.vs_numba is None else f"{r.vs_numba:.2f}x", "ok" if r.ok else f"MISMATCH {r.error}"))
    if all(r.numba_seconds is None for r in results):  # no numba here (or --no-numba): no empty column
        head = head[:6] + head[7:]
        rows = [row[:6] + row[7:] for row in rows]
    widths = [max(len(str(x[i])) for x in [head, *rows]) for i in range(len(head))]
    fmt = lambda row: "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()
    lines = [fmt(head), fmt(tuple("-" * w for w in widths))] + [fmt(r) for r in rows]
    lines.append("")
    lines.append("vs numpy: numpy's time / the device's time on the same data (above 1x: faster than numpy); vs numba: "
                 "the same for a parallel numba @njit. Best of up to 5 launches after a warm-up; compile and copies "
                 "not timed.")
    if numba_note:
        lines.append(f"no numba column: {numba_note}")
    if len({r.device for r in results}) > 1:
        lines += ["", format_columns(results)]
    return "\n".join(lines)


def check_plot_path(path: str) -> str | None:
    """None when a chart can be written to `path` (a format matplotlib writes, a directory that exists and is
    writable), else the problem in words: checked before a minute of benchmarking, not after."""
    import os

    from matplotlib.figure import Figure
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    formats = Figure().canvas.get_supported_filetypes()
    if ext not in formats:
        return f"{path!r}: matplotlib cannot write {'.' + ext if ext else 'a file without an extension'}; use one of " \
               f"{', '.join('.' + f for f in sorted(formats))}"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"{path!r}: the directory {folder} does not exist"
    if os.path.isdir(path):
        return f"{path!r} is a directory"
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        return f"{path!r}: not writable"
    return None


def format_columns(results: list[BenchResult]) -> str:
    """The same results with one column per device (CPU, OPENCL, ACME, ...): each cell the time and, in
    parentheses, numpy's time / the device's; `error` or `wrong` where the row failed (details above)."""
    devices = list(dict.fromkeys(r.device for r in results))
    keys = list(dict.fromkeys((r.case, r.size) for r in results))
    cell = {(r.case, r.size, r.device): r for r in results}

    def show(r: BenchResult | None) -> str:
        if r is None:
            return ""
        if not r.seconds:
            return "error"
        t = f"{r.seconds * 1e3:.3f} ms" if r.seconds < 1 else f"{r.seconds:.2f} s"
        return f"{t} ({r.vs_numpy:.2f}x)" + ("" if r.ok else " wrong")

    head = ("kernel", "size", *devices)
    rows = [(c, sz, *(show(cell.get((c, sz, d))) for d in devices)) for c, sz in keys]
    widths = [max(len(str(x[i])) for x in [head, *rows]) for i in range(len(head))]
    fmt = lambda row: "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()
    return "\n".join([fmt(head), fmt(tuple("-" * w for w in widths)), *(fmt(r) for r in rows)])


def plot(results: list[BenchResult], path: str) -> None:
    """A grouped bar chart of the speed relative to numpy (log scale), one group per kernel, one bar per device.
    Needs matplotlib (pip install 'devicekit[bench]'): ImportError otherwise."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kernels_ = list(dict.fromkeys(r.case for r in results))
    devices = list(dict.fromkeys(r.device for r in results))
    width = 0.8 / max(1, len(devices))
    fig, ax = plt.subplots(figsize=(3.5 + 1.6 * len(kernels_), 4))
    for j, dev in enumerate(devices):
        ys = [next((r.vs_numpy or 0.0 for r in results if r.case == k and r.device == dev), 0.0) for k in kernels_]
        ax.bar([i + j * width for i in range(len(kernels_))], ys, width, label=dev)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks([i + width * (len(devices) - 1) / 2 for i in range(len(kernels_))])
    ax.set_xticklabels([f"{k}\n{next(r.size for r in results if r.case == k)}" for k in kernels_])
    ax.set_yscale("log")
    ax.set_ylabel("speed vs numpy (x)")
    ax.set_title("devicekit bench")
    # beside the axes, never over a bar
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, title="device")
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
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
