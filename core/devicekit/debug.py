"""DEVICEKIT_DEBUG helpers. Levels: 1 device choices, fallbacks and cache events; 2 kernels compiled (names,
timings); 3 sources; 4 everything (launches and var values). Output goes to stderr."""

from __future__ import annotations

import os
import sys
import warnings

from . import forksafe

_warned: set[str] = set()
_lock = forksafe.lock()


def debug_level() -> int:
    """The current DEVICEKIT_DEBUG level (read on each call, so tests and notebooks can change it)."""
    try:
        return int(os.environ.get("DEVICEKIT_DEBUG", "0") or 0)
    except ValueError:
        return 1


def env_flag(name: str, default: bool = False) -> bool:
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return default
    return v.strip().lower() not in ("0", "false", "no", "off")


def dprint(level: int, *msg: object) -> None:
    """Print to stderr when DEVICEKIT_DEBUG >= level."""
    if debug_level() >= level:
        print("devicekit:", *msg, file=sys.stderr, flush=True)


def warn_once(key: str, message: str, category: type[Warning] = RuntimeWarning) -> bool:
    """Issue `message` as a warning once per process for `key`. Returns whether it was issued now."""
    with _lock:
        if key in _warned:
            return False
        _warned.add(key)
    warnings.warn(message, category, stacklevel=3)
    return True
