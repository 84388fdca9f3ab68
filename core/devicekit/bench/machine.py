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


def _proc_cpuinfo() -> dict[str, str]:
    """The first CPU's fields of /proc/cpuinfo ({} where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, sep, val = line.partition(":")
                if not sep:
                    if fields:
                        break  # the first CPU's block ends at the first blank line
                    continue
                fields.setdefault(key.strip(), val.strip())
    except OSError:
        pass
    return fields


def cpu_model() -> str:
    """The CPU in one line, as lscpu names it ("Model name", vendor, family/model, L3) and as LLVM does (its host cpu
    name, what the CPU device compiles for): the key of bench/README.md's per-model tables. The machines this runs on
    differ (AMD Zen 4, Zen 5, an AVX-512 Xeon that reports only "Intel(R) Xeon(R) Processor"), so the model name
    alone does not tell them apart: family/model and LLVM's name do."""
    import platform
    info = _proc_cpuinfo()
    name = info.get("model name") or platform.processor() or platform.machine()
    parts = [name]
    if "vendor_id" in info:
        parts.append(info["vendor_id"])
    if "cpu family" in info and "model" in info:
        parts.append(f"family {info['cpu family']} model {info['model']}")
    try:
        from llvmlite import binding
        parts.append(f"LLVM host cpu {binding.get_host_cpu_name()}")
    except Exception:  # noqa: BLE001 - without llvmlite the line is shorter, not an error
        pass
    try:  # the L3 size, as Linux reports it ("491520K"); the Xeon's 480 MB L3 is its signature
        with open("/sys/devices/system/cpu/cpu0/cache/index3/size") as f:
            parts.append(f"L3 {f.read().strip()}")
    except OSError:
        pass
    return ", ".join(parts)
