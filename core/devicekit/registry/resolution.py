"""Choosing among the plugins' answers by explicit priority, never by registration order: `ranked` (best first;
equal priorities at the top from two different plugins are a ResolutionError naming both), the kind table (which
plugin owns each kind, which declarations it shadows) and the default kind (the available kind of highest priority;
a tie at the top is an error asking for DEVICEKIT_DEVICE)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ResolutionError
from ..plugin import Availability, DeviceKind
from ..spec import DeviceSpec
from .records import PluginFailure, PluginRecord, who

__all__ = ["KindEntry", "default_kind", "kind_table", "ranked"]


@dataclass
class KindEntry:
    """The owner of one kind: its declaration and plugin, the declarations it shadows, a tie error, and (filled by
    the registry on first use) its availability and device count."""

    decl: DeviceKind
    plugin: PluginRecord
    shadowed: list[str] = field(default_factory=list)
    error: str | None = None  # a tie at the top between two plugins
    availability: Availability | None = None
    count: int | None = None
    remembered: bool = False  # availability and count came from probe_memo, not from a probe in this process
    # time.monotonic() from which the answer is probed again when asked (a clean "unavailable" of a kind that
    # declares DeviceKind.recheck_after); None: the answer stands for the registry's life
    recheck_at: float | None = None

    def answered(self, now: float, clean: bool) -> None:
        """Note when the answer just stored is to be probed again: `recheck_after` seconds from `now` for a clean
        "unavailable" of a kind that declares it, else never."""
        after = getattr(self.decl, "recheck_after", None)
        a = self.availability
        self.recheck_at = now + after if after is not None and clean and a is not None and not a.ok else None

    def due(self, now: float) -> bool:
        """Whether the stored "unavailable" answer is old enough to be probed again."""
        return self.recheck_at is not None and now >= self.recheck_at

    @property
    def priority(self) -> int:
        """The kind's priority for the default device: the probe's answer when it gave one (the probe has run),
        else the declared one."""
        a = self.availability
        return a.priority if a is not None and a.priority is not None else self.decl.priority


def ranked(answers: list[tuple[PluginRecord, Any]], what: str) -> list[tuple[PluginRecord, Any]]:
    """Answers best first by priority; equal priorities from different plugins at the top are an error.
    Within one plugin, its own order breaks ties."""
    order = sorted(range(len(answers)), key=lambda i: (-answers[i][1].priority, answers[i][0].name, i))
    out = [answers[i] for i in order]
    if len(out) >= 2:
        (ra, a), (rb, b) = out[0], out[1]
        if a.priority == b.priority and ra is not rb:
            names = [f"{getattr(x, 'name', '')!r} " if getattr(x, "name", None) else "" for x in (a, b)]
            raise ResolutionError(
                f"{what}: plugins {who(ra)} ({names[0]}priority {a.priority}) and {who(rb)} "
                f"({names[1]}priority {b.priority}) tie at the top; devicekit does not pick by registration "
                "order. Give one a higher priority, or disable one with DEVICEKIT_DISABLE_PLUGINS.")
    return out


def kind_table(answers: list[tuple[PluginRecord, DeviceKind]],
               fail: Callable[[PluginRecord, str, BaseException], PluginFailure]) -> dict[str, KindEntry]:
    """Kind -> its owner, from every plugin's devicekit_device_kinds answers. A kind name that is not an identifier
    is that plugin's failure; a tie at the top is kept as the entry's `error` (the kind is listed, unavailable)."""
    by_kind: dict[str, list[tuple[PluginRecord, DeviceKind]]] = {}
    for rec, decl in answers:
        try:
            kind = DeviceSpec(decl.name).kind
        except (TypeError, ValueError) as e:
            fail(rec, "hook devicekit_device_kinds", e)
            continue
        by_kind.setdefault(kind, []).append((rec, decl))
    table: dict[str, KindEntry] = {}
    for kind, kind_answers in by_kind.items():
        try:
            best = ranked(kind_answers, f"device kind {kind}")
            error = None
        except ResolutionError as e:
            best = sorted(kind_answers, key=lambda a: -a[1].priority)
            error = str(e)
        rec, decl = best[0]
        table[kind] = KindEntry(decl, rec, [f"{who(r)} priority {d.priority}" for r, d in best[1:]], error)
    return table


def default_kind(ready: list[tuple[int, str, KindEntry]]) -> str:
    """The kind of highest priority among `ready` (priority, kind, entry) rows of available kinds (not empty)."""
    ready = sorted(ready, key=lambda r: (-r[0], r[1]))
    if len(ready) >= 2 and ready[0][0] == ready[1][0]:
        (p, ka, ea), (_, kb, eb) = ready[0], ready[1]
        raise ResolutionError(f"default device: kinds {ka} (plugin {who(ea.plugin)}) and {kb} (plugin "
                              f"{who(eb.plugin)}) both have priority {p}; set DEVICEKIT_DEVICE to choose")
    return ready[0][1]
