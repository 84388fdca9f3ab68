"""OPENCL's environment variables, declared once through devicekit.settings (`devicekit info` lists them); the
platform and device choices are parsed by the core's devicekit.platforms."""

from __future__ import annotations

from devicekit import settings
from devicekit.platforms import device_choice, platform_choice
from devicekit.settings import get

__all__ = ["get"]

OWNER = "devicekit-opencl"

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
