"""The accelerator columns of the benchmarks (OPENCL, WEBGPU): what each column ran on (the OpenCL device, the WebGPU
adapter: lavapipe is the host CPU through Mesa's Vulkan, not a GPU), or why there is no column:
"unavailable: <reason>" when the plugin is installed and the device does not run here, "not installed" without the
plugin. `devicekit bench` prints these lines under its table; bench/run.py puts them in its header."""

from __future__ import annotations

from typing import Any

__all__ = ["ACCELERATORS", "column_note", "notes"]

ACCELERATORS = {"OPENCL": "devicekit-opencl", "WEBGPU": "devicekit-webgpu"}  # kind -> the plugin that adds it


def _runs_on(kind: str, dev: Any) -> str:
    """The hardware (or software driver) under `dev`, in words."""
    ctx = getattr(dev.compiler, "ctx", None)
    if kind == "OPENCL" and ctx is not None:
        return ctx.device.name.strip()
    if kind == "WEBGPU" and ctx is not None:
        from devicekit_webgpu.adapters import describe, is_software
        return describe(ctx.adapter) + (" (a software adapter: the host CPU)" if is_software(ctx.adapter) else "")
    return dev.compiler.identity().split("|")[0]


def column_note(kind: str, infos: list[Any] | None = None) -> str:
    """`KIND: <what it runs on>`, `KIND: unavailable: <reason>` or `KIND: not installed (...)`. `infos`: the
    registry's rows (devicekit.devices()), fetched when not given."""
    from ..registry import devices
    from ..registry.records import short_reason
    infos = devices() if infos is None else infos
    row = next((d for d in infos if d.spec == kind), None)
    if row is None:
        return f"{kind}: not installed ({ACCELERATORS.get(kind, 'its plugin')} is not in this environment)"
    if not row.available:
        return f"{kind}: unavailable: {short_reason(row.reason)}"
    try:
        from ..registry import device
        return f"{kind}: {_runs_on(kind, device(kind))}"
    except Exception as e:  # noqa: BLE001 - a device that fails to open is a reason, not a crash of the bench
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"{kind}: unavailable: {why.removeprefix(f'device {kind} is not available: ')}"


def notes(infos: list[Any] | None = None) -> list[str]:
    """One column_note per accelerator kind, in a fixed order."""
    from ..registry import devices
    infos = devices() if infos is None else infos
    return [column_note(kind, infos) for kind in ACCELERATORS]
