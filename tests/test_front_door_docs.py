"""The front door says what it does where a user looks (help(dk.device)): every dk.* entry of the registry has a
docstring naming what it returns and the errors a user will meet."""

from __future__ import annotations

import devicekit as dk
import pytest


@pytest.mark.parametrize("name, words", [
    ("device", ["DeviceNotFoundError", "DeviceUnavailableError", "DEVICEKIT_DEVICE", "target"]),
    ("target", ["without a driver", "fallback_reason", "DeviceNotFoundError"]),
    ("devices", ["available"]),
    ("register_plugin", ["DEVICEKIT_BACKEND", "PluginError", "unregister_plugin"]),
    ("unregister_plugin", ["KeyError"]),
    ("run", ["writable param"]),
])
def test_the_front_door_has_docstrings(name, words):
    doc = getattr(dk, name).__doc__ or ""
    missing = [w for w in words if w not in doc]
    assert not missing, f"dk.{name}'s docstring does not say {missing}"
