"""Find the CUDA compile toolchain: NVRTC, nvJitLink, ptxas and the headers (cuda_fp16.h, cuda_bf16.h).

Nothing here loads a library; it only looks for files. Every lookup returns a `Found` that says where the
thing came from (a pip wheel, a toolkit, an environment variable), or None, and `searched()` lists every
place looked at, so a missing piece can be reported in words.

Search order, for each piece:
  1. an explicit environment variable (DEVICEKIT_NVRTC, DEVICEKIT_NVJITLINK, DEVICEKIT_PTXAS,
     DEVICEKIT_CUDA_INCLUDE, DEVICEKIT_CUDA_CCCL),
  2. the NVIDIA pip wheels (nvidia-cuda-nvrtc, nvidia-nvjitlink, nvidia-cuda-runtime for headers,
     nvidia-cuda-cccl for cuda/std, cub and thrust),
  3. a CUDA toolkit: $CUDA_HOME, $CUDA_PATH, the directory above `nvcc`/`ptxas` on PATH, /usr/local/cuda,
     /opt/cuda,
  4. the system loader's path (ctypes.util.find_library) for the libraries, PATH for ptxas.
Setting one of those variables to "none" (or "0", "off") disables that piece: the fallback it causes is then
reported like any other (handy to check the ptxas path on a machine that has nvJitLink).
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
from dataclasses import dataclass

from . import settings

SUPPORTED_MAJORS = (13, 12)  # library sonames we look for, newest first


@dataclass(frozen=True)
class Found:
    path: str
    origin: str  # "wheel nvidia-cuda-nvrtc 13.5.37", "toolkit /usr/local/cuda", "env DEVICEKIT_NVRTC", ...


def _toolkit_roots() -> list[tuple[str, str]]:
    roots: list[tuple[str, str]] = []
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        if os.environ.get(var):
            roots.append((os.environ[var], f"${var}"))
    for exe in ("nvcc", "ptxas"):
        p = shutil.which(exe)
        if p:
            roots.append((os.path.dirname(os.path.dirname(os.path.realpath(p))), f"{exe} on PATH"))
    roots += [("/usr/local/cuda", "toolkit"), ("/opt/cuda", "toolkit")]
    seen, out = set(), []
    for r, why in roots:
        if r not in seen:
            seen.add(r)
            out.append((r, why))
    return out


def _wheel_files(dist: str, pattern: str) -> list[tuple[str, str]]:
    """Files of an installed distribution whose name matches `pattern` (glob on the basename)."""
    import fnmatch
    try:
        from importlib import metadata
        d = metadata.distribution(dist)
    except Exception:  # noqa: BLE001 - not installed, or broken metadata
        return []
    out = []
    for f in d.files or ():
        if fnmatch.fnmatch(os.path.basename(str(f)), pattern):
            p = str(f.locate())
            if os.path.exists(p):
                out.append((p, f"wheel {dist} {d.version}"))
    return out


def _namespace_dirs(sub: str) -> list[str]:
    """nvidia/<cuXX>/<sub> directories of the `nvidia` namespace package (wheels installed without metadata)."""
    try:
        import importlib.util
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    out = []
    for base in spec.submodule_search_locations:
        for major in SUPPORTED_MAJORS:
            out.append(os.path.join(base, f"cu{major}", sub))
        out.append(os.path.join(base, "cuda_nvrtc", sub))  # CUDA 12 wheel layout
        out.append(os.path.join(base, "nvjitlink", sub))
        out.append(os.path.join(base, "cuda_runtime", sub))
    return out


_DISABLED = settings.OFF


def _disabled(env: str) -> bool:
    return (settings.get(env) or "").strip().lower() in _DISABLED


def _find_library(env: str, dist: str, stem: str) -> tuple[Found | None, list[str]]:
    searched: list[str] = []
    if _disabled(env):
        return None, [f"${env}={settings.get(env)} (disabled)"]
    if p := settings.get(env):
        searched.append(f"${env}={p}")
        if os.path.isfile(p):
            return Found(p, f"env {env}"), searched
    pats = [f"lib{stem}.so.{m}" for m in SUPPORTED_MAJORS] + [f"lib{stem}.so"]
    for pat in pats:
        hits = _wheel_files(dist, pat)
        if hits:
            return Found(*hits[0]), searched
    searched.append(f"pip wheel {dist}")
    for d in _namespace_dirs("lib"):
        for pat in pats:
            p = os.path.join(d, pat)
            if os.path.isfile(p):
                return Found(p, f"wheel dir {d}"), searched
    for root, why in _toolkit_roots():
        for libdir in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            d = os.path.join(root, libdir)
            searched.append(d)
            for pat in pats:
                hits = sorted(glob.glob(os.path.join(d, pat)))
                if hits:
                    return Found(hits[0], f"{why} {root}"), searched
    import ctypes.util
    name = ctypes.util.find_library(stem)
    searched.append("system library path")
    if name:
        return Found(name, "system library path"), searched
    return None, searched


@functools.cache
def nvrtc() -> tuple[Found | None, tuple[str, ...]]:
    f, s = _find_library("DEVICEKIT_NVRTC", "nvidia-cuda-nvrtc", "nvrtc")
    return f, tuple(s)


@functools.cache
def nvjitlink() -> tuple[Found | None, tuple[str, ...]]:
    f, s = _find_library("DEVICEKIT_NVJITLINK", "nvidia-nvjitlink", "nvJitLink")
    return f, tuple(s)


@functools.cache
def ptxas() -> tuple[Found | None, tuple[str, ...]]:
    searched: list[str] = []
    if _disabled("DEVICEKIT_PTXAS"):
        return None, ("$DEVICEKIT_PTXAS (disabled)",)
    if p := settings.get("DEVICEKIT_PTXAS"):
        searched.append(f"$DEVICEKIT_PTXAS={p}")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return Found(p, "env DEVICEKIT_PTXAS"), tuple(searched)
    p = shutil.which("ptxas")
    searched.append("PATH")
    if p:
        return Found(p, "PATH"), tuple(searched)
    for root, why in _toolkit_roots():
        p = os.path.join(root, "bin", "ptxas")
        searched.append(p)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return Found(p, f"{why} {root}"), tuple(searched)
    return None, tuple(searched)


@functools.cache
def include_dir() -> tuple[Found | None, tuple[str, ...]]:
    """A directory holding cuda_fp16.h and cuda_bf16.h (only kernels using half/bfloat16 need it)."""
    searched: list[str] = []

    def ok(d: str) -> bool:
        return os.path.isfile(os.path.join(d, "cuda_fp16.h")) and os.path.isfile(os.path.join(d, "cuda_bf16.h"))

    if _disabled("DEVICEKIT_CUDA_INCLUDE"):
        return None, ("$DEVICEKIT_CUDA_INCLUDE (disabled)",)
    if d := settings.get("DEVICEKIT_CUDA_INCLUDE"):
        searched.append(f"$DEVICEKIT_CUDA_INCLUDE={d}")
        if ok(d):
            return Found(d, "env DEVICEKIT_CUDA_INCLUDE"), tuple(searched)
    for p, origin in _wheel_files("nvidia-cuda-runtime", "cuda_fp16.h"):
        if ok(os.path.dirname(p)):
            return Found(os.path.dirname(p), origin), tuple(searched)
    searched.append("pip wheel nvidia-cuda-runtime")
    for d in _namespace_dirs("include"):
        if ok(d):
            return Found(d, f"wheel dir {d}"), tuple(searched)
    for root, why in _toolkit_roots():
        for sub in ("include", "targets/x86_64-linux/include", "targets/sbsa-linux/include"):
            d = os.path.join(root, sub)
            searched.append(d)
            if ok(d):
                return Found(d, f"{why} {root}"), tuple(searched)
    return None, tuple(searched)


@functools.cache
def cccl_include_dir() -> tuple[Found | None, tuple[str, ...]]:
    """A directory holding CCCL (cuda/std, cub, thrust), which cooperative_groups.h and kernels using cuda::std or
    cub include: $DEVICEKIT_CUDA_CCCL, the nvidia-cuda-cccl wheel, or a toolkit's include/cccl (or include)."""
    searched: list[str] = []

    def ok(d: str) -> bool:
        return os.path.isfile(os.path.join(d, "cuda", "std", "type_traits"))

    if _disabled("DEVICEKIT_CUDA_CCCL"):
        return None, ("$DEVICEKIT_CUDA_CCCL (disabled)",)
    if d := settings.get("DEVICEKIT_CUDA_CCCL"):
        searched.append(f"$DEVICEKIT_CUDA_CCCL={d}")
        if ok(d):
            return Found(d, "env DEVICEKIT_CUDA_CCCL"), tuple(searched)
    for p, origin in _wheel_files("nvidia-cuda-cccl", "type_traits"):
        d = os.path.dirname(os.path.dirname(os.path.dirname(p)))  # <dir>/cuda/std/type_traits
        if ok(d):
            return Found(d, origin), tuple(searched)
    searched.append("pip wheel nvidia-cuda-cccl")
    for d in _namespace_dirs("include"):
        for sub in (os.path.join(d, "cccl"), d):
            if ok(sub):
                return Found(sub, f"wheel dir {sub}"), tuple(searched)
    for root, why in _toolkit_roots():
        for sub in ("include/cccl", "include", "targets/x86_64-linux/include/cccl", "targets/x86_64-linux/include"):
            d = os.path.join(root, sub)
            searched.append(d)
            if ok(d):
                return Found(d, f"{why} {root}"), tuple(searched)
    return None, tuple(searched)


def clear() -> None:
    """Forget what was found (tests change the environment)."""
    for f in (nvrtc, nvjitlink, ptxas, include_dir, cccl_include_dir):
        f.cache_clear()
