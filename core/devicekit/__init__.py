"""devicekit: a plugin-based device framework for kernel compilers.

    import devicekit as dk
    dev = dk.device("CPU")                  # dk.device() is the default device
    outs = dk.run(kernel, device="CPU", x=x, out=np.empty(n, np.float32), n=n)

Importing devicekit is light: submodules (and every backend's toolchain) load on first use. This module is the top
of the package: the lazy `dk.*` surface over `devicekit.api` (user conveniences), the registry and the contracts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .plugin import API_VERSION

_LAZY: dict[str, tuple[str, str | None]] = {
    # name -> (module, attribute); attribute None: the module itself
    "device": ("devicekit.api", "device"),
    "target": ("devicekit.api", "target"),
    "devices": ("devicekit.api", "devices"),
    "run": ("devicekit.api", "run"),
    "register_plugin": ("devicekit.api", "register_plugin"),
    "unregister_plugin": ("devicekit.api", "unregister_plugin"),
    "DeviceInfo": ("devicekit.registry", "DeviceInfo"),
    "Program": ("devicekit.runtime", "Program"),
    "Plan": ("devicekit.plan", "Plan"),
    "search": ("devicekit.tile_search", "search"),
    "Buffer": ("devicekit.memory", "Buffer"),
    "BufferOptions": ("devicekit.memory", "BufferOptions"),
    "from_numpy": ("devicekit.memory", "from_numpy"),
    "from_dlpack": ("devicekit.memory", "from_dlpack"),
    "Allocator": ("devicekit.memory", "Allocator"),
    "Device": ("devicekit.targets", "Device"),
    "Target": ("devicekit.targets", "Target"),
    "DeviceSpec": ("devicekit.spec", "DeviceSpec"),
    "hookimpl": ("devicekit.hookspecs", "hookimpl"),
    "Compiler": ("devicekit.compile.compiler", "Compiler"),
    "CompiledSpec": ("devicekit.compile.compiler", "CompiledSpec"),
    "CompileError": ("devicekit.errors", "CompileError"),
    "DeviceKitError": ("devicekit.errors", "DeviceKitError"),
    "DeviceNotFoundError": ("devicekit.errors", "DeviceNotFoundError"),
    "DeviceUnavailableError": ("devicekit.errors", "DeviceUnavailableError"),
    "PluginError": ("devicekit.errors", "PluginError"),
    "SettingError": ("devicekit.errors", "SettingError"),
    "cache_info": ("devicekit.compile.cache", "cache_info"),
    "cache_clear": ("devicekit.compile.cache", "cache_clear"),
    "ir": ("devicekit.ir", None),
    "dtypes": ("devicekit.ir.dtypes", "dtypes"),
}

__all__ = [  # noqa: RUF022 - grouped as in the design
    "API_VERSION", "__version__",
    "device", "target", "devices", "run", "Buffer", "BufferOptions", "Device", "Target", "DeviceSpec", "DeviceInfo",
    "hookimpl", "ir", "dtypes", "Program", "Allocator", "Compiler", "CompiledSpec", "register_plugin",
    "unregister_plugin", "cache_info", "cache_clear", "CompileError", "DeviceKitError", "DeviceNotFoundError",
    "DeviceUnavailableError", "PluginError", "SettingError", "from_numpy", "from_dlpack", "Plan",
    "search",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from .version import installed_version
        return installed_version()
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'devicekit' has no attribute {name!r}") from None
    mod = importlib.import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from . import ir
    from .api import device, devices, register_plugin, run, target, unregister_plugin
    from .compile.cache import cache_clear, cache_info
    from .compile.compiler import CompiledSpec, Compiler
    from .errors import CompileError, DeviceKitError, DeviceNotFoundError, DeviceUnavailableError, PluginError
    from .hookspecs import hookimpl
    from .ir.dtypes import dtypes
    from .memory import Allocator, Buffer, BufferOptions
    from .registry import DeviceInfo
    from .runtime import Program
    from .spec import DeviceSpec
    from .targets import Device, Target
    from .tile_search import search
