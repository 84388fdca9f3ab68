"""ACME's environment variables, declared once through devicekit.settings. The entry-point module imports this, so
`devicekit info` lists them as soon as the plugin loads; every module that reads one imports it too, so they are
declared whichever module loads first. A bad value is a SettingError naming the variable and what it accepts."""

from __future__ import annotations

from devicekit import settings
from devicekit.settings import get

__all__ = ["device_count", "get"]

OWNER = "devicekit-acme"

settings.register("ACME_DEVICE_COUNT", settings.int_in(0, 64), 2, "how many ACME devices to offer", OWNER)
settings.register("ACME_CC", settings.path, None, "the C compiler ACME uses", OWNER,
                  shown_default="$CC, clang, cc or gcc")


def device_count() -> int:
    """How many ACME ids there are (ACME, ACME:1, ...): the kind's `count`."""
    return get("ACME_DEVICE_COUNT")
