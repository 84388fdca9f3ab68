"""The hooks a devicekit plugin implements. Mark implementations with `@devicekit.hookimpl`.

Every hook returns cheap declarations (see devicekit.plugin); heavy imports belong inside the factories.
No hook is `firstresult`: the registry collects every plugin's answer and resolves by explicit priority.
A hook returning the wrong type is recorded as that plugin's failure and its answer ignored: the type is each
spec's return annotation (a `list[...]` hook answers a list, an `X | None` hook one X or None).

Most plugins implement none of these by hand: a `DEVICEKIT_BACKEND = devicekit.backend.Backend(...)` record in the
plugin module generates all four; a plugin writes a hook only for what the record cannot say.
"""

from __future__ import annotations

import pluggy

# imported for real (both are declarations only): registry/calls.py reads each hook's answer type from these
# annotations, so a hook's contract is stated once, here
from .plugin import AllocatorFactory, CompilerPairFactory, DeviceKind, RuntimeFactoryDecl
from .spec import DeviceSpec

PROJECT_NAME = "devicekit"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def devicekit_device_kinds() -> list[DeviceKind]:
    """Declare the device kinds this plugin owns.

    Return a list of :class:`devicekit.plugin.DeviceKind` (possibly empty). Called once per registry, at discovery;
    it must not import drivers or toolchains (put that in ``probe``/``count`` or in the factories). Two plugins
    declaring the same kind: the higher ``priority`` owns it; equal priorities are an error naming both plugins.
    """


@hookspec
def devicekit_allocator(spec: DeviceSpec) -> AllocatorFactory | None:
    """Offer the allocator for device ``spec``.

    Return an :class:`devicekit.plugin.AllocatorFactory` or ``None`` (not mine). The owner of the kind answers;
    another plugin may override it with a higher priority. The highest priority wins; a tie at the top is an error.
    """


@hookspec
def devicekit_compiler_pairs(spec: DeviceSpec) -> list[CompilerPairFactory]:
    """Offer (renderer, compiler) pairs for device ``spec``; any plugin may add pairs to any kind.

    Return a list of :class:`devicekit.plugin.CompilerPairFactory` (empty: none for this kind). All answers are
    merged and ordered by priority, best first; a pair whose factory raises is skipped and the reason kept
    (``Target.fallback_reason``). A tie at the top between two plugins is an error naming both.
    """


@hookspec
def devicekit_runtime_factory(spec: DeviceSpec) -> RuntimeFactoryDecl | None:
    """Offer the runtime for device ``spec``.

    Return a :class:`devicekit.plugin.RuntimeFactoryDecl` or ``None``. Its ``factory(spec)`` returns a callable
    CompiledSpec -> Program. The highest priority wins; a tie at the top is an error.
    """
