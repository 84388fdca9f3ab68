"""Renderers: kernel -> source. The C-style base shared by C, CUDA and Metal lives in cstyle.py."""

from .program_spec import ParamSpec, ProgramSpec, VarSpec
from .renderer import Capabilities, Renderer

__all__ = ["Capabilities", "ParamSpec", "ProgramSpec", "Renderer", "VarSpec"]
