"""devicekit-metal: the METAL device for devicekit.

Metal Shading Language renderer (works everywhere), Metal compiler, runtime and allocator through pyobjc
(macOS only). Importing this package is cheap: nothing from pyobjc/Metal is imported until a METAL device or
compiler is built on macOS.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["MetalCompiler", "MetalRenderer", "MetalXcrunCompiler", "__version__"]


def __getattr__(name: str):
    if name == "MetalRenderer":
        from .renderer import MetalRenderer
        return MetalRenderer
    if name in ("MetalCompiler", "MetalXcrunCompiler"):
        from . import compiler
        return getattr(compiler, name)
    raise AttributeError(f"module 'devicekit_metal' has no attribute {name!r}")
