"""Availability of a device kind: its `probe()` and, when the probe says yes, its `count()`, each run once per
registry in a daemon thread bounded by DEVICEKIT_PROBE_TIMEOUT (seconds, default 5; 0 or less: no limit), so a wedged
driver cannot hang device listing. A probe that raises, hangs or finds no device makes the kind unavailable with the
reason in words, and is recorded as that plugin's `probe` / `count` failure."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from ..debug import warn_once
from ..errors import DeviceKitError
from ..plugin import Availability, DeviceKind
from .records import PluginFailure, PluginRecord, PluginWarning

__all__ = ["DEFAULT_PROBE_TIMEOUT", "ProbeTimeout", "bounded", "probe_kind", "probe_timeout"]

DEFAULT_PROBE_TIMEOUT = 5.0


class ProbeTimeout(DeviceKitError, TimeoutError):
    """A kind's probe() or count() did not return within DEVICEKIT_PROBE_TIMEOUT seconds."""


def probe_timeout() -> float:
    """DEVICEKIT_PROBE_TIMEOUT in seconds (default 5; 0 or less: no limit). A bad value is reported and ignored."""
    v = os.environ.get("DEVICEKIT_PROBE_TIMEOUT", "").strip()
    if not v:
        return DEFAULT_PROBE_TIMEOUT
    try:
        return float(v)
    except ValueError:
        warn_once(f"probe-timeout:{v}", f"devicekit: DEVICEKIT_PROBE_TIMEOUT={v!r} is not a number of seconds; "
                  f"using {DEFAULT_PROBE_TIMEOUT:g}", PluginWarning)
        return DEFAULT_PROBE_TIMEOUT


def bounded(fn: Any, what: str) -> Any:
    """fn() run in a daemon thread, so a probe that hangs (a wedged driver) cannot hang device listing: after the
    timeout the kind is unavailable and the thread is abandoned (Python cannot kill it)."""
    limit = probe_timeout()
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
    t.join(limit)
    if t.is_alive():
        raise ProbeTimeout(f"{what} timed out after {limit:g}s (DEVICEKIT_PROBE_TIMEOUT)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


Fail = Callable[[PluginRecord, str, BaseException], PluginFailure]


def probe_kind(decl: DeviceKind, rec: PluginRecord, fail: Fail) -> tuple[Availability, int | None]:
    """(availability, count) of the kind `decl` declared by plugin `rec`; count is None when the probe said no."""
    count = None
    try:
        a = bounded(decl.probe, "probe")
        if not isinstance(a, Availability):
            a = Availability(bool(a), "" if a else "probe said no")
    except ProbeTimeout as e:
        fail(rec, "probe", e)
        a = Availability.no(str(e))
    except (Exception, SystemExit) as e:  # noqa: BLE001 - a probe that raises is the plugin's failure
        f = fail(rec, "probe", e)
        a = Availability.no(f"probe raised {f.describe()}")
    if a.ok:
        try:
            count = int(bounded(decl.count, "count()"))
        except ProbeTimeout as e:
            fail(rec, "count", e)
            a = Availability.no(str(e))
        except (Exception, SystemExit) as e:  # noqa: BLE001
            f = fail(rec, "count", e)
            a = Availability.no(f"count() raised {f.describe()}")
        else:
            if count <= 0:
                a = Availability.no("no devices of this kind were found")
    return a, count
