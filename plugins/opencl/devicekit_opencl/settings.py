"""OPENCL's environment variables, declared once through devicekit.settings (`devicekit info` lists them)."""

from __future__ import annotations

from devicekit import settings
from devicekit.settings import get

__all__ = ["get"]

OWNER = "devicekit-opencl"
DEVICE_TYPES = ("all", "gpu", "cpu", "accelerator")


def device_choice(raw: str) -> tuple[str, tuple[int, ...]]:
    """'all' / 'gpu' / 'cpu' / 'accelerator', or device indices within the platform ('0', '1,3')."""
    text = raw.strip().lower()
    if text in DEVICE_TYPES:
        return text, ()
    try:
        idx = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise ValueError("not a device type or a list of indices") from None
    if not idx or any(i < 0 for i in idx) or len(set(idx)) != len(idx):
        raise ValueError("indices must be distinct and >= 0")
    return "index", idx


device_choice.accepts = "all, gpu, cpu, accelerator, or device indices within the platform such as 0 or 0,2"  # type: ignore[attr-defined]

settings.register("DEVICEKIT_OPENCL_PLATFORM", settings.text, None,
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
