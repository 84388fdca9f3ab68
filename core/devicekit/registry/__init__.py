"""The registry: finds plugins through the `devicekit` entry points, isolates their failures, resolves their answers
by explicit priority and builds devices lazily, once per canonical spec. One module per job, imports pointing one
way (each imports only those listed before it):

    tracing     DEVICEKIT_TRACE_PLUGINS output
    records     PluginRecord / PluginFailure / DeviceInfo and the FailureLog (warn, or raise in strict mode)
    probing     a kind's probe() and count(), bounded by DEVICEKIT_PROBE_TIMEOUT
    calls       one hook called on each plugin separately, answers type-checked
    loading     entry points (and in-process plugins) into the plugin manager; DEVICEKIT_DISABLE_PLUGINS
    resolution  priorities: ranking answers, the kind table, the default kind
    building    compiler pairs, allocator, runtime -> Target / Device, with fallbacks
    manager     the Registry object tying them together, with its caches and lock

This module holds the process-wide Registry and the functions over it (`device`, `target`, `devices`, ...), which
`devicekit.api` offers to users as `dk.device` and friends.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ..spec import DeviceSpec
from ..targets import Device, Target
from .loading import ENTRY_POINT_GROUP
from .manager import Registry
from .probing import DEFAULT_PROBE_TIMEOUT, ProbeTimeout, probe_timeout
from .records import DeviceInfo, PluginFailure, PluginRecord, PluginWarning

__all__ = ["DEFAULT_PROBE_TIMEOUT", "ENTRY_POINT_GROUP", "DeviceInfo", "PluginFailure", "PluginRecord",
           "PluginWarning", "ProbeTimeout", "Registry", "device", "devices", "get_registry", "probe_timeout",
           "register_plugin", "reset_registry", "target", "unregister_plugin"]

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


def device(spec: DeviceSpec | str | None = None) -> Device:
    """The Device for `spec` ("CPU", "CUDA:1", a DeviceSpec), ready to compile and allocate: built once per canonical
    spec (dk.device("CUDA") is dk.device("CUDA:0")) from the best compiler pairs, allocator and runtime the plugins
    declare. None: DEVICEKIT_DEVICE, else the available kind of highest priority.

    Raises DeviceNotFoundError (no plugin declares the kind, or no such id: the message lists what exists),
    DeviceUnavailableError (the kind's probe said no: the message says why, "no CUDA driver"), or ResolutionError
    (two plugins tied for the kind). Use `target` to render and compile for a kind that cannot run here."""
    d = get_registry().device(spec)
    if (gone := getattr(d.allocator, "gone", None)) is not None and gone():  # a remote runtime shut down (RAY)
        d = reset_registry().device(spec)  # probe again rather than hand out the dead device
    return d


def target(spec: DeviceSpec | str) -> Target:
    """The compile side of `spec` only (renderers and compilers, no allocator or runtime): what a kind needs to
    render and compile kernels on a machine where it cannot run (`dk.target("CUDA").compile(k)` without a driver).
    Its pairs fall back in priority order when one's factory raises (`fallback_reason` says why). Raises
    DeviceNotFoundError for an unknown kind."""
    return get_registry().target(spec)


def devices() -> list[DeviceInfo]:
    """Every known device id, available or with its reason: a list (a DeviceList, printed one line per device)."""
    from .records import DeviceList
    return DeviceList(get_registry().devices())


def register_plugin(obj: Any, name: str | None = None) -> PluginRecord:
    """Register an in-process plugin (a module or object with `@devicekit.hookimpl` functions and/or a
    `DEVICEKIT_BACKEND` record), as if installed with an entry point: for notebooks, tests and trying a plugin before
    packaging it. `name` defaults to the object's `__name__`. Unlike an entry point, a plugin that fails (bad
    DEVICEKIT_API, a misspelled hook, a malformed record, a name already registered) raises PluginError: the caller
    asked for it. Devices are rebuilt on next use; `unregister_plugin(name)` removes it."""
    return get_registry().register_plugin(obj, name)


def unregister_plugin(name: str) -> None:
    """Remove a plugin by name (registered in-process or from an entry point); KeyError when there is none. Devices
    already handed out keep working; new lookups no longer see its kinds or pairs."""
    get_registry().unregister_plugin(name)
