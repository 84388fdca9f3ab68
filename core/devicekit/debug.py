"""DEVICEKIT_DEBUG helpers. Levels: 1 device choices, fallbacks and cache events; 2 kernels compiled (names,
timings); 3 sources; 4 everything (launches and var values). Output goes to stderr. The variable is read through
devicekit.settings (a bad value warns once and counts as level 1)."""

from __future__ import annotations

import sys
import warnings

from . import forksafe, settings

_warned: set[str] = set()
_lock = forksafe.lock()


def debug_level() -> int:
    """The current DEVICEKIT_DEBUG level (read on each call, so tests and notebooks can change it)."""
    return settings.get("DEVICEKIT_DEBUG")


def env_flag(name: str, default: bool = False) -> bool:
    """A switch variable: a declared one through devicekit.settings (its own default), any other parsed the same
    way (1/0, true/false, yes/no, on/off; anything else is a SettingError naming it). Prefer settings.get."""
    try:
        return bool(settings.get(name))
    except LookupError:
        pass
    import os
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return settings.flag(raw)
    except ValueError:
        raise settings.SettingError(f"{name}={raw!r} is not valid: expected {settings.flag.accepts}") from None


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
