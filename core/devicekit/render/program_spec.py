"""ProgramSpec: what a renderer hands a compiler — the source plus everything a runtime needs to check and launch it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir.dtypes import DType
from ..ir.uop import SymInt, sym_eval


@dataclass(frozen=True)
class ParamSpec:
    """One global buffer argument, in declaration order."""

    name: str
    dtype: DType  # element dtype
    size: SymInt  # elements; an int or an expression over the kernel's vars
    writable: bool


@dataclass(frozen=True)
class VarSpec:
    """One int scalar argument, in declaration order, with its declared bounds (inclusive)."""

    name: str
    lo: int
    hi: int


@dataclass(frozen=True)
class ProgramSpec:
    name: str  # the entry point's symbol
    src: str  # source text in `lang`
    device: str  # the kind it was rendered for ("CPU", "CUDA", ...)
    lang: str  # "llvm-ir", "c", "cuda", "metal", "python", ...
    params: tuple[ParamSpec, ...]
    vars: tuple[VarSpec, ...] = ()
    global_size: tuple[SymInt, ...] | None = None  # workgroups per axis (GPU); None: one call
    local_size: tuple[SymInt, ...] | None = None  # threads per workgroup (GPU)
    core_split: SymInt | None = None  # CPU: extent of the outer global range the runtime divides among threads
    outs: tuple[int, ...] = ()  # param slots stored to
    ins: tuple[int, ...] = ()  # param slots loaded from
    kernel: Any = field(default=None, compare=False, repr=False)  # the ir.Kernel it came from, when there is one
    meta: tuple[tuple[str, Any], ...] = ()  # renderer-specific facts (shared memory bytes, ...)

    def var_dict(self, vals: list[int] | tuple[int, ...]) -> dict[str, int]:
        if len(vals) != len(self.vars):
            names = ", ".join(v.name for v in self.vars) or "none"
            raise TypeError(f"{self.name}: expected {len(self.vars)} int vars ({names}), got {len(vals)}")
        return {v.name: int(x) for v, x in zip(self.vars, vals)}

    def check_vars(self, vals: list[int] | tuple[int, ...]) -> dict[str, int]:
        """Name the vars and check each against its declared bounds."""
        d = self.var_dict(vals)
        for v in self.vars:
            if not v.lo <= d[v.name] <= v.hi:
                raise ValueError(f"{self.name}: var {v.name}={d[v.name]} is outside its declared range [{v.lo}, {v.hi}]")
        return d

    def buffer_sizes(self, var_vals: dict[str, int]) -> list[int]:
        """Elements each param needs for these var values."""
        return [sym_eval(p.size, var_vals) for p in self.params]

    def launch_dims(self, var_vals: dict[str, int]) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
        g = None if self.global_size is None else tuple(sym_eval(x, var_vals) for x in self.global_size)
        loc = None if self.local_size is None else tuple(sym_eval(x, var_vals) for x in self.local_size)
        return g, loc

    def split_extent(self, var_vals: dict[str, int]) -> int | None:
        return None if self.core_split is None else sym_eval(self.core_split, var_vals)

    def get_meta(self, key: str, default: Any = None) -> Any:
        return dict(self.meta).get(key, default)
