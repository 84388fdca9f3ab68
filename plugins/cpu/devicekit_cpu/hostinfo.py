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
