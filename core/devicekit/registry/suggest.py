"""Hints for a device name that names no kind: "did you mean" for a misspelling (`CPUU` -> CPU, by difflib), and
for a generic word (`GPU`, `NVIDIA`, `MPS`) the kinds it stands for, with whether each is installed and available.
A newcomer types `dk.device("GPU")` first: the answer says which kinds reach a GPU, not only that GPU is unknown."""

from __future__ import annotations

import difflib

__all__ = ["GPU_KINDS", "kind_hint"]

# kinds that reach a GPU, in the order a message lists them; an installed kind whose description says "GPU" counts too
GPU_KINDS = ("CUDA", "METAL", "OPENCL", "WEBGPU", "HIP", "VULKAN")
_PLUGINS = {"CUDA": "devicekit-cuda", "METAL": "devicekit-metal", "OPENCL": "devicekit-opencl"}
# words that are not kinds, and the kinds they mean
_ALIASES = {"GPU": GPU_KINDS, "GPUS": GPU_KINDS, "NVIDIA": ("CUDA",), "NV": ("CUDA",), "MPS": ("METAL",),
            "APPLE": ("METAL",), "CL": ("OPENCL",), "POCL": ("OPENCL",), "HOST": ("CPU",), "LLVM": ("CPU",),
            "NUMPY": ("PYTHON",), "CUDA_GPU": ("CUDA",)}


def kind_hint(kind: str, kinds: dict[str, tuple[bool, str]]) -> str:
    """A sentence (with its leading space) for the error about `kind`, or "". `kinds`: every installed kind ->
    (available here, description)."""
    kind = kind.upper()
    if kind in kinds:
        return ""
    if kind in _ALIASES:
        meant = list(_ALIASES[kind])
        if kind in ("GPU", "GPUS"):
            meant += [k for k, (_, d) in kinds.items() if k not in meant and "GPU" in d.upper()]
        installed = [k for k in meant if k in kinds]
        shown = ", ".join(f"{k} ({'available' if kinds[k][0] else 'unavailable here'})" for k in installed)
        ready = [k for k in installed if kinds[k][0]]
        missing = [_PLUGINS[k] for k in meant if k not in kinds and k in _PLUGINS]
        msg = f" {kind} is not a device kind; " + ("GPUs are reached through their own kinds" if kind in ("GPU", "GPUS")
                                                   else f"it is reached through {' or '.join(meant)}")
        msg += f": installed {shown}" if installed else ", none of them installed"
        if ready:
            msg += f"; use e.g. dk.device({ready[0]!r})"
        if missing:
            msg += f" (others: pip install {', '.join(missing)})"
        return msg + "."
    close = difflib.get_close_matches(kind, list(kinds), n=2, cutoff=0.6)
    if close:
        return f" Did you mean {' or '.join(repr(c) for c in close)}?"
    return ""
