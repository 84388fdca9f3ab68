"""`device_for("CPU/c")`: a device that compiles with one named pair of its kind, for tests that check every pair."""

from __future__ import annotations

from typing import Any


def device_for(label: str) -> Any:
    """The device of `label`: "KIND" as dk.device gives it, "KIND/pair" with that compiler pair only."""
    import devicekit as dk
    from devicekit.targets import Device
    kind, _, pair = label.partition("/")
    dev = dk.device(kind)
    if not pair:
        return dev
    r, c = dev.pair(pair)
    return Device(dev.spec, dev.allocator, r, c, dev.runtime)
