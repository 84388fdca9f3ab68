"""`devicekit info`: everything the registry knows, as a report (a dict, `--json` prints it) and as text. Building
the report builds each kind's Target to show pair fallbacks, so it may import toolchains (`devicekit devices` never
does). Reads every DEVICEKIT_* variable, to show them."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..errors import DeviceKitError, PluginError, ResolutionError
from ..plugin import API_VERSION
from ..registry import Registry, get_registry
from ..spec import DeviceSpec
from . import EXIT_FAILED, EXIT_OK, _print_json
from . import _fmt_bytes as fmt_bytes

__all__ = ["cmd_info", "report", "text_report"]


def report(reg: Registry, build: bool = True) -> dict:
    """Everything `devicekit info` shows. With `build`, targets are built to report pair fallbacks (this may
    import toolchains such as llvmlite)."""
    from ..compile.cache import cache_info

    kinds = {}
    for kind, e in sorted(reg.kind_table().items()):
        a = reg.availability(e)
        spec = DeviceSpec(kind)
        k: dict[str, Any] = {"plugin": e.plugin.name, "distribution": e.plugin.distribution,
                             "version": e.plugin.version, "priority": e.decl.priority,
                             "description": e.decl.description, "available": a.ok, "reason": a.reason,
                             "ids": [str(DeviceSpec(kind, i)) for i in range(e.count or 0)] if a.ok else [],
                             "shadowed": e.shadowed, "error": e.error}
        try:
            k["pairs"] = [{"name": d.name, "plugin": r.name, "priority": d.priority} for r, d in reg.ranked_pairs(spec)]
        except ResolutionError as err:
            k["pairs"], k["error"] = [], str(err)
        if build and not k["error"]:
            try:
                t = reg.target(spec)
                k["pairs_built"], k["fallback"] = t.pair_names, t.fallback_reason
            except Exception as err:  # noqa: BLE001 - the diagnostic reports, it does not fail
                k["pairs_built"], k["fallback"] = [], f"{type(err).__name__}: {err}"
        kinds[kind] = k
    try:
        default, default_error = str(reg.default_spec()), None
    except DeviceKitError as err:
        default, default_error = None, str(err)
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
        "default_device": default, "default_device_error": default_error,
        "cache": cache,
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("DEVICEKIT_")},
        "strict": reg.strict,
    }


def text_report(rep: dict) -> str:
    out: list[str] = []
    core = rep["devicekit"]
    out.append(f"devicekit {core['version'] or '(not installed)'}  API {core['api'][0]}.{core['api'][1]}  "
               f"Python {core['python']}")
    out.append(f"default device: {rep['default_device'] or 'none'}"
               + (f"  ({rep['default_device_error']})" if rep["default_device_error"] else ""))
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
        state = f"available: {', '.join(k['ids'])}" if k["available"] else f"unavailable: {k['reason']}"
        out.append(f"  {kind:<8} priority {k['priority']:<4} plugin {k['plugin']}  {state}")
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
    orphans = [d for d in rep["devices"] if d["kind"] not in rep["kinds"]]
    for d in orphans:
        out.append(f"  {d['kind']:<8} unavailable: {d['reason']}")
    out.append("")
    c = rep["cache"]
    out.append(f"compile cache: {c.get('dir', '?')}  [{c.get('state')}]")
    if "entries" in c:
        out.append(f"  {c['entries']} entries, {fmt_bytes(c['bytes'])} of {fmt_bytes(c['max_bytes'])}")
    if rep["env"]:
        out.append("")
        out.append("environment:")
        for k, v in rep["env"].items():
            out.append(f"  {k}={v}")
    return "\n".join(out)


def cmd_info(args: argparse.Namespace) -> int:
    reg = get_registry()
    try:
        rep = report(reg)
    except PluginError as e:  # only under DEVICEKIT_STRICT_PLUGINS=1
        print(f"devicekit: {e}", file=sys.stderr)
        return EXIT_FAILED
    _print_json(rep) if args.json else print(text_report(rep))
    if reg.strict and any(p["failures"] for p in rep["plugins"]):
        return EXIT_FAILED
    return EXIT_OK
