"""The registry: loads plugins from entry points (group "devicekit") one by one, isolates their failures, resolves
hook answers by explicit priority, and creates devices lazily, once per canonical spec, under a lock.

Environment: DEVICEKIT_STRICT_PLUGINS=1 (a plugin failure raises), DEVICEKIT_DISABLE_PLUGINS=a,b (entry-point
names never imported), DEVICEKIT_TRACE_PLUGINS=1 (loading and hook calls traced to stderr), DEVICEKIT_DEVICE (the
default device), DEVICEKIT_PROBE_TIMEOUT (seconds a kind's probe/count may take, default 5).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import pluggy

from . import hookspecs
from .debug import dprint, env_flag, warn_once
from .errors import DeviceKitError, DeviceNotFoundError, DeviceUnavailableError, PluginError, ResolutionError
from .plugin import API_VERSION, AllocatorFactory, Availability, CompilerPairFactory, DeviceKind, RuntimeFactoryDecl
from .spec import DeviceSpec

__all__ = ["DeviceInfo", "PluginFailure", "PluginRecord", "PluginWarning", "ProbeTimeout", "Registry", "device", "devices",
           "get_registry", "register_plugin", "reset_registry", "target", "unregister_plugin"]

ENTRY_POINT_GROUP = "devicekit"
# failures in these phases mean the plugin contributes nothing (its kinds are unknown)
_DISCOVERY_PHASES = ("import", "api", "register", "check_pending", "hook devicekit_device_kinds")


class PluginWarning(RuntimeWarning):
    """A plugin failed and was skipped (DEVICEKIT_STRICT_PLUGINS=1 turns this into an error)."""


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
        return f"plugin {self.plugin!r} ({_dist_str(self.distribution, self.version)}) failed at {self.phase}: " \
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

    def to_dict(self) -> dict:
        return {"name": self.name, "module": self.value, "distribution": self.distribution, "version": self.version,
                "status": self.status, "api": list(self.api) if self.api else None, "notes": list(self.notes),
                "failures": [f.to_dict() for f in self.failures], "load_ms": round(self.load_seconds * 1e3, 3)}


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

    def to_dict(self) -> dict:
        d = asdict(self)
        d["pair_names"] = list(self.pair_names)
        return d


@dataclass
class _KindEntry:
    decl: DeviceKind
    plugin: PluginRecord
    shadowed: list[str] = field(default_factory=list)
    error: str | None = None  # a tie at the top between two plugins
    availability: Availability | None = None
    count: int | None = None


def _dist_str(dist: str | None, version: str | None) -> str:
    if dist is None:
        return "not from a distribution"
    return f"{dist} {version}" if version else dist


def _who(rec: PluginRecord) -> str:
    return f"{rec.name!r} ({_dist_str(rec.distribution, rec.version)})"


def _disabled_from_env() -> set[str]:
    return {n.strip() for n in os.environ.get("DEVICEKIT_DISABLE_PLUGINS", "").split(",") if n.strip()}


def _trace(msg: str) -> None:
    print(f"devicekit-trace: {msg}", file=sys.stderr, flush=True)


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


def _bounded(fn: Any, what: str) -> Any:
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


_HOOK_TYPES: dict[str, tuple[type, bool]] = {  # hook -> (declaration type, returns a list)
    "devicekit_device_kinds": (DeviceKind, True),
    "devicekit_allocator": (AllocatorFactory, False),
    "devicekit_compiler_pairs": (CompilerPairFactory, True),
    "devicekit_runtime_factory": (RuntimeFactoryDecl, False),
}


class Registry:
    """Plugins, kinds and devices. Use the process-wide one through the module functions (`device()`, ...)."""

    def __init__(self, entry_points: bool = True, strict: bool | None = None, disabled: set[str] | None = None,
                 trace: bool | None = None):
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self.strict = env_flag("DEVICEKIT_STRICT_PLUGINS") if strict is None else strict
        self.disabled = _disabled_from_env() if disabled is None else set(disabled)
        self.trace = env_flag("DEVICEKIT_TRACE_PLUGINS") if trace is None else trace
        self._use_entry_points = entry_points
        self._loaded = False
        self._lock = threading.RLock()
        self._records: dict[str, PluginRecord] = {}
        self._by_obj: dict[int, PluginRecord] = {}
        self._kinds: dict[str, _KindEntry] | None = None
        self._devices: dict[DeviceSpec, Any] = {}
        self._targets: dict[DeviceSpec, Any] = {}
        self._seen_failures: set[tuple] = set()
        if self.trace:
            self.pm.add_hookcall_monitoring(self._trace_before, self._trace_after)

    # ------------------------------------------------------------------ tracing
    def _trace_before(self, hook_name: str, impls: list, kwargs: dict) -> None:
        _trace(f"call {hook_name}({', '.join(f'{k}={v}' for k, v in kwargs.items())}) "
               f"-> [{', '.join(i.plugin_name for i in impls)}]")

    def _trace_after(self, outcome: Any, hook_name: str, impls: list, kwargs: dict) -> None:
        if outcome.exception is not None:
            _trace(f"  {hook_name} raised {type(outcome.exception).__name__}: {outcome.exception}")
        else:
            _trace(f"  {hook_name} returned {outcome.get_result()!r}")

    # ------------------------------------------------------------------ loading
    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            self._loaded = True
            if self._use_entry_points:
                self._load_entry_points()

    def _load_entry_points(self) -> None:
        import importlib_metadata

        eps = sorted(importlib_metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
        if self.trace:
            _trace(f"{len(eps)} entry points in group {ENTRY_POINT_GROUP!r}: {', '.join(e.name for e in eps)}")
        for ep in eps:
            dist = getattr(ep, "dist", None)
            dname = dist.metadata["Name"] if dist is not None else None
            dver = dist.version if dist is not None else None
            if ep.name in self._records:
                prev = self._records[ep.name]
                if prev.value == ep.value and prev.distribution == dname:
                    continue  # the same distribution seen twice on sys.path
                rec = PluginRecord(ep.name, ep.value, dname, dver)
                self._records[f"{ep.name}@{dname}"] = rec
                self._fail(rec, "register", ValueError(
                    f"entry-point name {ep.name!r} is also used by {_who(prev)}; plugin names must be unique"))
                continue
            rec = PluginRecord(ep.name, ep.value, dname, dver)
            self._records[ep.name] = rec
            if self._is_disabled(ep.name):
                rec.status = "blocked"
                rec.notes.append("disabled by DEVICEKIT_DISABLE_PLUGINS; not imported")
                self.pm.set_blocked(ep.name)
                if self.trace:
                    _trace(f"entry point {ep.name!r} = {ep.value} blocked by DEVICEKIT_DISABLE_PLUGINS")
                continue
            t0 = time.perf_counter()
            try:
                obj = ep.load()
            except (Exception, SystemExit) as e:  # noqa: BLE001 - isolation: any import failure is recorded
                rec.load_seconds = time.perf_counter() - t0
                self._fail(rec, "import", e)
                continue
            rec.load_seconds = time.perf_counter() - t0
            self._register(obj, rec)
            if self.trace:
                _trace(f"entry point {ep.name!r} = {ep.value} ({_dist_str(dname, dver)}): {rec.status} "
                       f"in {rec.load_seconds * 1e3:.1f} ms")
        for name in self.disabled - set(self._records):
            self.pm.set_blocked(name)
            self.pm.set_blocked(name.lower())

    def _is_disabled(self, name: str) -> bool:
        """Blocked names match case-insensitively: DEVICEKIT_DISABLE_PLUGINS=CUDA blocks the entry point `cuda`
        (a user thinks in kinds, which are upper-case; entry-point names are lower-case by convention)."""
        return name in self.disabled or name.lower() in {d.lower() for d in self.disabled}

    def _fail(self, rec: PluginRecord, phase: str, exc: BaseException) -> PluginFailure:
        f = PluginFailure(rec.name, rec.distribution, rec.version, phase, exc)
        sig = (rec.name, phase, type(exc).__name__, str(exc))
        if sig not in self._seen_failures:
            self._seen_failures.add(sig)
            rec.failures.append(f)
            if phase in _DISCOVERY_PHASES:
                rec.status = "failed"
            dprint(1, str(f))
            if self.trace:
                _trace(str(f))
            if self.strict:
                raise PluginError(f"{f} (DEVICEKIT_STRICT_PLUGINS=1)") from exc
            warnings.warn(f"devicekit: {f}; skipped (run `devicekit info` for details)", PluginWarning, stacklevel=4)
        return f

    def _check_api(self, obj: Any, rec: PluginRecord) -> bool:
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

    def _register(self, obj: Any, rec: PluginRecord) -> bool:
        if not self._check_api(obj, rec):
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
        self._by_obj[id(obj)] = rec
        return True

    def register_plugin(self, obj: Any, name: str | None = None) -> PluginRecord:
        """Register an in-process plugin (a module or object with hookimpls), e.g. from a test or a notebook.
        Unlike entry points, a failure here raises PluginError: the caller asked for this plugin."""
        self._ensure_loaded()
        name = name or getattr(obj, "__name__", None) or type(obj).__name__
        with self._lock:
            if name in self._records and self._records[name].status == "loaded":
                raise PluginError(f"a plugin named {name!r} is already registered ({_who(self._records[name])})")
            rec = PluginRecord(name, getattr(obj, "__module__", None) or getattr(obj, "__name__", "?"))
            strict, self.strict = self.strict, True
            try:
                self._records[name] = rec
                self._register(obj, rec)
            finally:
                self.strict = strict
            self._invalidate()
            return rec

    def unregister_plugin(self, name: str) -> None:
        """Remove a plugin registered in-process or from an entry point. Devices already created keep working."""
        with self._lock:
            rec = self._records.pop(name, None)
            if rec is None:
                raise KeyError(f"no plugin named {name!r}")
            if rec.obj is not None:
                self.pm.unregister(rec.obj)
                self._by_obj.pop(id(rec.obj), None)
            self._invalidate()

    def _invalidate(self) -> None:
        self._kinds = None
        self._targets.clear()
        self._devices.clear()

    # ------------------------------------------------------------------ hook calls
    def _call(self, hook: str, **kwargs: Any) -> list[tuple[PluginRecord, Any]]:
        """Every plugin's answer to `hook`, each call isolated: an exception or a wrong type is that plugin's
        failure. List hooks are flattened to (plugin, declaration) pairs."""
        self._ensure_loaded()
        decl_type, is_list = _HOOK_TYPES[hook]
        caller = getattr(self.pm.hook, hook)
        plugins = self.pm.get_plugins()
        out: list[tuple[PluginRecord, Any]] = []
        for impl in reversed(caller.get_hookimpls()):  # registration order, for stable messages
            rec = self._by_obj.get(id(impl.plugin))
            if rec is None:
                continue
            try:
                sub = self.pm.subset_hook_caller(hook, [p for p in plugins if p is not impl.plugin])
                results = sub(**kwargs)
            except Exception as e:  # noqa: BLE001 - isolation
                self._fail(rec, f"hook {hook}", e)
                continue
            if not results:
                continue
            res = results[0]
            items = list(res) if is_list and isinstance(res, (list, tuple)) else None
            if (items is None and (is_list or not isinstance(res, decl_type))) or \
                    (items is not None and not all(isinstance(x, decl_type) for x in items)):
                want = f"a list of {decl_type.__name__}" if is_list else f"{decl_type.__name__} or None"
                self._fail(rec, f"hook {hook}", TypeError(f"{hook} must return {want}, got {res!r}"))
                continue
            out.extend((rec, x) for x in items) if items is not None else out.append((rec, res))
        return out

    @staticmethod
    def _ranked(answers: list[tuple[PluginRecord, Any]], what: str) -> list[tuple[PluginRecord, Any]]:
        """Answers best first by priority; equal priorities from different plugins at the top are an error.
        Within one plugin, its own order breaks ties."""
        order = sorted(range(len(answers)), key=lambda i: (-answers[i][1].priority, answers[i][0].name, i))
        ranked = [answers[i] for i in order]
        if len(ranked) >= 2:
            (ra, a), (rb, b) = ranked[0], ranked[1]
            if a.priority == b.priority and ra is not rb:
                names = [f"{getattr(x, 'name', '')!r} " if getattr(x, "name", None) else "" for x in (a, b)]
                raise ResolutionError(
                    f"{what}: plugins {_who(ra)} ({names[0]}priority {a.priority}) and {_who(rb)} "
                    f"({names[1]}priority {b.priority}) tie at the top; devicekit does not pick by registration "
                    "order. Give one a higher priority, or disable one with DEVICEKIT_DISABLE_PLUGINS.")
        return ranked

    # ------------------------------------------------------------------ kinds
    def _kind_table(self) -> dict[str, _KindEntry]:
        self._ensure_loaded()
        with self._lock:
            if self._kinds is not None:
                return self._kinds
            by_kind: dict[str, list[tuple[PluginRecord, DeviceKind]]] = {}
            for rec, decl in self._call("devicekit_device_kinds"):
                try:
                    kind = DeviceSpec(decl.name).kind
                except (TypeError, ValueError) as e:
                    self._fail(rec, "hook devicekit_device_kinds", e)
                    continue
                by_kind.setdefault(kind, []).append((rec, decl))
            table: dict[str, _KindEntry] = {}
            for kind, answers in by_kind.items():
                try:
                    ranked = self._ranked(answers, f"device kind {kind}")
                    error = None
                except ResolutionError as e:
                    ranked = sorted(answers, key=lambda a: -a[1].priority)
                    error = str(e)
                rec, decl = ranked[0]
                table[kind] = _KindEntry(decl, rec, [f"{_who(r)} priority {d.priority}" for r, d in ranked[1:]], error)
            self._kinds = table
            return table

    def _availability(self, entry: _KindEntry) -> Availability:
        with self._lock:
            if entry.availability is None:
                if entry.error:
                    entry.availability = Availability.no(entry.error)
                else:
                    try:
                        a = _bounded(entry.decl.probe, "probe")
                        if not isinstance(a, Availability):
                            a = Availability(bool(a), "" if a else "probe said no")
                    except ProbeTimeout as e:
                        self._fail(entry.plugin, "probe", e)
                        a = Availability.no(str(e))
                    except (Exception, SystemExit) as e:  # noqa: BLE001 - a probe that raises is the plugin's failure
                        f = self._fail(entry.plugin, "probe", e)
                        a = Availability.no(f"probe raised {f.describe()}")
                    if a.ok:
                        try:
                            entry.count = int(_bounded(entry.decl.count, "count()"))
                        except ProbeTimeout as e:
                            self._fail(entry.plugin, "count", e)
                            a = Availability.no(str(e))
                        except (Exception, SystemExit) as e:  # noqa: BLE001
                            f = self._fail(entry.plugin, "count", e)
                            a = Availability.no(f"count() raised {f.describe()}")
                        else:
                            if entry.count <= 0:
                                a = Availability.no("no devices of this kind were found")
                    entry.availability = a
            return entry.availability

    def _failed_kind_reasons(self) -> dict[str, tuple[PluginRecord, str]]:
        """Kinds guessed from failed/blocked plugins (the entry-point name, upper-cased, by convention)."""
        out: dict[str, tuple[PluginRecord, str]] = {}
        for rec in self._records.values():
            if rec.status == "blocked":
                why = f"its plugin {_who(rec)} is disabled by DEVICEKIT_DISABLE_PLUGINS"
            elif rec.status == "failed":
                f = next((f for f in rec.failures if f.phase in _DISCOVERY_PHASES), rec.failures[0])
                why = str(f)
            else:
                continue
            try:
                out.setdefault(DeviceSpec(rec.name).kind, (rec, why))
            except ValueError:
                continue
        return out

    # ------------------------------------------------------------------ listing
    def plugins(self) -> list[PluginRecord]:
        self._ensure_loaded()
        return list(self._records.values())

    def failures(self) -> list[PluginFailure]:
        self._ensure_loaded()
        return [f for rec in self._records.values() for f in rec.failures]

    def pair_names(self, spec: DeviceSpec) -> list[str]:
        """Names of the compiler pairs offered for `spec`, best first (declarations only; nothing is built)."""
        answers = self._call("devicekit_compiler_pairs", spec=spec)
        try:
            ranked = self._ranked(answers, f"compiler pairs for {spec}")
        except ResolutionError:  # listing still shows them; using the kind reports the tie
            ranked = sorted(answers, key=lambda a: -a[1].priority)
        return [d.name for _, d in ranked]

    def devices(self) -> list[DeviceInfo]:
        """Every known kind and id with its plugin and availability; unavailable ones with the reason.
        Imports nothing heavy: only declarations and probes run."""
        table = self._kind_table()
        out: list[DeviceInfo] = []
        for kind, e in sorted(table.items(), key=lambda kv: (-kv[1].decl.priority, kv[0])):
            a = self._availability(e)
            pairs = tuple(self.pair_names(DeviceSpec(kind)))
            base = {"kind": kind, "plugin": e.plugin.name, "distribution": e.plugin.distribution,
                    "version": e.plugin.version, "pair_names": pairs, "priority": e.decl.priority,
                    "description": e.decl.description}
            if a.ok:
                for i in range(e.count or 0):
                    out.append(DeviceInfo(spec=str(DeviceSpec(kind, i)), available=True, **base))
            else:
                out.append(DeviceInfo(spec=kind, available=False, reason=a.reason, **base))
        for kind, (rec, why) in sorted(self._failed_kind_reasons().items()):
            if kind not in table:
                out.append(DeviceInfo(kind, kind, rec.name, rec.distribution, rec.version, False, why))
        return out

    def _not_found(self, spec: DeviceSpec) -> DeviceKitError:
        failed = self._failed_kind_reasons()
        if spec.kind in failed:
            return DeviceUnavailableError(f"device {spec} is not available: {failed[spec.kind][1]}")
        infos = self.devices()
        avail = [d.spec for d in infos if d.available]
        unavail = [f"{d.spec} ({d.reason})" for d in infos if not d.available]
        msg = f"no device {str(spec)!r}. Available: {', '.join(avail) or 'none'}."
        if unavail:
            msg += f" Unavailable: {'; '.join(unavail)}."
        other = [str(f) for f in self.failures() if f.phase in _DISCOVERY_PHASES]
        if other:
            msg += f" Failed plugins: {'; '.join(other)}."
        return DeviceNotFoundError(msg)

    # ------------------------------------------------------------------ building
    def _build_pairs(self, spec: DeviceSpec) -> tuple[list, list[str], list[str]]:
        answers = self._call("devicekit_compiler_pairs", spec=spec)
        if not answers:
            raise DeviceUnavailableError(f"{spec}: no plugin offers a (renderer, compiler) pair for {spec.kind}")
        ranked = self._ranked(answers, f"compiler pairs for {spec}")
        pairs, names, skipped = [], [], []
        for rec, decl in ranked:
            try:
                pairs.append((decl.renderer(spec), decl.compiler(spec)))
                names.append(decl.name)
            except Exception as e:  # noqa: BLE001 - a missing toolchain: skip the pair, keep the reason
                if not pairs:
                    skipped.append(f"compiler pair {decl.name!r} from plugin {rec.name!r} skipped: "
                                   f"{type(e).__name__}: {e}")
                dprint(1, f"{spec}: compiler pair {decl.name!r} ({rec.name}) unavailable: {type(e).__name__}: {e}")
        if not pairs:
            raise DeviceUnavailableError(f"{spec}: no compiler pair could be built: {'; '.join(skipped)}")
        if skipped:
            dprint(1, f"{spec}: using compiler pair {names[0]!r}; {'; '.join(skipped)}")
        return pairs, names, skipped

    def _build_one(self, spec: DeviceSpec, hook: str, what: str) -> tuple[Any, list[str]]:
        answers = self._call(hook, spec=spec)
        if not answers:
            raise DeviceUnavailableError(f"{spec}: no plugin provides {what} for {spec.kind}")
        skipped: list[str] = []
        for rec, decl in self._ranked(answers, f"{what} for {spec}"):
            try:
                return decl.factory(spec), skipped
            except Exception as e:  # noqa: BLE001
                skipped.append(f"{what} from plugin {rec.name!r} skipped: {type(e).__name__}: {e}")
                dprint(1, f"{spec}: {skipped[-1]}")
        raise DeviceUnavailableError(f"{spec}: no {what} could be built: {'; '.join(skipped)}")

    def _entry(self, spec: DeviceSpec) -> _KindEntry:
        entry = self._kind_table().get(spec.kind)
        if entry is None:
            raise self._not_found(spec)
        if entry.error:
            raise ResolutionError(entry.error)
        return entry

    def target(self, spec: DeviceSpec | str) -> Any:
        """The Target of a kind: its compiler pairs, even where the kind cannot run."""
        from .device import Target

        spec = DeviceSpec.parse(spec)
        self._ensure_loaded()
        with self._lock:
            if (t := self._targets.get(spec)) is not None:
                return t
            if spec.kind in self._kind_table() and self._kind_table()[spec.kind].error:
                raise ResolutionError(self._kind_table()[spec.kind].error)
            try:
                pairs, names, skipped = self._build_pairs(spec)
            except DeviceUnavailableError:
                if spec.kind not in self._kind_table():
                    raise self._not_found(spec) from None
                raise
            t = Target(spec, pairs, names, "; ".join(skipped) or None)
            self._targets[spec] = t
            return t

    def device(self, spec: DeviceSpec | str | None = None) -> Any:
        """The Device for `spec` (default: DEVICEKIT_DEVICE, else the available kind of highest priority), created
        once per canonical spec."""
        from .device import Device

        spec = self.default_spec() if spec is None else DeviceSpec.parse(spec)
        if (d := self._devices.get(spec)) is not None:
            return d
        with self._lock:
            if (d := self._devices.get(spec)) is not None:
                return d
            entry = self._entry(spec)
            a = self._availability(entry)
            if not a.ok:
                raise DeviceUnavailableError(f"device {spec} (plugin {_who(entry.plugin)}) is not available: "
                                             f"{a.reason}")
            if spec.index >= (entry.count or 0):
                ids = ", ".join(str(DeviceSpec(spec.kind, i)) for i in range(entry.count or 0))
                raise DeviceNotFoundError(f"no device {str(spec)!r}: {spec.kind} has {entry.count} device(s): {ids}")
            pairs, names, skipped = self._build_pairs(spec)
            allocator, s1 = self._build_one(spec, "devicekit_allocator", "an allocator")
            runtime, s2 = self._build_one(spec, "devicekit_runtime_factory", "a runtime")
            reasons = skipped + s1 + s2
            d = Device.from_pairs(spec, allocator, pairs, names, runtime, "; ".join(reasons) or None)
            dprint(1, f"created device {spec}: pairs {names}, plugin {_who(entry.plugin)}"
                   + (f"; fallback: {d.fallback_reason}" if d.fallback_reason else ""))
            self._devices[spec] = d
            return d

    def default_spec(self) -> DeviceSpec:
        if env := os.environ.get("DEVICEKIT_DEVICE", "").strip():
            return DeviceSpec.parse(env)
        table = self._kind_table()
        ready = [(e.decl.priority, k, e) for k, e in table.items() if not e.error and self._availability(e).ok]
        if not ready:
            raise DeviceNotFoundError("no device is available. " + "; ".join(
                f"{d.spec}: {d.reason}" for d in self.devices()) + " (see `devicekit info`)")
        ready.sort(key=lambda r: (-r[0], r[1]))
        if len(ready) >= 2 and ready[0][0] == ready[1][0]:
            (p, ka, ea), (_, kb, eb) = ready[0], ready[1]
            raise ResolutionError(f"default device: kinds {ka} (plugin {_who(ea.plugin)}) and {kb} (plugin "
                                  f"{_who(eb.plugin)}) both have priority {p}; set DEVICEKIT_DEVICE to choose")
        return DeviceSpec(ready[0][1])

    # ------------------------------------------------------------------ diagnostics
    def report(self, build: bool = True) -> dict:
        """Everything `devicekit info` shows. With `build`, targets are built to report pair fallbacks (this may
        import toolchains such as llvmlite)."""
        from .compile.cache import cache_info

        self._ensure_loaded()
        kinds = {}
        for kind, e in sorted(self._kind_table().items()):
            a = self._availability(e)
            spec = DeviceSpec(kind)
            k: dict[str, Any] = {"plugin": e.plugin.name, "distribution": e.plugin.distribution,
                                 "version": e.plugin.version, "priority": e.decl.priority,
                                 "description": e.decl.description, "available": a.ok, "reason": a.reason,
                                 "ids": [str(DeviceSpec(kind, i)) for i in range(e.count or 0)] if a.ok else [],
                                 "shadowed": e.shadowed, "error": e.error}
            try:
                ranked = self._ranked(self._call("devicekit_compiler_pairs", spec=spec), f"compiler pairs for {kind}")
                k["pairs"] = [{"name": d.name, "plugin": r.name, "priority": d.priority} for r, d in ranked]
            except ResolutionError as err:
                k["pairs"], k["error"] = [], str(err)
            if build and not k["error"]:
                try:
                    t = self.target(spec)
                    k["pairs_built"], k["fallback"] = t.pair_names, t.fallback_reason
                except Exception as err:  # noqa: BLE001 - the diagnostic reports, it does not fail
                    k["pairs_built"], k["fallback"] = [], f"{type(err).__name__}: {err}"
            kinds[kind] = k
        try:
            default, default_error = str(self.default_spec()), None
        except DeviceKitError as err:
            default, default_error = None, str(err)
        try:
            cache = cache_info()
        except Exception as err:  # noqa: BLE001
            cache = {"state": f"error: {type(err).__name__}: {err}"}
        try:
            from importlib_metadata import version
            core_version = version("devicekit")
        except Exception:  # noqa: BLE001 - running from a source tree
            core_version = None
        return {
            "devicekit": {"version": core_version, "api": list(API_VERSION), "python": sys.version.split()[0]},
            "plugins": [r.to_dict() for r in self._records.values()],
            "kinds": kinds,
            "devices": [d.to_dict() for d in self.devices()],
            "default_device": default, "default_device_error": default_error,
            "cache": cache,
            "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("DEVICEKIT_")},
            "strict": self.strict,
        }


_registry: Registry | None = None
_registry_lock = threading.Lock()


def _after_fork_in_child() -> None:
    """A child forked while another thread held the process-wide registry's lock (loading plugins, building a
    device) would wait on it forever: the half-built registry is dropped (rebuilt on next use, its lock released
    for anyone still holding it); an idle registry is kept as it is."""
    global _registry, _registry_lock
    _registry_lock = threading.Lock()
    lock = getattr(_registry, "_lock", None)
    if lock is None:
        return
    if lock.acquire(blocking=False):  # free, or held by the forking thread itself (an RLock): consistent
        lock.release()
    else:
        lock._at_fork_reinit()
        _registry = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def get_registry() -> Registry:
    """The process-wide registry (entry points are loaded on first use)."""
    global _registry
    if _registry is None:
        with _registry_lock:
            if _registry is None:
                _registry = Registry()
    return _registry


def reset_registry(registry: Registry | None = None) -> Registry:
    """Replace the process-wide registry (re-reading the environment); returns the new one."""
    global _registry
    with _registry_lock:
        _registry = registry if registry is not None else Registry()
        return _registry


def device(spec: DeviceSpec | str | None = None) -> Any:
    return get_registry().device(spec)


def target(spec: DeviceSpec | str) -> Any:
    return get_registry().target(spec)


def devices() -> list[DeviceInfo]:
    return get_registry().devices()


def register_plugin(obj: Any, name: str | None = None) -> PluginRecord:
    return get_registry().register_plugin(obj, name)


def unregister_plugin(name: str) -> None:
    get_registry().unregister_plugin(name)

