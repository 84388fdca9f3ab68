"""The CPU plugin's environment variables, declared through devicekit.settings (imported by the entry-point module,
so `devicekit info` shows them and a bad value is a SettingError naming the variable and what it accepts).

Reads: DEVICEKIT_CPU_THREADS, DEVICEKIT_CPU_OPT, DEVICEKIT_CPU_SPLIT, DEVICEKIT_CPU_SPIN_US (through devicekit.settings.get)."""

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
settings.register("DEVICEKIT_CPU_SPIN_US", settings.int_in(0, 1_000_000), 1000,
                  "microseconds a pool worker spins for the next chunk of a split launch before it sleeps (0: it "
                  "sleeps at once, and the launching thread runs the chunks of workers not yet awake)", OWNER)
