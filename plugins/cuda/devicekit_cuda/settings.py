"""The CUDA plugin's environment variables, declared through devicekit.settings (imported by the entry-point module,
so `devicekit info` shows them and a bad value is a SettingError naming the variable and what it accepts).

Reads: DEVICEKIT_CUDA_ARCH, DEVICEKIT_CUDA_FLAGS, DEVICEKIT_CUDA_FMAD, DEVICEKIT_NVRTC, DEVICEKIT_NVJITLINK,
DEVICEKIT_PTXAS, DEVICEKIT_CUDA_INCLUDE, DEVICEKIT_CUDA_CCCL, DEVICEKIT_LIBCUDA (through devicekit.settings.get)."""

from __future__ import annotations

from devicekit import settings
from devicekit.settings import get

__all__ = ["get"]  # the plugin's modules read their variables through here, so they are declared first

OWNER = "devicekit-cuda"
OFF = ("none", "0", "off", "false", "no")  # a toolchain variable set to one of these disables that piece


def _arch(raw: str) -> str:
    from .arch import normalize  # light: re only
    return normalize(raw)


_arch.accepts = "a CUDA architecture: sm_80, 90, 9.0, compute_90, sm_90a"  # type: ignore[attr-defined]


def _path_or_off(raw: str) -> str:
    return settings.path(raw)


_path_or_off.accepts = "a path, or none/0/off to disable this piece"  # type: ignore[attr-defined]

settings.register("DEVICEKIT_CUDA_ARCH", _arch, None, "the GPU architecture to compile for when no GPU is present",
                  OWNER, shown_default="the device's, else sm_90")
settings.register("DEVICEKIT_CUDA_FLAGS", settings.shell_words, (), "extra NVRTC flags (part of the cache key)",
                  OWNER, shown_default="none")
settings.register("DEVICEKIT_CUDA_FMAD", settings.flag, False, "let NVRTC contract a*b+c into FMA", OWNER)
for _var, _what in (("DEVICEKIT_NVRTC", "libnvrtc"), ("DEVICEKIT_NVJITLINK", "libnvJitLink"),
                    ("DEVICEKIT_PTXAS", "the ptxas executable"),
                    ("DEVICEKIT_CUDA_INCLUDE", "the directory holding cuda_fp16.h and cuda_bf16.h"),
                    ("DEVICEKIT_CUDA_CCCL", "the CCCL include directory (cuda/std, cub)")):
    settings.register(_var, _path_or_off, None, f"{_what} to use (searched for when unset)", OWNER,
                      shown_default="searched")
settings.register("DEVICEKIT_LIBCUDA", settings.path, None, "the CUDA driver library to load", OWNER,
                  shown_default="libcuda.so.1")
