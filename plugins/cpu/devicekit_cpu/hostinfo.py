"""Cheap facts about the host CPU and environment (no llvmlite import)."""

from __future__ import annotations

import functools
import hashlib
import os
import platform

from . import settings


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The host's ISA flags from /proc/cpuinfo (empty where there is none): known compiler bugs depend on them."""
    return frozenset(_cpuinfo()[1].split())


@functools.cache
def vector_register_bytes() -> int:
    """The host's SIMD register file in bytes (count x width), from its ISA flags: AVX-512 32 x 64, AVX 16 x 32,
    NEON 32 x 16, SSE 16 x 16; 0 where the flags say nothing. The kernel library sizes matmul tiles by it."""
    flags = cpu_flags()
    if "avx512f" in flags:
        return 32 * 64
    if "avx" in flags:
        return 16 * 32
    if "asimd" in flags or platform.machine() in ("arm64", "aarch64"):
        return 32 * 16
    return 16 * 16 if "sse2" in flags else 0


def cpu_fingerprint() -> str:
    """Model name + a hash of the ISA flags, from /proc/cpuinfo where there is one: what -march=native depends on."""
    model, flags = _cpuinfo()
    return f"{platform.machine()} {model} flags={hashlib.sha256(flags.encode()).hexdigest()[:12]}"


@functools.cache
def _cpuinfo() -> tuple[str, str]:
    """(model name, sorted ISA flags) of the first CPU."""
    model, flags = platform.processor() or platform.machine(), ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                key = key.strip()
                if key == "model name" and model in ("", platform.machine(), platform.processor()):
                    model = val.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = " ".join(sorted(val.split()))
                if model and flags and key == "":
                    break
    except OSError:
        pass
    return model, flags


def num_threads() -> int:
    """DEVICEKIT_CPU_THREADS, else the number of CPUs this process may run on."""
    if n := settings.get("DEVICEKIT_CPU_THREADS"):  # a bad value: SettingError naming the variable
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
