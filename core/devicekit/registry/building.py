"""Building what the plugins declared for one device spec: its compiler pairs best first (a factory that raises, a
missing toolchain, is skipped and the reason kept), its allocator and runtime with the same fallback, and from them
a Target (compile side only) or a Device. Every skipped alternative ends up in `fallback_reason`. A factory that
raises anything but KeyboardInterrupt or SettingError (SystemExit included) is skipped; KeyboardInterrupt reaches the
user and nothing is cached, and a SettingError (a bad variable the factory reads) is raised too: a user's mistake
must not turn into a quiet fallback to another compiler. When the pair in use comes from a plugin other than the kind's owner, DEVICEKIT_DEBUG>=1 says so
(`override_note`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..debug import dprint
from ..errors import DeviceUnavailableError, SettingError
from ..spec import DeviceSpec
from ..targets import Device, Target
from .records import PluginRecord, who
from .resolution import ranked

__all__ = ["build_device", "build_one", "build_pairs", "build_target", "override_note"]

Answers = list[tuple[PluginRecord, Any]]


def override_note(spec: DeviceSpec, owner: PluginRecord | None, rec: PluginRecord, pair: str) -> str | None:
    """One line when the pair used for `spec` comes from a plugin other than the kind's owner (allowed: any plugin
    may add a better pair to any kind; shown so it is never silent), else None."""
    if owner is None or rec is owner or rec.name == owner.name:
        return None
    return (f"{spec.kind}'s default compiler pair {pair!r} comes from plugin {who(rec)}, not from {spec.kind}'s "
            f"owner {who(owner)}")


def build_pairs(spec: DeviceSpec, answers: Answers,
                owner: PluginRecord | None = None) -> tuple[list, list[str], list[str]]:
    """(pairs, their names, why better pairs were skipped) from the devicekit_compiler_pairs answers."""
    if not answers:
        raise DeviceUnavailableError(f"{spec}: no plugin offers a (renderer, compiler) pair for {spec.kind}")
    pairs, names, skipped = [], [], []
    for rec, decl in ranked(answers, f"compiler pairs for {spec}"):
        try:
            pairs.append((decl.renderer(spec), decl.compiler(spec)))
            names.append(decl.name)
            if len(pairs) == 1 and (note := override_note(spec, owner, rec, decl.name)):
                dprint(1, note)
        except (KeyboardInterrupt, SettingError):
            raise
        except BaseException as e:  # noqa: BLE001 - a missing toolchain: skip the pair, keep the reason
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
        except (KeyboardInterrupt, SettingError):
            raise
        except BaseException as e:  # noqa: BLE001
            skipped.append(f"{what} from plugin {rec.name!r} skipped: {type(e).__name__}: {e}")
            dprint(1, f"{spec}: {skipped[-1]}")
    raise DeviceUnavailableError(f"{spec}: no {what} could be built: {'; '.join(skipped)}")


def build_target(spec: DeviceSpec, answers: Callable[[str], Answers], owner: PluginRecord | None = None) -> Target:
    """The Target of `spec`; `answers(hook)` gives every plugin's answers to a hook for this spec; `owner` is the
    plugin that owns the kind (None: no plugin declares it)."""
    pairs, names, skipped = build_pairs(spec, answers("devicekit_compiler_pairs"), owner)
    return Target(spec, pairs, names, "; ".join(skipped) or None)


def build_device(spec: DeviceSpec, answers: Callable[[str], Answers], owner: PluginRecord | None = None) -> Device:
    """The Device of `spec`: pairs, then allocator, then runtime (each hook asked only when the one before built)."""
    pairs, names, skipped = build_pairs(spec, answers("devicekit_compiler_pairs"), owner)
    allocator, s1 = build_one(spec, answers("devicekit_allocator"), "an allocator")
    runtime, s2 = build_one(spec, answers("devicekit_runtime_factory"), "a runtime")
    return Device(spec, allocator, runtime=runtime, pairs=pairs, pair_names=names,
                  fallback_reason="; ".join(skipped + s1 + s2) or None)
