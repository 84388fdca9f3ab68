"""`devicekit info`: everything the registry knows, as a report (a dict, `--json` prints it) and as text. Building
the report builds each kind's Target to show pair fallbacks, so it may import toolchains (`devicekit devices` never
does). Shows every declared setting (devicekit.settings: the core's and the loaded plugins' variables) with its value
and source, and flags DEVICEKIT_* variables nothing declared. A bad setting never stops the report: it is shown as
an error and its default used. `--isolate` first runs each plugin in a process of its own (cli/isolate.py) and
leaves the ones that hang or end their process out of the in-process report."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .. import settings
from ..errors import PluginError, ResolutionError, SettingError
from ..plugin import API_VERSION
from ..registry import Registry, get_registry
from ..registry.probing import user_probe_timeout
from ..registry.records import id_summary
from ..spec import DeviceSpec
from . import EXIT_FAILED, EXIT_OK, _print_json
from . import _fmt_bytes as fmt_bytes

__all__ = ["cmd_info", "registry_for_report", "report", "text_report"]


def registry_for_report(extra_disabled: set[str] | None = None) -> Registry:
    """The process-wide registry, or, when a core setting is bad (or plugins are to be left out), one built with
    the defaults in place of bad values: the diagnostic must run in the environment it diagnoses."""
    if not extra_disabled:
        try:
            return get_registry()
        except SettingError:
            pass
    g = settings.get_or_default
    return Registry(strict=g("DEVICEKIT_STRICT_PLUGINS"), disabled=set(g("DEVICEKIT_DISABLE_PLUGINS")) |
                    (extra_disabled or set()), trace=g("DEVICEKIT_TRACE_PLUGINS"),
                    probe_timeout_s=user_probe_timeout(lenient=True))


def report(reg: Registry, build: bool = True) -> dict:
    """Everything `devicekit info` shows. With `build`, targets are built to report pair fallbacks (this may
    import toolchains such as llvmlite)."""
    from ..compile.cache import cache_info

    kinds = {}
    reg.probe_all()  # what a probe says now, never a remembered answer (probe_memo); this also refreshes them
    for kind, e in sorted(reg.kind_table().items()):
        a = reg.availability(e)
        spec = DeviceSpec(kind)
        k: dict[str, Any] = {"plugin": e.plugin.name, "distribution": e.plugin.distribution,
                             "version": e.plugin.version, "priority": e.priority,
                             "description": e.decl.description, "available": a.ok, "reason": a.reason,
                             "example": bool(getattr(e.decl, "example", False)),
                             "ids": [str(DeviceSpec(kind, i)) for i in range(e.count or 0)] if a.ok else [],
                             "shadowed": e.shadowed, "error": e.error, "override": None}
        k["id_details"] = _id_details(e.decl, k["ids"])
        try:
            k["pairs"] = [{"name": d.name, "plugin": r.name, "priority": d.priority} for r, d in reg.ranked_pairs(spec)]
        except ResolutionError as err:
            k["pairs"], k["error"] = [], str(err)
        if build and not k["error"]:
            try:
                t = reg.target(spec)
                k["pairs_built"], k["fallback"] = t.pair_names, t.fallback_reason
                k["override"] = reg.pair_override(spec)
            except Exception as err:  # noqa: BLE001 - the diagnostic reports, it does not fail
                k["pairs_built"], k["fallback"] = [], f"{type(err).__name__}: {err}"
        kinds[kind] = k
    default, origin, default_error = reg.default_device()
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
        "plugins": [r.to_dict() for r in reg.plugins()],
        "kinds": kinds,
        "devices": [d.to_dict() for d in reg.devices()],
        "default_device": str(default) if default is not None else None, "default_device_origin": origin,
        "default_device_error": default_error,
        "cache": cache,
        "settings": settings.describe(),
        "unknown_settings": [{"name": k, "did_you_mean": m} for k, m in settings.unknown()],
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("DEVICEKIT_")},
        "strict": reg.strict,
    }


def _id_details(decl: Any, ids: list[str]) -> dict[str, str]:
    """`DeviceKind.describe_id` for each listed id; a describe that raises says so instead of failing the report."""
    describe = getattr(decl, "describe_id", None)
    if describe is None:
        return {}
    out = {}
    for i, name in enumerate(ids):
        try:
            out[name] = str(describe(i))
        except Exception as err:  # noqa: BLE001 - the diagnostic reports, it does not fail
            out[name] = f"describe_id raised {type(err).__name__}: {err}"
    return out


def text_report(rep: dict) -> str:
    out: list[str] = []
    core = rep["devicekit"]
    out.append(f"devicekit {core['version'] or '(not installed)'}  API {core['api'][0]}.{core['api'][1]}  "
               f"Python {core['python']}")
    origin = rep.get("default_device_origin")
    if rep["default_device"] is None:
        out.append(f"default device: none  ({rep['default_device_error']})")
    else:
        out.append(f"default device: {rep['default_device']}" + (f"  (from {origin})" if origin else ""))
        if rep["default_device_error"]:
            out.append(f"  WARNING: {rep['default_device_error']}")
    if rep.get("isolated"):
        out.append("")
        from .isolate import text_lines
        out.extend(text_lines(rep["isolated"]["plugins"], rep["isolated"]["timeout"]))
        if left := rep["isolated"]["left_out"]:
            out.append(f"  left out of the report below (they would hang or end this process): {', '.join(left)}")
    out.append("")
    out.append("plugins:")
    kinds_by_plugin: dict[str, list[str]] = {}
    for kind, k in rep["kinds"].items():
        kinds_by_plugin.setdefault(k["plugin"], []).append(kind)
    for p in rep["plugins"]:
        dist = f"{p['distribution']} {p['version'] or ''}".strip() if p["distribution"] else "in-process"
        kinds = ", ".join(kinds_by_plugin.get(p["name"], [])) or "-"
        out.append(f"  {p['name']:<12} {p['status']:<8} {dist:<28} kinds: {kinds}")
        for note in p["notes"]:
            out.append(f"      note: {note}")
        for f in p["failures"]:
            out.append(f"      FAILED at {f['phase']}: {f['exception']}: {f['message']}")
    out.append("")
    out.append("device kinds:")
    for kind, k in rep["kinds"].items():
        ids = id_summary(kind, len(k["ids"]))
        state = f"available: {ids}" if k["available"] else f"unavailable: {k['reason']}"
        if k.get("example"):
            state += "  (an example device, not hardware)"
        out.append(f"  {kind:<8} priority {k['priority']:<4} plugin {k['plugin']}  {state}")
        for name, detail in k.get("id_details", {}).items():
            out.append(f"      {name}: {detail}")
        if k.get("error"):
            out.append(f"      ERROR: {k['error']}")
        for s in k["shadowed"]:
            out.append(f"      also declared by {s} (lower priority, not used)")
        for i, pair in enumerate(k["pairs"]):
            built = k.get("pairs_built")
            mark = "" if built is None or pair["name"] in built else "  (skipped)"
            out.append(f"      pair {i}: {pair['name']:<14} priority {pair['priority']:<4} plugin {pair['plugin']}{mark}")
        if k.get("fallback"):
            out.append(f"      fallback: {k['fallback']}")
        if k.get("override"):
            out.append(f"      override: {k['override']}")
    orphans = [d for d in rep["devices"] if d["kind"] not in rep["kinds"]]
    for d in orphans:
        out.append(f"  {d['kind']:<8} unavailable: {d['reason']}")
    out.append("")
    c = rep["cache"]
    out.append(f"compile cache: {c.get('dir', '?')}  [{c.get('state')}]")
    if "entries" in c:
        out.append(f"  {c['entries']} entries, {fmt_bytes(c['bytes'])} of {fmt_bytes(c['max_bytes'])}")
    out.append("")
    out.append("settings (value, then where it came from):")
    for row in rep["settings"]:
        owner = "" if row["owner"] == "devicekit" else f"; {row['owner']}"
        if row["error"]:
            out.append(f"  {row['name']:<26} ERROR: {row['error']}")
        elif row["source"] == "environment":
            out.append(f"  {row['name']:<26} {row['raw']}  (environment{owner})")
        else:
            out.append(f"  {row['name']:<26} {row['default']}  (default{owner})")
    for u in rep["unknown_settings"]:
        hint = f"; did you mean {u['did_you_mean']}?" if u["did_you_mean"] else ""
        out.append(f"  {u['name']:<26} WARNING: set, but nothing reads it (not a devicekit setting, nor one of a "
                   f"loaded plugin's){hint}")
    return "\n".join(out)


def cmd_info(args: argparse.Namespace) -> int:
    isolated, left_out = None, set()
    if getattr(args, "isolate", False):
        from .isolate import FATAL, check_plugins
        rows = check_plugins(timeout=args.timeout)
        left_out = {r["name"] for r in rows if r["outcome"] in FATAL}
        isolated = {"timeout": args.timeout, "plugins": rows, "left_out": sorted(left_out)}
    reg = registry_for_report(left_out)
    try:
        rep = report(reg)
    except PluginError as e:  # only under DEVICEKIT_STRICT_PLUGINS=1
        print(f"devicekit: {e}", file=sys.stderr)
        return EXIT_FAILED
    rep["isolated"] = isolated
    if left_out:  # say why they are out: not the user's DEVICEKIT_DISABLE_PLUGINS, but what --isolate found
        outcome = {r["name"]: r["outcome"] for r in isolated["plugins"]}
        for p in rep["plugins"]:
            if p["name"] in left_out:
                p["notes"] = [f"left out: it {outcome[p['name']]} under --isolate (see above)"]
        for d in rep["devices"]:
            if d["plugin"] in left_out and not d["available"]:
                d["reason"] = f"its plugin {d['plugin']!r} {outcome[d['plugin']]} under --isolate; left out"
    _print_json(rep) if args.json else print(text_report(rep))
    if left_out:
        return EXIT_FAILED  # a plugin that hangs or ends its process takes every program using devicekit with it
    if reg.strict and any(p["failures"] for p in rep["plugins"]):
        return EXIT_FAILED
    return EXIT_OK
