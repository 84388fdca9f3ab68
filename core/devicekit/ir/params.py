"""The kernel's signature as the IR states it: one `ParamSpec` per buffer and one `VarSpec` per scalar argument, in
declaration order. The builder and the lowering make them; a ProgramSpec (devicekit.render.program_spec, which
re-exports both) carries them to compilers and runtimes. Here, in the IR, so the IR imports nothing above it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dtypes import DType
from .uop import SymInt

__all__ = ["ParamSpec", "VarSpec"]


@dataclass(frozen=True)
class ParamSpec:
    """One global buffer argument, in declaration order."""

    name: str
    dtype: DType  # element dtype
    size: SymInt  # elements; an int or an expression over the kernel's vars
    writable: bool


@dataclass(frozen=True)
class VarSpec:
    """One scalar argument, in declaration order, with its declared bounds (inclusive).

    `dtype` None is an int64 index var (every generated kernel); a hand-written kernel states its C type (int32,
    uint8, float32, float64, ...). A float var takes any real number (bounds -inf..inf) and appears in no size.

    `scalar` set: a k.scalar of that dtype (any dtype; a value in expressions, never a size, index or bound). A launch
    checks the value's kind and range against it and rounds it to it (`scalar_value`); `dtype` is then the type it
    travels as (`ir.dtypes.scalar_wire`: bool as uint8, float16 and bfloat16 as float32) and lo/hi its range."""

    name: str
    lo: int | float
    hi: int | float
    dtype: DType | None = None
    # bounds that are expressions of earlier vars (`k.var("kk", 0, n - 1)`): lo/hi are then their extremes over
    # the other vars' bounds, and a launch also checks lo_rel <= value <= hi_rel
    lo_rel: SymInt | None = None
    hi_rel: SymInt | None = None
    scalar: DType | None = None

    @property
    def related(self) -> bool:
        return self.lo_rel is not None or self.hi_rel is not None

    @property
    def is_float(self) -> bool:
        return self.dtype is not None and self.dtype.is_float

    def coerce(self, x: Any) -> int | float:
        """The value as the kernel receives it: float for a float var, int otherwise."""
        return float(x) if self.is_float else int(x)
