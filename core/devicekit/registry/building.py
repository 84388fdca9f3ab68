"""Building what the plugins declared for one device spec: its compiler pairs best first (a factory that raises, a
missing toolchain, is skipped and the reason kept), its allocator and runtime with the same fallback, and from them
a Target (compile side only) or a Device. Every skipped alternative ends up in `fallback_reason`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..debug import dprint
from ..errors import DeviceUnavailableError
from ..spec import DeviceSpec
from ..targets import Device, Target
from .records import PluginRecord
from .resolution import ranked

__all__ = ["build_device", "build_one", "build_pairs", "build_target"]

Answers = list[tuple[PluginRecord, Any]]


def build_pairs(spec: DeviceSpec, answers: Answers) -> tuple[list, list[str], list[str]]:
    """(pairs, their names, why better pairs were skipped) from the devicekit_compiler_pairs answers."""
    if not answers:
        raise DeviceUnavailableError(f"{spec}: no plugin offers a (renderer, compiler) pair for {spec.kind}")
    pairs, names, skipped = [], [], []
    for rec, decl in ranked(answers, f"compiler pairs for {spec}"):
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


def build_one(spec: DeviceSpec, answers: Answers, what: str) -> tuple[Any, list[str]]:
    """(the best factory's product, why better ones were skipped) for an allocator or runtime."""
    if not answers:
        raise DeviceUnavailableError(f"{spec}: no plugin provides {what} for {spec.kind}")
    skipped: list[str] = []
    for rec, decl in ranked(answers, f"{what} for {spec}"):
        try:
            return decl.factory(spec), skipped
        except Exception as e:  # noqa: BLE001
            skipped.append(f"{what} from plugin {rec.name!r} skipped: {type(e).__name__}: {e}")
            dprint(1, f"{spec}: {skipped[-1]}")
    raise DeviceUnavailableError(f"{spec}: no {what} could be built: {'; '.join(skipped)}")


def build_target(spec: DeviceSpec, answers: Callable[[str], Answers]) -> Target:
    """The Target of `spec`; `answers(hook)` gives every plugin's answers to a hook for this spec."""
    pairs, names, skipped = build_pairs(spec, answers("devicekit_compiler_pairs"))
    return Target(spec, pairs, names, "; ".join(skipped) or None)


def build_device(spec: DeviceSpec, answers: Callable[[str], Answers]) -> Device:
    """The Device of `spec`: pairs, then allocator, then runtime (each hook asked only when the one before built)."""
    pairs, names, skipped = build_pairs(spec, answers("devicekit_compiler_pairs"))
    allocator, s1 = build_one(spec, answers("devicekit_allocator"), "an allocator")
    runtime, s2 = build_one(spec, answers("devicekit_runtime_factory"), "a runtime")
    return Device.from_pairs(spec, allocator, pairs, names, runtime, "; ".join(skipped + s1 + s2) or None)
