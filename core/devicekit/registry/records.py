"""What happened to each plugin: `PluginRecord` (where it came from, its status and notes), `PluginFailure` (the
phase and the exception), and `FailureLog`, the one place a failure is recorded: once per plugin, phase and message,
printed under DEVICEKIT_DEBUG>=1, traced, issued as a `PluginWarning`, or raised as `PluginError` in strict mode.
Also `DeviceInfo`, one row of dk.devices(). Reads no environment (the registry passes `strict` and `trace`)."""

from __future__ import annotations

import traceback
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

from ..debug import dprint
from ..errors import PluginError
from ..spec import DeviceSpec
from .tracing import trace

__all__ = ["DISCOVERY_PHASES", "DeviceInfo", "FailureLog", "PluginFailure", "PluginRecord", "PluginWarning",
           "dist_str", "failed_kinds", "id_summary", "who"]

# failures in these phases mean the plugin contributes nothing (its kinds are unknown)
DISCOVERY_PHASES = ("import", "api", "register", "check_pending", "hook devicekit_device_kinds")


class PluginWarning(RuntimeWarning):
    """A plugin failed and was skipped (DEVICEKIT_STRICT_PLUGINS=1 turns this into an error)."""


def dist_str(dist: str | None, version: str | None) -> str:
    if dist is None:
        return "not from a distribution"
    return f"{dist} {version}" if version else dist


@dataclass
class PluginFailure:
    plugin: str
    distribution: str | None
    version: str | None
    phase: str  # import, api, register, check_pending, hook <name>, probe, count
    exception: BaseException

    def describe(self) -> str:
        return f"{type(self.exception).__name__}: {self.exception}"

    def __str__(self) -> str:
        return f"plugin {self.plugin!r} ({dist_str(self.distribution, self.version)}) failed at {self.phase}: " \
               f"{self.describe()}"

    def to_dict(self) -> dict:
        return {"plugin": self.plugin, "distribution": self.distribution, "version": self.version,
                "phase": self.phase, "exception": type(self.exception).__name__, "message": str(self.exception),
                "traceback": "".join(traceback.format_exception(type(self.exception), self.exception,
                                                                self.exception.__traceback__))}


@dataclass
class PluginRecord:
    name: str  # entry-point name, or the name given to register_plugin
    value: str  # the module the entry point names ("devicekit_cpu.plugin"), or the object's module
    distribution: str | None = None
    version: str | None = None
    status: str = "pending"  # loaded | failed | blocked
    api: tuple[int, int] | None = None
    notes: list[str] = field(default_factory=list)
    failures: list[PluginFailure] = field(default_factory=list)
    load_seconds: float = 0.0
    obj: Any = field(default=None, repr=False)
    hooks: Any = field(default=None, repr=False)  # the hooks generated from its DEVICEKIT_BACKEND records, if any

    def to_dict(self) -> dict:
        return {"name": self.name, "module": self.value, "distribution": self.distribution, "version": self.version,
                "status": self.status, "api": list(self.api) if self.api else None, "notes": list(self.notes),
                "failures": [f.to_dict() for f in self.failures], "load_ms": round(self.load_seconds * 1e3, 3)}


def who(rec: PluginRecord) -> str:
    return f"{rec.name!r} ({dist_str(rec.distribution, rec.version)})"


def short_reason(reason: str) -> str:
    """The one-line summary of a kind's unavailability reason: its first clause, before "; " (the rest, how to fix
    it and what still works, is for `devicekit info`)."""
    return reason.split("; ", 1)[0].strip()


@dataclass(frozen=True)
class DeviceInfo:
    """One row of dk.devices(): a device id of a known kind (or a kind whose plugin failed), with provenance."""

    spec: str
    kind: str
    plugin: str
    distribution: str | None
    version: str | None
    available: bool
    reason: str = ""
    pair_names: tuple[str, ...] = ()
    priority: int = 0
    description: str = ""
    example: bool = False  # DeviceKind.example: an example device, not hardware

    def to_dict(self) -> dict:
        d = asdict(self)
        d["pair_names"] = list(self.pair_names)
        return d

    def __repr__(self) -> str:
        where = f"plugin {self.plugin!r}" + (f" ({dist_str(self.distribution, self.version)})" if self.distribution
                                              else "")
        state = "available" if self.available else f"unavailable: {short_reason(self.reason)}"
        return f"<DeviceInfo {self.spec} {state}{' (example device)' if self.example else ''}; {where}>"


class DeviceList(list):
    """What dk.devices() returns: a list of DeviceInfo rows, printed as one short line per device (the full
    reasons, pairs and settings are in `devicekit info`)."""

    def __repr__(self) -> str:
        if not self:
            return "devices: none (see `devicekit info`)"
        w = max(len(d.spec) for d in self)
        lines = [f"  {d.spec:<{w}}  " + ("available" if d.available else f"unavailable: {short_reason(d.reason)}")
                 + f"  (plugin {d.plugin}{', an example device, not hardware' if d.example else ''})" for d in self]
        return "\n".join([f"{len(self)} devices (details: devicekit info):", *lines])

    __str__ = __repr__


class FailureLog:
    """Records plugin failures on their PluginRecord, each (phase, exception type, message) once per record: a hook
    asked once per device spec fails once in the report. `strict`: raise PluginError at the first one."""

    def __init__(self, strict: bool = False, trace: bool = False):
        self.strict = strict
        self.trace = trace

    def fail(self, rec: PluginRecord, phase: str, exc: BaseException) -> PluginFailure:
        f = PluginFailure(rec.name, rec.distribution, rec.version, phase, exc)
        sig = (phase, type(exc).__name__, str(exc))
        for seen in rec.failures:
            if (seen.phase, type(seen.exception).__name__, str(seen.exception)) == sig:
                return seen
        rec.failures.append(f)
        if phase in DISCOVERY_PHASES:
            rec.status = "failed"
        dprint(1, str(f))
        if self.trace:
            trace(str(f))
        if self.strict:
            raise PluginError(f"{f} (DEVICEKIT_STRICT_PLUGINS=1)") from exc
        warnings.warn(f"devicekit: {f}; skipped (run `devicekit info` for details)", PluginWarning, stacklevel=4)
        return f


def id_summary(kind: str, count: int, limit: int = 8) -> str:
    """The ids of a kind with `count` devices, abbreviated past `limit`: "BIG, BIG:1, ..., BIG:4095 (4096 ids)"."""
    ids = [str(DeviceSpec(kind, i)) for i in range(min(count, limit))]
    if count <= limit:
        return ", ".join(ids)
    return f"{', '.join(ids[:limit - 2])}, ..., {DeviceSpec(kind, count - 1)} ({count} ids)"


def failed_kinds(records: list[PluginRecord]) -> dict[str, tuple[PluginRecord, str]]:
    """Kinds guessed from failed/blocked plugins (the entry-point name, upper-cased, by convention), with why."""
    out: dict[str, tuple[PluginRecord, str]] = {}
    for rec in records:
        if rec.status == "blocked":
            why = f"its plugin {who(rec)} is disabled by DEVICEKIT_DISABLE_PLUGINS"
        elif rec.status == "failed":
            f = next((f for f in rec.failures if f.phase in DISCOVERY_PHASES), rec.failures[0])
            why = str(f)
        else:
            continue
        try:
            out.setdefault(DeviceSpec(rec.name).kind, (rec, why))
        except ValueError:
            continue
    return out
