"""Plugins into the plugin manager, each in isolation: the entry points of group `devicekit`, enumerated with
importlib_metadata, sorted by name and loaded one at a time (blocked? -> import -> DEVICEKIT_API check -> register
-> check_pending), and in-process plugins (`register_plugin`). Any failure is recorded on the plugin's record and the
plugin skipped. Loading one plugin is a transaction: an exception that escapes it (KeyboardInterrupt, which is the
user's and is re-raised; or PluginError in strict mode) leaves no trace of that plugin, and the next
`load_entry_points` resumes with it, keeping the plugins already loaded.
Environment (through devicekit.settings): DEVICEKIT_DISABLE_PLUGINS=a,b (names never imported, matched
case-insensitively)."""

from __future__ import annotations

import time
from typing import Any

import pluggy

from .. import hookspecs, settings
from ..errors import PluginError
from ..plugin import API_VERSION
from .records import FailureLog, PluginRecord, dist_str, who
from .tracing import trace

__all__ = ["ENTRY_POINT_GROUP", "Plugins", "disabled_from_env", "entry_points"]

ENTRY_POINT_GROUP = "devicekit"


def backend_hooks(obj: Any) -> Any:
    """The hooks generated from the plugin's `DEVICEKIT_BACKEND` records (devicekit.backend), or None without any."""
    if getattr(obj, "DEVICEKIT_BACKEND", None) is None:
        return None
    from ..backend import BackendHooks, backends_of  # only a plugin that declares records needs it

    return BackendHooks(backends_of(obj))


def disabled_from_env() -> set[str]:
    return set(settings.get("DEVICEKIT_DISABLE_PLUGINS"))


def entry_points() -> list[Any]:
    """The installed entry points of group `devicekit`, sorted by name (nothing is imported)."""
    import importlib_metadata

    return sorted(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)


