"""The Registry: one object holding the plugins, the kind table and the devices built so far. It asks `loading` for
the plugins (on first use, not at import), `calls` for the hooks' answers, `probing` for availability, `resolution`
for who wins, and `building` for Targets and Devices, which it creates once per canonical spec under one lock.

Loading is retried until it completes: an interrupted load (KeyboardInterrupt) leaves the plugins loaded so far and
resumes on the next use.

Environment (through devicekit.settings, read when the Registry is made): DEVICEKIT_STRICT_PLUGINS=1 (a plugin
failure raises), DEVICEKIT_TRACE_PLUGINS=1 (loading and hook calls traced to stderr), DEVICEKIT_DISABLE_PLUGINS,
DEVICEKIT_PROBE_TIMEOUT; DEVICEKIT_DEVICE (the default device) is read on each use.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from .. import settings
from ..debug import dprint
from ..errors import DeviceKitError, DeviceNotFoundError, DeviceUnavailableError, ResolutionError, SettingError
from ..plugin import Availability
from ..spec import DeviceSpec
from ..targets import Device, Target
from . import probe_memo
from .building import build_device, build_target, override_note
from .calls import call_each
from .loading import Plugins, disabled_from_env
from .probing import probe_kind, user_probe_timeout
from .records import (
    DISCOVERY_PHASES,
    DeviceInfo,
    FailureLog,
    PluginFailure,
    PluginRecord,
    failed_kinds,
    id_summary,
    short_reason,
    who,
)
from .resolution import KindEntry, default_kind, kind_table, ranked
from .suggest import kind_hint
from .tracing import monitor

__all__ = ["Registry"]


class Registry:
    """Plugins, kinds and devices. Use the process-wide one through `devicekit.registry.get_registry()`."""

    def __init__(self, entry_points: bool = True, strict: bool | None = None, disabled: set[str] | None = None,
                 trace: bool | None = None, probe_timeout_s: float | None = None, only: str | None = None):
        """Arguments left None are read from the environment (a bad value is a SettingError naming the variable);
        `probe_timeout_s` None and DEVICEKIT_PROBE_TIMEOUT unset: each kind's own timeout (`DeviceKind.probe_timeout`,
        else 5 s). `only`: load just the entry point of that name (`devicekit info --isolate` runs one plugin per
        process)."""
        trace = settings.get("DEVICEKIT_TRACE_PLUGINS") if trace is None else trace
        self.failure_log = FailureLog(settings.get("DEVICEKIT_STRICT_PLUGINS") if strict is None else strict, trace)
        self.plugin_set = Plugins(self.failure_log, disabled_from_env() if disabled is None else set(disabled), trace)
        self.probe_timeout = user_probe_timeout() if probe_timeout_s is None else probe_timeout_s
        self.trace = trace
        self._use_entry_points = entry_points
        self._only = only
        self._loaded = False
        self._loading = False
        self._lock = threading.RLock()
        self._kinds: dict[str, KindEntry] | None = None
        self.fresh_probes = False  # True: never use remembered probe answers (probe_all)
        self._devices: dict[DeviceSpec, Device] = {}
        self._targets: dict[DeviceSpec, Target] = {}
        if trace:
            monitor(self.pm)

    @property
    def pm(self) -> Any:
        """The pluggy PluginManager."""
        return self.plugin_set.pm

    @property
    def strict(self) -> bool:
        return self.failure_log.strict

    @strict.setter
    def strict(self, value: bool) -> None:
        self.failure_log.strict = value

    @property
    def disabled(self) -> set[str]:
        return self.plugin_set.disabled

    def _fail(self, rec: PluginRecord, phase: str, exc: BaseException) -> PluginFailure:
        return self.failure_log.fail(rec, phase, exc)

    # ------------------------------------------------------------------ loading
    def _ensure_loaded(self) -> None:
        """Load the entry points once. Re-entry from a plugin that uses devicekit while being imported sees the
        plugins loaded so far; whatever it computed is dropped when loading completes. An exception that escapes
        (KeyboardInterrupt) leaves `_loaded` False, so the next use resumes loading."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded or self._loading:
                return
            self._loading = True
            try:
                if self._use_entry_points:
                    self.plugin_set.load_entry_points(self._only)
                self._loaded = True
            finally:
                self._loading = False
            if self._kinds is not None or self._targets or self._devices:
                self._invalidate()

    def register_plugin(self, obj: Any, name: str | None = None) -> PluginRecord:
        """Register an in-process plugin (a module or object with hookimpls), e.g. from a test or a notebook.
        Unlike entry points, a failure here raises PluginError: the caller asked for this plugin."""
        self._ensure_loaded()
        with self._lock:
            rec = self.plugin_set.add(obj, name)
            self._invalidate()
            return rec

    def unregister_plugin(self, name: str) -> None:
        """Remove a plugin registered in-process or from an entry point. Devices already created keep working."""
        with self._lock:
            self.plugin_set.remove(name)
            self._invalidate()

    def _invalidate(self) -> None:
        self._kinds = None
        self._targets.clear()
        self._devices.clear()

    # ------------------------------------------------------------------ answers
    def call(self, hook: str, **kwargs: Any) -> list[tuple[PluginRecord, Any]]:
        """Every plugin's answer to `hook`, each call isolated (see `calls.call_each`)."""
        self._ensure_loaded()
        return call_each(self.pm, self.plugin_set.by_obj, hook, self._fail, **kwargs)

    def kind_table(self) -> dict[str, KindEntry]:
        """Kind -> its owner (built once, after loading)."""
        self._ensure_loaded()
        with self._lock:
            if self._kinds is None:
                self._kinds = kind_table(self.call("devicekit_device_kinds"), self._fail)
            return self._kinds

    def availability(self, entry: KindEntry) -> Availability:
        """The kind's availability, probing it on first use (or its answer remembered by an earlier process, for a
        kind that allows it: `probe_memo`; `confirmed` probes it for real). A clean "unavailable" of a kind that
        declares `DeviceKind.recheck_after` is probed again when asked that many seconds after it was given (a Ray
        cluster started after this process listed devices); every other answer stands for the registry's life."""
        with self._lock:
            if entry.availability is None:
                if entry.error:
                    entry.availability = Availability.no(entry.error)
                elif not self.fresh_probes and probe_memo.allowed(entry) and (hit := probe_memo.recall(entry)):
                    entry.availability, entry.count = hit
                    entry.remembered = True
                    entry.answered(time.monotonic(), True)
                    dprint(1, f"{entry.decl.name}: listed from its remembered probe answer (probed again before a "
                              "device is built; DEVICEKIT_PROBE_CACHE=0: always probe)")
                else:
                    self._probe(entry)
            elif entry.due(time.monotonic()):
                dprint(1, f"{entry.decl.name}: unavailable for {entry.decl.recheck_after:g}s or more; probing it "
                          "again (its DeviceKind.recheck_after)")
                self._probe(entry)
            return entry.availability

    def _probe(self, entry: KindEntry) -> None:
        faults: list[str] = []  # phases the plugin failed in during this probe (a repeated failure is logged once)

        def fail(rec: PluginRecord, phase: str, exc: BaseException) -> PluginFailure:
            faults.append(phase)
            return self._fail(rec, phase, exc)
        at = probe_memo.key(entry) if probe_memo.allowed(entry) else None
        before = dict(os.environ)
        try:
            a, count = probe_kind(entry.decl, entry.plugin, fail, self.probe_timeout)
        finally:
            probe_memo.probed(before)
        entry.count, entry.availability, entry.remembered = count, a, False
        entry.answered(time.monotonic(), not faults)  # a probe that raised or hung is not asked again
        if at is not None and not faults:  # only clean answers are kept
            probe_memo.remember(entry, a, count, at)

    def confirmed(self, entry: KindEntry) -> Availability:
        """The kind's availability from a probe in this process (a remembered answer is probed again)."""
        a = self.availability(entry)
        if entry.remembered:
            with self._lock:
                if entry.remembered:
                    self._probe(entry)
                a = entry.availability
        return a

    def probe_all(self) -> None:
        """Probe every kind in this process from now on (`devicekit info`: it tells what a probe says now, and
        refreshes the remembered answers and any "unavailable" a kind allows to change, however recent)."""
        self.fresh_probes = True
        for entry in self.kind_table().values():
            with self._lock:
                if entry.availability is not None and (entry.remembered or entry.recheck_at is not None):
                    self._probe(entry)
            self.availability(entry)  # first use: probed here, never from the memo

    def ranked_pairs(self, spec: DeviceSpec) -> list[tuple[PluginRecord, Any]]:
        """The compiler-pair declarations for `spec`, best first (ResolutionError on a tie at the top)."""
        return ranked(self.call("devicekit_compiler_pairs", spec=spec), f"compiler pairs for {spec}")

    # ------------------------------------------------------------------ listing
    def plugins(self) -> list[PluginRecord]:
        self._ensure_loaded()
        return list(self.plugin_set.records.values())

    def failures(self) -> list[PluginFailure]:
        self._ensure_loaded()
        return [f for rec in self.plugin_set.records.values() for f in rec.failures]

    def pair_names(self, spec: DeviceSpec) -> list[str]:
        """Names of the compiler pairs offered for `spec`, best first (declarations only; nothing is built)."""
        answers = self.call("devicekit_compiler_pairs", spec=spec)
        try:
            best = ranked(answers, f"compiler pairs for {spec}")
        except ResolutionError:  # listing still shows them; using the kind reports the tie
            best = sorted(answers, key=lambda a: -a[1].priority)
        return [d.name for _, d in best]

    def devices(self) -> list[DeviceInfo]:
        """Every known kind and id with its plugin and availability; unavailable ones with the reason.
        Imports nothing heavy: only declarations and probes run."""
        table = self.kind_table()
        out: list[DeviceInfo] = []
        avail = {kind: self.availability(e) for kind, e in table.items()}  # probes first: they may set priorities
        for kind, e in sorted(table.items(), key=lambda kv: (-kv[1].priority, kv[0])):
            a = avail[kind]
            pairs = tuple(self.pair_names(DeviceSpec(kind)))
            base = {"kind": kind, "plugin": e.plugin.name, "distribution": e.plugin.distribution,
                    "version": e.plugin.version, "pair_names": pairs, "priority": e.priority,
                    "description": e.decl.description, "example": bool(getattr(e.decl, "example", False))}
            if a.ok:
                for i in range(e.count or 0):
                    out.append(DeviceInfo(spec=str(DeviceSpec(kind, i)), available=True, **base))
            else:
                out.append(DeviceInfo(spec=kind, available=False, reason=a.reason, **base))
        for kind, (rec, why) in sorted(self._failed_kinds().items()):
            if kind not in table:
                out.append(DeviceInfo(kind, kind, rec.name, rec.distribution, rec.version, False, why))
        return out

    def _failed_kinds(self) -> dict[str, tuple[PluginRecord, str]]:
        return failed_kinds(list(self.plugin_set.records.values()))

    def _not_found(self, spec: DeviceSpec) -> DeviceKitError:
        failed = self._failed_kinds()
        if spec.kind in failed:
            return DeviceUnavailableError(f"device {spec} is not available: {failed[spec.kind][1]}")
        table = self.kind_table()
        avail, unavail, avail_kinds = [], [], set()
        for kind, e in sorted(table.items()):
            a = self.availability(e)
            if a.ok:
                avail.append(id_summary(kind, e.count or 0))
                avail_kinds.add(kind)
            else:
                unavail.append(kind)
        unavail += [k for k in sorted(failed) if k not in table]
        known = {k: (k in avail_kinds, e.decl.description or "") for k, e in table.items()}
        known.update({k: (False, "") for k in failed if k not in known})
        name = str(spec) if len(str(spec)) <= 80 else f"{str(spec)[:60]}... ({len(str(spec))} characters)"
        msg = f"no device {name!r}.{kind_hint(spec.kind, known)} Available: {', '.join(avail) or 'none'}."
        if unavail:  # the reasons are long and the same in every such error: `devicekit info` has them once
            msg += f" Unavailable here: {', '.join(unavail)} (`devicekit info` says why)."
        other = [str(f) for f in self.failures() if f.phase in DISCOVERY_PHASES]
        if other:
            msg += f" Failed plugins: {'; '.join(other)}."
        return DeviceNotFoundError(msg)

    # ------------------------------------------------------------------ building
    def _entry(self, spec: DeviceSpec) -> KindEntry:
        entry = self.kind_table().get(spec.kind)
        if entry is None:
            raise self._not_found(spec)
        if entry.error:
            raise ResolutionError(entry.error)
        return entry

    def _ready_entry(self, spec: DeviceSpec) -> KindEntry:
        """The entry of `spec` when that device exists and is available here (nothing is built), else the error."""
        entry = self._entry(spec)
        a = self.confirmed(entry)
        if not a.ok:
            raise DeviceUnavailableError(f"device {spec} is not available: {short_reason(a.reason)} "
                                         f"(plugin {who(entry.plugin)}; the full reason: `devicekit info`)")
        if spec.index >= (entry.count or 0):
            raise DeviceNotFoundError(f"no device {str(spec)!r}: {spec.kind} has {entry.count} device(s): "
                                      f"{id_summary(spec.kind, entry.count or 0)}")
        return entry

    def _answers(self, spec: DeviceSpec):
        return lambda hook: self.call(hook, spec=spec)

    def _owner(self, spec: DeviceSpec) -> PluginRecord | None:
        entry = self.kind_table().get(spec.kind)
        return entry.plugin if entry is not None else None

    def target(self, spec: DeviceSpec | str) -> Target:
        """The Target of a kind: its compiler pairs, even where the kind cannot run."""
        spec = DeviceSpec.parse(spec)
        self._ensure_loaded()
        with self._lock:
            if (t := self._targets.get(spec)) is not None:
                return t
            table = self.kind_table()
            if spec.kind in table and table[spec.kind].error:
                raise ResolutionError(table[spec.kind].error)
            try:
                t = build_target(spec, self._answers(spec), self._owner(spec))
            except DeviceUnavailableError:
                if spec.kind not in table:
                    raise self._not_found(spec) from None
                raise
            self._targets[spec] = t
            return t

    def device(self, spec: DeviceSpec | str | None = None) -> Device:
        """The Device for `spec` (default: DEVICEKIT_DEVICE, else the available kind of highest priority), created
        once per canonical spec. An error about a device DEVICEKIT_DEVICE chose names the variable."""
        if spec is None:
            spec = self.default_spec()
            if settings.source("DEVICEKIT_DEVICE") == "environment":
                try:
                    return self._device(spec)
                except DeviceKitError as e:
                    raise _naming_env(e, spec) from e
        return self._device(DeviceSpec.parse(spec))

    def _device(self, spec: DeviceSpec) -> Device:
        if (d := self._devices.get(spec)) is not None:
            return d
        with self._lock:
            if (d := self._devices.get(spec)) is not None:
                return d
            entry = self._ready_entry(spec)
            d = build_device(spec, self._answers(spec), entry.plugin)
            dprint(1, f"created device {spec}: pairs {d.pair_names}, plugin {who(entry.plugin)}"
                   + (f"; fallback: {d.fallback_reason}" if d.fallback_reason else ""))
            self._devices[spec] = d
            return d

    def default_spec(self) -> DeviceSpec:
        """DEVICEKIT_DEVICE when set (parsed only: a bad name is a SettingError naming the variable), else the
        available kind of highest priority."""
        if (env := settings.get("DEVICEKIT_DEVICE")) is not None:
            return env
        table = self.kind_table()
        while True:  # the best by remembered answers, confirmed by a probe here, then chosen again
            ready = [(e.priority, k, e) for k, e in table.items() if not e.error and self.availability(e).ok]
            if not ready or not (best := table[default_kind(ready)]).remembered:
                break
            self.confirmed(best)
        if not ready:
            raise DeviceNotFoundError("no device is available. " + "; ".join(
                f"{d.spec}: {d.reason}" for d in self.devices() if not d.available) + " (see `devicekit info`)")
        return DeviceSpec(default_kind(ready))

    def default_device(self) -> tuple[DeviceSpec | None, str, str | None]:
        """(the default device, where it came from, the problem with it) without building anything: a
        DEVICEKIT_DEVICE that is malformed, unknown or unavailable here gives a problem naming the variable."""
        origin = "DEVICEKIT_DEVICE" if settings.source("DEVICEKIT_DEVICE") == "environment" else \
            "the available kind of highest priority"
        try:
            spec = self.default_spec()
        except SettingError as e:
            return None, origin, str(e)
        except DeviceKitError as e:
            return None, origin, str(e)
        if origin == "DEVICEKIT_DEVICE":
            try:
                self._ready_entry(spec)
            except DeviceKitError as e:
                return spec, origin, str(_naming_env(e, spec))
        return spec, origin, None

    def pair_override(self, spec: DeviceSpec | str) -> str | None:
        """One line when the compiler pair `spec` uses by default comes from a plugin other than the kind's owner
        (builds the Target), else None."""
        spec = DeviceSpec.parse(spec)
        owner = self._owner(spec)
        if owner is None:
            return None
        used = self.target(spec).pair_names[0]
        for rec, decl in self.ranked_pairs(spec):
            if decl.name == used:
                return override_note(spec, owner, rec, used)
        return None


def _naming_env(e: DeviceKitError, spec: DeviceSpec) -> DeviceKitError:
    """`e` again, its message saying the device came from DEVICEKIT_DEVICE (same exception type)."""
    msg = f"DEVICEKIT_DEVICE={str(spec)!r} names the default device, but: {e} (unset DEVICEKIT_DEVICE, or set it " \
          "to one of the available devices)"
    try:
        return type(e)(msg)
    except Exception:  # noqa: BLE001 - an exception type with another constructor
        return DeviceNotFoundError(msg)
