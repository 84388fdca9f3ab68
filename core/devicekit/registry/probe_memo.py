"""Probe answers remembered across processes, for kinds that allow it (`DeviceKind.memo`): OpenCL's probe imports
pyopencl and numpy and builds a kernel, CUDA's searches for libcuda with the C compiler; together they were most of
`devicekit.devices()`'s cost in a fresh process. A remembered answer is used only to list devices; the registry
probes a kind for real before building one of its devices, and `devicekit info` always probes (and refreshes this).

The key detects a changed environment: every environment variable (less a few that change per shell or test),
the interpreter, the boot (a new GPU needs one), the stat of the loader's cache, of OpenCL's and Vulkan's ICD
directories and each file in them, of /dev, /dev/dri and NVIDIA's driver file, of every site directory on sys.path
(an install or uninstall changes it), and the plugin's distribution, version and source files. Answers live in the compile cache
(same pinning and MAC as compiled bytes: a planted one never verifies); only a probe and count that returned
cleanly are kept. DEVICEKIT_PROBE_CACHE=0 turns this off.

Reads: DEVICEKIT_PROBE_CACHE (through devicekit.settings)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from typing import Any

from .. import settings
from ..debug import dprint
from ..plugin import Availability

__all__ = ["MEMO_RULE", "allowed", "forget", "key", "probed", "recall", "remember"]

MEMO_RULE = "probe-memo-1"
_VOLATILE = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "PYTEST_CURRENT_TEST", "COLUMNS", "LINES", "TERM", "PS1",
                       "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "WINDOWID", "TMUX_PANE", "HISTFILE",
                       "DEVICEKIT_DEBUG", "DEVICEKIT_TRACE_PLUGINS", "DEVICEKIT_PROBE_CACHE"})
_SYSTEM = ("/etc/ld.so.cache", "/etc/OpenCL/vendors", "/dev", "/dev/dri", "/proc/driver/nvidia/version",
           "/proc/sys/kernel/random/boot_id", "/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d")
_ICD_DIRS = ("/etc/OpenCL/vendors", "/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d")  # each file's stat too


def _stat(path: str) -> list:
    try:
        st = os.stat(path)
    except OSError:
        return [path, None]
    return [path, st.st_mtime_ns, st.st_size, st.st_ino]


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


# variables a probe in this process set or changed (PoCL's package sets OpenCL's when pyopencl is imported): name ->
# (value before, value the probe left). While a variable still holds what a probe left, the key uses the value
# before, so a process that probed and one that remembered compute the same keys; a change by the user still counts.
_PROBE_ENV: dict[str, tuple[str | None, str | None]] = {}


def probed(before: dict[str, str]) -> None:
    """Note what a probe changed in the environment (`before`: a copy of os.environ taken before it ran)."""
    now = dict(os.environ)
    for name in set(before) | set(now):
        if before.get(name) != now.get(name):
            _PROBE_ENV.setdefault(name, (before.get(name), now.get(name)))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name, (was, left) in _PROBE_ENV.items():
        if env.get(name) == left:
            if was is None:
                env.pop(name, None)
            else:
                env[name] = was
    return env


def _machine() -> str:
    """What every kind's answer depends on (the environment is read each time: tests and notebooks change it)."""
    return _machine_for(frozenset(_env().items()))


@functools.lru_cache(maxsize=4)
def _machine_for(env: frozenset) -> str:
    parts: list[Any] = [MEMO_RULE, sys.executable, sys.version, _boot_id()]
    parts.append(sorted((k, v) for k, v in env if k not in _VOLATILE))
    parts += [_stat(p) for p in _SYSTEM]
    for d in _ICD_DIRS:
        try:
            parts += [_stat(e.path) for e in sorted(os.scandir(d), key=lambda e: e.name)]
        except OSError:
            pass
    cwd = os.getcwd()
    parts += [_stat(p) for p in sys.path if p and p != cwd and os.path.isdir(p)]
    return hashlib.sha256(json.dumps(parts, default=repr).encode("utf-8", "surrogateescape")).hexdigest()


def _plugin_files(decl: Any) -> list:
    """Stats of the source files of the package holding the kind's probe (an edit there is a new answer)."""
    mod = sys.modules.get(getattr(decl.probe, "__module__", "") or "")
    where = os.path.dirname(getattr(mod, "__file__", "") or "")
    if not where:
        return []
    try:
        return [_stat(e.path) for e in sorted(os.scandir(where), key=lambda e: e.name) if e.name.endswith(".py")]
    except OSError:
        return []


def _key(entry: Any):
    from ..compile.cache import CacheKey
    rec = entry.plugin
    text = json.dumps([_machine(), entry.decl.name, rec.name, rec.value, rec.distribution, rec.version,
                       _plugin_files(entry.decl)], default=repr)
    return CacheKey("probe", MEMO_RULE, hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest())


def allowed(entry: Any) -> bool:
    """The kind allows it, comes from an installed distribution (not a plugin registered in process) and the user
    did not turn it off."""
    return (getattr(entry.decl, "memo", False) is True and entry.plugin.distribution is not None
            and settings.get("DEVICEKIT_PROBE_CACHE") and settings.get("DEVICEKIT_CACHE"))


_cache: Any = None


def _store():
    """A CompileCache of its own over the compile cache's directory (same pinning, key and MAC), so its hits and
    misses are not counted as the compile cache's; rebuilt when DEVICEKIT_CACHE_DIR or DEVICEKIT_CACHE change."""
    global _cache
    from ..compile.cache import CompileCache, default_cache_dir
    root, disk = os.path.abspath(default_cache_dir()), settings.get("DEVICEKIT_CACHE")
    if _cache is None or str(_cache.root) != root or _cache._disk_wanted != disk:
        _cache = CompileCache(root, disk=disk, memory_max_bytes=1 << 20)
    return _cache


def recall(entry: Any, at: Any = None) -> tuple[Availability, int | None] | None:
    """The remembered (availability, count) of `entry`'s kind under today's key (or `at`), or None (also for
    anything malformed: a miss, probed again)."""
    try:
        raw = _store().get(_key(entry) if at is None else at)
    except Exception:  # noqa: BLE001 - an unusable cache is a miss; the compile cache reports its own problems
        return None
    if raw is None:
        return None
    try:
        d = json.loads(raw)
        ok, reason, prio, count = d["ok"], d["reason"], d["priority"], d["count"]
        if type(ok) is not bool or type(reason) is not str or not (prio is None or type(prio) is int):
            return None
        if ok and not (type(count) is int and count > 0) or not ok and count is not None:
            return None
        return Availability(ok, reason, prio), count
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


def key(entry: Any) -> Any:
    """The key of `entry`'s answer now: taken before probing, since a probe may change the environment (PoCL's
    package sets OpenCL's variables when imported)."""
    return _key(entry)


def remember(entry: Any, a: Availability, count: int | None, at: Any = None) -> None:
    """Keep a clean answer (the caller checked no failure was recorded) under `at` (a `key` taken before the
    probe), else the key now."""
    try:
        _store().put(_key(entry) if at is None else at, json.dumps({"ok": bool(a.ok), "reason": str(a.reason), "priority": a.priority,
                                              "count": count}).encode(), replace=True)
    except Exception as e:  # noqa: BLE001 - remembering is an optimization: a full disk must not fail listing
        dprint(1, f"probe answer of {entry.decl.name} not remembered: {type(e).__name__}: {e}")


def forget() -> None:
    """Recompute the machine's fingerprint on next use (a driver installed while this process runs)."""
    _machine_for.cache_clear()
