"""The state of the machine a benchmark ran on, in one line, and a warning when it is busy: the load average and
the thread settings of numpy's BLAS and of OpenMP (threadpoolctl, when installed). A multi-threaded BLAS on a loaded
machine is what makes "vs numpy" swing by orders of magnitude between runs, so the table says so."""

from __future__ import annotations

import os
from typing import Any

BUSY = 0.5  # load average per CPU above which the figures are marked unreliable


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def thread_pools() -> list[dict[str, Any]] | str:
    """threadpoolctl's view of the native thread pools loaded in this process (numpy's BLAS, OpenMP), or the reason
    it cannot say."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl is not installed (pip install threadpoolctl; it is in devicekit[bench])"
    import numpy  # noqa: F401 - its BLAS must be loaded to be listed
    return [{"api": p.get("internal_api") or p.get("user_api"), "threads": p.get("num_threads"),
             "layer": p.get("threading_layer")} for p in threadpool_info()]


def describe() -> str:
    """One line: CPUs, load, BLAS and OpenMP threads, and the thread-count variables that are set."""
    n, ld = cpus(), load()
    parts = [f"{n} CPUs", "load n/a" if ld is None else f"load {ld:.2f} (1 min)"]
    pools = thread_pools()
    if isinstance(pools, str):
        parts.append(f"BLAS threads unknown: {pools}")
    else:
        parts += [f"{p['api']} {p['threads']} threads" + (f" ({p['layer']})" if p.get("layer") else "") for p in pools]
    env = [f"{v}={os.environ[v]}" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                            "NUMBA_NUM_THREADS", "DEVICEKIT_CPU_THREADS") if v in os.environ]
    if env:
        parts.append(" ".join(env))
    return "machine: " + ", ".join(parts)


def busy_warning(load_now: float | None = None, n: int | None = None) -> str | None:
    """A warning when the load average per CPU is above BUSY, else None."""
    ld = load() if load_now is None else load_now
    n = cpus() if n is None else n
    if ld is None or ld <= BUSY * n:
        return None
    return (f"warning: the machine is busy (load {ld:.2f} on {n} CPUs): other processes share the CPUs, so times "
            "and ratios (above all vs numpy, whose BLAS uses every thread) can be far off; rerun when it is idle")
