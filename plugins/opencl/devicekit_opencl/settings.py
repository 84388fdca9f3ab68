"""OPENCL's environment variables, declared once through devicekit.settings (`devicekit info` lists them)."""

from __future__ import annotations

from devicekit import settings
from devicekit.settings import get

__all__ = ["get"]

OWNER = "devicekit-opencl"
DEVICE_TYPES = ("all", "gpu", "cpu", "accelerator")


@settings.accepting("all, gpu, cpu, accelerator, or device indices within the platform such as 0 or 0,2")
def device_choice(raw: str) -> tuple[str, tuple[int, ...]]:
    text = raw.strip().lower()
    if text in DEVICE_TYPES:
        return text, ()
    parts = [x.strip() for x in text.split(",")]
    if not all(x.isascii() and x.isdigit() for x in parts):
        raise ValueError("not a device type or a list of indices")
    if any(len(x) > 4 for x in parts):  # devicekit lists at most 4096 ids per kind
        raise ValueError("an index out of range")
    idx = tuple(int(x) for x in parts)
    if not idx or len(set(idx)) != len(idx):
        raise ValueError("indices must be distinct and >= 0")
    return "index", idx


@settings.accepting("a platform index (0, 1, ...) or a part of its name of at most 256 characters")
def platform_choice(raw: str) -> str:
    """A platform index (ASCII digits) or a part of its name; kept as written (platform.py matches it)."""
    text = raw.strip()
    if text.isdigit() and not (text.isascii() and len(text) <= 4):
        raise ValueError("not a platform index")
    if len(text) > 256:
        raise ValueError("longer than any platform name")
    return raw


settings.register("DEVICEKIT_OPENCL_PLATFORM", platform_choice, None,
                  "the OpenCL platform whose devices are OPENCL:0, OPENCL:1, ...: its index or a part of its name "
                  "(case-insensitive), e.g. 0, pocl, nvidia", OWNER,
                  shown_default="the first platform with a GPU, else the first with any device")
settings.register("DEVICEKIT_OPENCL_DEVICE", device_choice, ("all", ()),
                  "which of the platform's devices become OPENCL ids: a type (all, gpu, cpu, accelerator) or "
                  "indices (0,2)", OWNER, shown_default="all")
settings.register("DEVICEKIT_OPENCL_BUILD_OPTIONS", settings.shell_words, [],
                  "extra clBuildProgram options appended to devicekit's (part of the compile-cache key)", OWNER,
                  shown_default="none")
settings.register("DEVICEKIT_OPENCL_KIT_FUZZ", settings.int_in(0), None,
                  "kernels of the bounded fuzz run in plugins/opencl's kit test", OWNER,
                  shown_default="15, or 200 with DEVICEKIT_SLOW=1")
