"""Availability of a device kind: its `probe()` and, when the probe says yes, its `count()`, each run once per
registry in a daemon thread bounded by a timeout, so a wedged driver cannot hang device listing. The timeout is
DEVICEKIT_PROBE_TIMEOUT when the user sets it, else the kind's own `DeviceKind.probe_timeout` when it declares one
(a cluster's discovery is slow by nature), else 5 s; 0: no limit. A probe that raises, hangs or finds no device makes the kind unavailable with the reason
in words, and is recorded as that plugin's `probe` / `count` failure. `count()` must be an int; more than MAX_IDS
ids is recorded as a failure and capped (listing a million ids took 36 s). A KeyboardInterrupt is the user's: it
propagates and nothing is cached, so the next use probes again."""

from __future__ import annotations

import numbers
import threading
from collections.abc import Callable
from typing import Any

from .. import settings
from ..errors import DeviceKitError
from ..plugin import Availability, DeviceKind
from .records import PluginFailure, PluginRecord

__all__ = ["DEFAULT_PROBE_TIMEOUT", "MAX_IDS", "ProbeTimeout", "bounded", "kind_probe_timeout", "probe_kind",
           "probe_timeout", "user_probe_timeout"]

DEFAULT_PROBE_TIMEOUT = 5.0
MAX_IDS = 4096  # ids listed per kind: dk.devices() stays fast whatever count() says


class ProbeTimeout(DeviceKitError, TimeoutError):
    """A kind's probe() or count() did not return within DEVICEKIT_PROBE_TIMEOUT seconds."""


def probe_timeout() -> float:
    """DEVICEKIT_PROBE_TIMEOUT in seconds (default 5; 0: no limit); a bad value is a SettingError naming it."""
    return settings.get("DEVICEKIT_PROBE_TIMEOUT")


def user_probe_timeout(lenient: bool = False) -> float | None:
    """DEVICEKIT_PROBE_TIMEOUT when the user set it, else None (each kind's own timeout applies). A bad value is a
    SettingError naming it; `lenient` (the diagnostic, which shows the error itself): the core's default instead."""
    if settings.source("DEVICEKIT_PROBE_TIMEOUT") == "default":
        return None
    return settings.get_or_default("DEVICEKIT_PROBE_TIMEOUT") if lenient else probe_timeout()


def kind_probe_timeout(decl: DeviceKind, user: float | None) -> tuple[float, str]:
    """(seconds, where that limit comes from) for the kind `decl`: the user's setting, else the kind's own, else
    the core's default."""
    if user is not None:
        return user, "DEVICEKIT_PROBE_TIMEOUT"
    own = getattr(decl, "probe_timeout", None)
    if own is not None:
        return own, f"{decl.name}'s own probe_timeout; DEVICEKIT_PROBE_TIMEOUT overrides it"
    return probe_timeout(), "DEVICEKIT_PROBE_TIMEOUT"


def bounded(fn: Any, what: str, limit: float | None = None, source: str = "DEVICEKIT_PROBE_TIMEOUT") -> Any:
    """fn() run in a daemon thread, so a probe that hangs (a wedged driver) cannot hang device listing: after
    `limit` seconds (default: DEVICEKIT_PROBE_TIMEOUT) the kind is unavailable and the thread is abandoned (Python
    cannot kill it). `source` names where the limit comes from, for the message."""
    limit = probe_timeout() if limit is None else limit
    if limit <= 0:
        return fn()
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=call, name=f"devicekit-{what}", daemon=True)
    t.start()
    t.join(min(limit, threading.TIMEOUT_MAX))  # a kind's own huge probe_timeout must not overflow the wait
    if t.is_alive():
        raise ProbeTimeout(f"{what} timed out after {limit:g}s ({source})")
    if "error" in box:
        raise box["error"]
    return box.get("value")


Fail = Callable[[PluginRecord, str, BaseException], PluginFailure]


def _as_availability(a: Any) -> Availability:
    if isinstance(a, Availability):
        return a
    return Availability(bool(a), "" if a else "probe said no")


def _as_count(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"count() must return an int, got {n!r} ({type(n).__name__})")
    if n < 0:
        raise ValueError(f"count() returned {n}, a negative number of devices")
    return int(n)


def probe_kind(decl: DeviceKind, rec: PluginRecord, fail: Fail,
               limit: float | None = None) -> tuple[Availability, int | None]:
    """(availability, count) of the kind `decl` declared by plugin `rec`; count is None when the probe said no.
    `limit`: the user's DEVICEKIT_PROBE_TIMEOUT, or None for the kind's own (`kind_probe_timeout`)."""
    count = None
    limit, source = kind_probe_timeout(decl, limit)
    try:
        a = _as_availability(bounded(decl.probe, "probe", limit, source))
    except KeyboardInterrupt:
        raise
    except ProbeTimeout as e:
        fail(rec, "probe", e)
        a = Availability.no(str(e))
    except BaseException as e:  # noqa: BLE001 - a probe that raises (or exits) is the plugin's failure
        f = fail(rec, "probe", e)
        a = Availability.no(f"probe raised {f.describe()}")
    if a.ok:
        try:
            n = bounded(decl.count, "count()", limit, source)
        except KeyboardInterrupt:
            raise
        except ProbeTimeout as e:
            fail(rec, "count", e)
            return Availability.no(str(e)), None
        except BaseException as e:  # noqa: BLE001
            f = fail(rec, "count", e)
            return Availability.no(f"count() raised {f.describe()}"), None
        try:
            count = _as_count(n)
        except Exception as e:  # noqa: BLE001 - not an int, negative, or an int-like that fails to compare
            fail(rec, "count", e)
            return Availability.no(str(e)), None
        if count == 0:
            a = Availability.no("no devices of this kind were found")
        elif count > MAX_IDS:
            fail(rec, "count", ValueError(f"count() returned {count}; devicekit lists at most {MAX_IDS} ids per "
                                          f"kind, so ids from {MAX_IDS} on are left out"))
            count = MAX_IDS
    return a, count
