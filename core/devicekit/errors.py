"""The exceptions devicekit raises. All are picklable (they cross process pools and test workers)."""

from __future__ import annotations

import re

__all__ = [
    "CompileError", "DataRangeError", "DeviceKitError", "DeviceNotFoundError", "DeviceUnavailableError", "FreedBufferError", "LaunchError",
    "PluginError", "ReadOnlyBufferError", "RemoteDeviceLost", "ResolutionError", "SettingError",
]


class DeviceKitError(Exception):
    """Base class of devicekit's own errors."""


class PluginError(DeviceKitError):
    """A plugin failed (import, API version, hook). Raised only under DEVICEKIT_STRICT_PLUGINS=1; otherwise recorded."""


class ResolutionError(DeviceKitError):
    """Two plugins answered a hook with the same top priority: the registry refuses to pick by registration order."""


class SettingError(DeviceKitError, ValueError):
    """An environment variable has a value devicekit cannot use; the message names the variable, the value, what it
    accepts and the default (see devicekit.settings)."""


class DeviceNotFoundError(DeviceKitError, LookupError):
    """No plugin declares this device; the message lists the devices that exist and the plugins that failed."""


class DeviceUnavailableError(DeviceKitError, RuntimeError):
    """The kind is known but cannot run here (no driver, wrong OS, its plugin failed); the message says why."""


class LaunchError(DeviceKitError, ValueError):
    """A launch's sizes are not ones the device can run (not ints, a local size of 0, over a device limit); raised
    before anything is enqueued, naming the size and the limit (devicekit.launch_sizes)."""


class DataRangeError(LaunchError):
    """A launch's values or data fall outside what the device computes with (WEBGPU: index arithmetic or an int64 value
    outside int32, where WGSL has no 64-bit integers): a documented limit of the device, raised instead of returning
    results that are not valid."""


class RemoteDeviceLost(DeviceKitError, RuntimeError):
    """The remote runtime behind a device is gone (Ray shut down, the actor died): its Buffers and Programs cannot be
    used any more; `dk.device(...)` probes again and gives a new device when the runtime is back."""


class FreedBufferError(DeviceKitError, ValueError):
    """A Buffer was used after `Buffer.free()` (or its `with` block): its memory may belong to another Buffer now."""


class ReadOnlyBufferError(DeviceKitError, ValueError):
    """A read-only Buffer (over a read-only array or DLPack export) was given where something writes it."""


# "file:12:5: error", "kernel.cu(12): error", "line 12", "<stdin>:12: error"
_LINE_PATTERNS = (
    re.compile(r":(\d+):(?:\d+:)?\s*(?:fatal )?error", re.IGNORECASE),
    re.compile(r"\((\d+)\):\s*error", re.IGNORECASE),
    re.compile(r"\bline (\d+)\b", re.IGNORECASE),
    re.compile(r":(\d+):\d+:"),
)


def _error_lines(log: str) -> list[int]:
    found: list[int] = []
    for pat in _LINE_PATTERNS:
        for m in pat.finditer(log):
            n = int(m.group(1))
            if n not in found:
                found.append(n)
        if found:
            break
    return found


class CompileError(DeviceKitError):
    """A compiler rejected a source. `str()` shows the message, the compiler's log and the source lines it names."""

    def __init__(self, message: str, log: str = "", src: str = ""):
        super().__init__(message, log, src)
        self.message, self.log, self.src = message, log, src

    def __reduce__(self):
        return (type(self), (self.message, self.log, self.src))

    def source_excerpt(self, context: int = 1) -> str:
        """The source lines the log points at (1-based line numbers), with `context` lines around each."""
        if not self.src:
            return ""
        lines = self.src.splitlines()
        shown: list[str] = []
        for n in _error_lines(self.log)[:5]:
            if not 1 <= n <= len(lines):
                continue
            for i in range(max(1, n - context), min(len(lines), n + context) + 1):
                shown.append(f"{'>' if i == n else ' '}{i:5d} | {lines[i - 1]}")
            shown.append("")
        return "\n".join(shown).rstrip()

    def __str__(self) -> str:
        out = self.message
        if self.log:
            out += "\n--- compiler log ---\n" + self.log.rstrip()
        if excerpt := self.source_excerpt():
            out += "\n--- source ---\n" + excerpt
        return out