def ep_distribution(ep: Any) -> tuple[str | None, str | None]:
    """(name, version) of the distribution that installed `ep`. Read from the head of its METADATA: parsing it
    with importlib_metadata's email parser cost 30-70 ms of a fresh process's `devices()` for nine plugins."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None, None
    try:
        text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    except Exception:  # noqa: BLE001 - an unreadable file: the slow path says what it can
        text = ""
    name = version = None
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        if line.startswith("Name:"):
            name = line[5:].strip()
        elif line.startswith("Version:"):
            version = line[8:].strip()
    if name and version:
        return name, version
    return dist.metadata["Name"], dist.version


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
        self._done: set[tuple[str, str, str | None]] = set()  # entry points fully processed (name, value, dist)

    def _fail(self, rec: PluginRecord, phase: str, exc: BaseException) -> None:
        self.failures.fail(rec, phase, exc)

    def load_entry_points(self, only: str | None = None) -> None:
        """Load every entry point not loaded yet (`only`: just the one of that name). Safe to call again after an
        interruption: it resumes where it stopped."""
        eps = entry_points()
        if self.trace:
            trace(f"{len(eps)} entry points in group {ENTRY_POINT_GROUP!r}: {', '.join(e.name for e in eps)}")
        for ep in eps:
            if only is not None and ep.name != only:
                continue
            dname, dver = ep_distribution(ep)
            key = (ep.name, ep.value, dname)
            if key in self._done:
                continue
            self._load_one(ep, dname, dver)
            self._done.add(key)
        for name in self.disabled - set(self.records):
            self.pm.set_blocked(name)
            self.pm.set_blocked(name.lower())

    def _load_one(self, ep: Any, dname: str | None, dver: str | None) -> None:
        if ep.name in self.records:
            prev = self.records[ep.name]
            if prev.value == ep.value and prev.distribution == dname:
                return  # the same distribution seen twice on sys.path
            rec = PluginRecord(ep.name, ep.value, dname, dver)
            self.records[f"{ep.name}@{dname}"] = rec
            self._fail(rec, "register", ValueError(
                f"entry-point name {ep.name!r} is also used by {who(prev)}; plugin names must be unique"))
            return
        rec = PluginRecord(ep.name, ep.value, dname, dver)
        self.records[ep.name] = rec
        try:
            self._import_and_register(ep, rec)
        except BaseException:  # KeyboardInterrupt, or PluginError in strict mode: undo, then let it through
            self._forget(rec)
            if self.trace:
                trace(f"entry point {ep.name!r} interrupted; it will be loaded again on next use")
            raise

    def _import_and_register(self, ep: Any, rec: PluginRecord) -> None:
        if self.is_disabled(ep.name):
            rec.status = "blocked"
            rec.notes.append("disabled by DEVICEKIT_DISABLE_PLUGINS; not imported")
            self.pm.set_blocked(ep.name)
            if self.trace:
                trace(f"entry point {ep.name!r} = {ep.value} blocked by DEVICEKIT_DISABLE_PLUGINS")
            return
        t0 = time.perf_counter()
        try:
            obj = ep.load()
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - isolation: SystemExit, GeneratorExit, ... are the plugin's
            rec.load_seconds = time.perf_counter() - t0
            self._fail(rec, "import", e)
            return
        rec.load_seconds = time.perf_counter() - t0
        self.register(obj, rec)
        if self.trace:
            trace(f"entry point {ep.name!r} = {ep.value} ({dist_str(rec.distribution, rec.version)}): "
                  f"{rec.status} in {rec.load_seconds * 1e3:.1f} ms")

    def _forget(self, rec: PluginRecord) -> None:
        """Undo whatever part of loading `rec` happened (its record, its registration)."""
        if self.records.get(rec.name) is rec:
            del self.records[rec.name]
        obj = rec.obj if rec.obj is not None else self.pm.get_plugin(rec.name)
        hooks = rec.hooks if rec.hooks is not None else self.pm.get_plugin(f"{rec.name}[backend]")
        self._unregister(obj, hooks)

    def is_disabled(self, name: str) -> bool:
        """Blocked names match case-insensitively: DEVICEKIT_DISABLE_PLUGINS=CUDA blocks the entry point `cuda`
        (a user thinks in kinds, which are upper-case; entry-point names are lower-case by convention)."""
        return name in self.disabled or name.lower() in {d.lower() for d in self.disabled}

    def check_api(self, obj: Any, rec: PluginRecord) -> bool:
        try:
            declared = getattr(obj, "DEVICEKIT_API", None)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - a module __getattr__ that raises
            self._fail(rec, "api", e)
            return False
        if declared is None:
            rec.notes.append(f"declares no DEVICEKIT_API; assumed compatible with API {API_VERSION[0]}."
                             f"{API_VERSION[1]}")
            return True
        try:
            if isinstance(declared, (str, bytes)):
                raise TypeError
            major, minor = (x if type(x) is int else int(x) for x in declared)
        except KeyboardInterrupt:
            raise
        except BaseException:  # noqa: BLE001
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
            hooks = backend_hooks(obj)
            registered = self.pm.register(obj, name=rec.name)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - pluggy validation errors, duplicate names, plugin attributes
            self._fail(rec, "register", e)
            return False
        if registered is None:  # pluggy: the name is blocked
            rec.status = "blocked"
            rec.notes.append("disabled by DEVICEKIT_DISABLE_PLUGINS; not registered")
            return False
        try:
            if hooks is not None:  # its records' hooks, beside the module's own: answers counted as this plugin's
                self.pm.register(hooks, name=f"{rec.name}[backend]")
            self.pm.check_pending()
        except KeyboardInterrupt:
            self._unregister(obj, hooks)
            raise
        except BaseException as e:  # noqa: BLE001 - pluggy.PluginValidationError: a misspelled hook
            self._unregister(obj, hooks)
            self._fail(rec, "check_pending", e)
            return False
        rec.obj, rec.hooks = obj, hooks
        rec.status = "loaded"
        self.by_obj[id(obj)] = rec
        if hooks is not None:
            self.by_obj[id(hooks)] = rec
        return True

    def _unregister(self, *objs: Any) -> None:
        for o in objs:
            if o is not None and self.pm.is_registered(o):
                self.pm.unregister(o)
            self.by_obj.pop(id(o), None)

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
        except KeyboardInterrupt:  # nothing half-registered; a PluginError keeps its record (the failure is shown)
            self._forget(rec)
            raise
        finally:
            self.failures.strict = strict
        return rec

    def remove(self, name: str) -> None:
        rec = self.records.pop(name, None)
        if rec is None:
            raise KeyError(f"no plugin named {name!r}")
        self._unregister(rec.obj, rec.hooks)
