"""DEVICEKIT_TRACE_PLUGINS output on stderr, each line prefixed `devicekit-trace:`: `trace(msg)` for loading events,
and `monitor(pm)`, pluggy's hook-call monitoring that prints every hook call with its arguments, implementations and
result or exception. The flag itself is read by the registry."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["monitor", "trace"]


def trace(msg: str) -> None:
    print(f"devicekit-trace: {msg}", file=sys.stderr, flush=True)


def _before(hook_name: str, impls: list, kwargs: dict) -> None:
    trace(f"call {hook_name}({', '.join(f'{k}={v}' for k, v in kwargs.items())}) "
          f"-> [{', '.join(i.plugin_name for i in impls)}]")


def _after(outcome: Any, hook_name: str, impls: list, kwargs: dict) -> None:
    if outcome.exception is not None:
        trace(f"  {hook_name} raised {type(outcome.exception).__name__}: {outcome.exception}")
    else:
        trace(f"  {hook_name} returned {outcome.get_result()!r}")


def monitor(pm: Any) -> None:
    """Trace every hook call of plugin manager `pm`."""
    pm.add_hookcall_monitoring(_before, _after)
