"""Plugins into the plugin manager, each in isolation: the entry points of group `devicekit`, enumerated with
importlib_metadata, sorted by name and loaded one at a time (blocked? -> import -> DEVICEKIT_API check -> register
-> check_pending), and in-process plugins (`register_plugin`). Any failure is recorded on the plugin's record and the
plugin skipped. Environment: DEVICEKIT_DISABLE_PLUGINS=a,b (names never imported, matched case-insensitively)."""

from __future__ import annotations

import os
import time
from typing import Any

import pluggy

from .. import hookspecs
from ..errors import PluginError
from ..plugin import API_VERSION
from .records import FailureLog, PluginRecord, dist_str, who
from .tracing import trace

__all__ = ["ENTRY_POINT_GROUP", "Plugins", "disabled_from_env"]

ENTRY_POINT_GROUP = "devicekit"


def disabled_from_env() -> set[str]:
    return {n.strip() for n in os.environ.get("DEVICEKIT_DISABLE_PLUGINS", "").split(",") if n.strip()}


class Plugins:
    """The pluggy plugin manager and one PluginRecord per plugin, by name (`records`) and by plugin object
    (`by_obj`, for attributing hook answers)."""

    def __init__(self, failures: FailureLog, disabled: set[str], trace: bool = False):
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self.failures = failures
        self.disabled = disabled
        self.trace = trace
        self.records: dict[str, PluginRecord] = {}
        self.by_obj: dict[int, PluginRecord] = {}

    def _fail(self, rec: PluginRecord, phase: str, exc: BaseException) -> None:
        self.failures.fail(rec, phase, exc)

    def load_entry_points(self) -> None:
        import importlib_metadata

        eps = sorted(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
        if self.trace:
            trace(f"{len(eps)} entry points in group {ENTRY_POINT_GROUP!r}: {', '.join(e.name for e in eps)}")
        for ep in eps:
            dist = getattr(ep, "dist", None)
            dname = dist.metadata["Name"] if dist is not None else None
            dver = dist.version if dist is not None else None
            if ep.name in self.records:
                prev = self.records[ep.name]
                if prev.value == ep.value and prev.distribution == dname:
                    continue  # the same distribution seen twice on sys.path
                rec = PluginRecord(ep.name, ep.value, dname, dver)
                self.records[f"{ep.name}@{dname}"] = rec
                self._fail(rec, "register", ValueError(
                    f"entry-point name {ep.name!r} is also used by {who(prev)}; plugin names must be unique"))
                continue
            rec = PluginRecord(ep.name, ep.value, dname, dver)
            self.records[ep.name] = rec
            if self.is_disabled(ep.name):
                rec.status = "blocked"
                rec.notes.append("disabled by DEVICEKIT_DISABLE_PLUGINS; not imported")
                self.pm.set_blocked(ep.name)
                if self.trace:
                    trace(f"entry point {ep.name!r} = {ep.value} blocked by DEVICEKIT_DISABLE_PLUGINS")
                continue
            t0 = time.perf_counter()
            try:
                obj = ep.load()
            except (Exception, SystemExit) as e:  # noqa: BLE001 - isolation: any import failure is recorded
                rec.load_seconds = time.perf_counter() - t0
                self._fail(rec, "import", e)
                continue
            rec.load_seconds = time.perf_counter() - t0
            self.register(obj, rec)
            if self.trace:
                trace(f"entry point {ep.name!r} = {ep.value} ({dist_str(dname, dver)}): {rec.status} "
                      f"in {rec.load_seconds * 1e3:.1f} ms")
        for name in self.disabled - set(self.records):
            self.pm.set_blocked(name)
            self.pm.set_blocked(name.lower())

    def is_disabled(self, name: str) -> bool:
        """Blocked names match case-insensitively: DEVICEKIT_DISABLE_PLUGINS=CUDA blocks the entry point `cuda`
        (a user thinks in kinds, which are upper-case; entry-point names are lower-case by convention)."""
        return name in self.disabled or name.lower() in {d.lower() for d in self.disabled}

    def check_api(self, obj: Any, rec: PluginRecord) -> bool:
        declared = getattr(obj, "DEVICEKIT_API", None)
        if declared is None:
            rec.notes.append(f"declares no DEVICEKIT_API; assumed compatible with API {API_VERSION[0]}."
                             f"{API_VERSION[1]}")
            return True
        try:
            major, minor = (int(x) for x in declared)
        except (TypeError, ValueError):
            self._fail(rec, "api", TypeError(f"DEVICEKIT_API must be a (major, minor) tuple, got {declared!r}"))
            return False
        rec.api = (major, minor)
        core = f"{API_VERSION[0]}.{API_VERSION[1]}"
        if major != API_VERSION[0]:
            if major > API_VERSION[0]:
                fix = f"upgrade devicekit (or install a {rec.distribution or rec.name} built for API {API_VERSION[0]})"
            else:
                fix = f"upgrade {rec.distribution or rec.name} to a release built for devicekit API {API_VERSION[0]}"
            self._fail(rec, "api", PluginError(
                f"{rec.distribution or rec.name} was built for devicekit API {major}.{minor}, this devicekit "
                f"provides API {core}: {fix}"))
            return False
        if minor > API_VERSION[1]:
            rec.notes.append(f"built for API {major}.{minor}, newer than this devicekit's {core}: features of the "
                             "newer minor version are unavailable")
        return True

    def register(self, obj: Any, rec: PluginRecord) -> bool:
        if not self.check_api(obj, rec):
            return False
        try:
            registered = self.pm.register(obj, name=rec.name)
        except Exception as e:  # noqa: BLE001 - pluggy validation errors, duplicate names
            self._fail(rec, "register", e)
            return False
        if registered is None:  # pluggy: the name is blocked
            rec.status = "blocked"
            rec.notes.append("disabled by DEVICEKIT_DISABLE_PLUGINS; not registered")
            return False
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as e:
            self.pm.unregister(obj)
            self._fail(rec, "check_pending", e)
            return False
        rec.obj = obj
        rec.status = "loaded"
        self.by_obj[id(obj)] = rec
        return True

    def add(self, obj: Any, name: str | None = None) -> PluginRecord:
        """Register an in-process plugin; always strict: a failure raises PluginError (the caller asked for it)."""
        name = name or getattr(obj, "__name__", None) or type(obj).__name__
        if name in self.records and self.records[name].status == "loaded":
            raise PluginError(f"a plugin named {name!r} is already registered ({who(self.records[name])})")
        rec = PluginRecord(name, getattr(obj, "__module__", None) or getattr(obj, "__name__", "?"))
        strict, self.failures.strict = self.failures.strict, True
        try:
            self.records[name] = rec
            self.register(obj, rec)
        finally:
            self.failures.strict = strict
        return rec

    def remove(self, name: str) -> None:
        rec = self.records.pop(name, None)
        if rec is None:
            raise KeyError(f"no plugin named {name!r}")
        if rec.obj is not None:
            self.pm.unregister(rec.obj)
            self.by_obj.pop(id(rec.obj), None)
