"""Renderers: kernel -> source. The C-style base shared by C, CUDA, Metal, OpenCL and WGSL lives in cstyle.py; the
render step every renderer shares (its passes, the launch limits, shared_bytes) in prepare.py."""

from .program_spec import ParamSpec, ProgramSpec, VarSpec
from .renderer import Capabilities, Renderer

__all__ = ["Capabilities", "ParamSpec", "ProgramSpec", "Renderer", "VarSpec"]
