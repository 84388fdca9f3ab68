"""The CPU plugin's environment variables, declared through devicekit.settings (imported by the entry-point module,
so `devicekit info` shows them and a bad value is a SettingError naming the variable and what it accepts).

Reads: DEVICEKIT_CPU_THREADS, DEVICEKIT_CPU_OPT, DEVICEKIT_CPU_SPLIT (through devicekit.settings.get)."""

from __future__ import annotations

from devicekit import settings
from devicekit.settings import get

__all__ = ["get"]  # the plugin's modules read their variables through here, so they are declared first

OWNER = "devicekit-cpu"

settings.register("DEVICEKIT_CPU_THREADS", settings.int_in(1, 4096), None,
                  "threads a CPU launch may use", OWNER, shown_default="the CPUs this process may run on")
settings.register("DEVICEKIT_CPU_OPT", settings.int_in(0, 3), None,
                  "llvm pair optimization level", OWNER, shown_default="3")
settings.register("DEVICEKIT_CPU_SPLIT", settings.int_in(0, 64), 0,
                  "partial accumulators per reduce loop in the llvm pair (0: chosen by register budget; 1: off; "
                  "N: forced, rounded down to a power of 2)", OWNER)
