"""The installed distribution's version, in the base layer so any module (the reference compiler's identity
included) can name it without importing the package root, which is the api layer."""

from __future__ import annotations


def installed_version() -> str:
    """devicekit's version from its distribution metadata; "0+unknown" when running from a bare source tree."""
    try:
        from importlib_metadata import version
        return version("devicekit")
    except Exception:  # noqa: BLE001 - running from a source tree
        return "0+unknown"
