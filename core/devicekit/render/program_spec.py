"""ProgramSpec: what a renderer hands a compiler — the source plus everything a runtime needs to check and launch it.
`ParamSpec` and `VarSpec` (the kernel's signature) belong to the IR (devicekit.ir.params) and are re-exported here."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..ir.accept import a, described
from ..ir.bounds import BoundsChecks
from ..ir.dtypes import largest_float, round_float
from ..ir.params import ParamSpec, VarSpec
from ..ir.symfn import compile_sym
from ..ir.uop import SymInt


@dataclass(frozen=True)
class ProgramSpec:
    name: str  # the kernel's name as the user wrote it (messages); the symbol to look up is `entry`
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
    symbol: str = ""  # the entry point's symbol in `src` when it is not `name` (generated kernels: ir.names.mangle)
    # run-time bounds checks (ir/bounds.py): when set, params[checks.slot] (the last) is the hidden error buffer
    # that Program.execute allocates and passes; users pass and see `user_params` only
    checks: BoundsChecks | None = None

    @property
    def entry(self) -> str:
        """The symbol a runtime looks up: `symbol` when set, else `name` (hand-written sources keep their names)."""
        return self.symbol or self.name

    @property
    def user_params(self) -> tuple[ParamSpec, ...]:
        """The params a caller passes: every param but the hidden bounds-check buffer."""
        return self.params if self.checks is None else self.params[: self.checks.slot]

    def var_dict(self, vals: list[int] | tuple[int, ...]) -> dict[str, int]:
        if len(vals) != len(self.vars):
            names = ", ".join(v.name for v in self.vars) or "none"
            kind = "" if any(v.is_float or v.scalar is not None for v in self.vars) else "int "
            raise TypeError(f"{self.name}: expected {len(self.vars)} {kind}vars ({names}), got {len(vals)}")
        return {v.name: v.coerce(x) if v.scalar is None else scalar_value(self.name, v, x)
                for v, x in zip(self.vars, vals)}

    def check_vars(self, vals: list[int] | tuple[int, ...]) -> dict[str, int]:
        """Name the vars and check each against its declared bounds (a scalar: its kind and dtype's range)."""
        d = self.var_dict(vals)
        for v in self.vars:
            if v.scalar is None and not v.is_float and not v.lo <= d[v.name] <= v.hi:
                raise ValueError(f"{self.name}: var {v.name}={d[v.name]} is outside its declared range [{v.lo}, {v.hi}]")
            if v.related:
                check_relation(self.name, v, d)
        return d

    # sizes, launch dims and the split extent are compiled once to python functions of the var values: a launch
    # evaluates them in well under a microsecond instead of walking the expression graphs
    @cached_property
    def _fns(self) -> tuple:
        names = tuple(v.name for v in self.vars)
        dims = lambda d: None if d is None else tuple(compile_sym(x, names) for x in d)
        split = None if self.core_split is None else compile_sym(self.core_split, names)
        return tuple(compile_sym(p.size, names) for p in self.params), dims(self.global_size), dims(self.local_size), split

    def _vals(self, var_vals: dict[str, int]) -> tuple[int, ...]:
        try:
            return tuple(var_vals[v.name] for v in self.vars)
        except KeyError as e:
            raise KeyError(f"no value given for var {e.args[0]!r}") from None

    def buffer_sizes(self, var_vals: dict[str, int]) -> list[int]:
        """Elements each param needs for these var values."""
        vals = self._vals(var_vals)
        return [f(vals) for f in self._fns[0]]

    def launch_dims(self, var_vals: dict[str, int]) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
        vals = self._vals(var_vals)
        g, loc = self._fns[1], self._fns[2]
        return (None if g is None else tuple(f(vals) for f in g)), (None if loc is None else tuple(f(vals) for f in loc))

    def split_extent(self, var_vals: dict[str, int]) -> int | None:
        return None if self._fns[3] is None else self._fns[3](self._vals(var_vals))

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_fns"}  # compiled functions do not pickle

    def get_meta(self, key: str, default: Any = None) -> Any:
        return dict(self.meta).get(key, default)

    def arg_order(self) -> tuple[tuple[str, int], ...]:
        """The native argument list in declaration order: ("buffer", i) for params[i], ("var", j) for vars[j], and
        whatever else a hand-written kernel's signature holds (("local", k): its k-th dynamic local memory arg,
        ("builtin", k): filled by the launch). A generated kernel takes its buffers, then its vars."""
        order = self.get_meta("args")
        if order is not None:
            return order
        return tuple(("buffer", i) for i in range(len(self.params))) + tuple(("var", j) for j in range(len(self.vars)))


def scalar_value(kernel: str, v: VarSpec, x: Any) -> int | float:
    """The value a k.scalar `v` receives for the launch value `x`: a bool for a bool scalar, an int of the dtype's
    range for an int one, a real number for a float one (rounded to its dtype, ties to even; a finite value past its
    largest finite value is refused). TypeError or ValueError naming the kernel and the scalar otherwise."""
    dt = v.scalar
    what = f"{kernel}: scalar {v.name} ({dt.name})"
    if dt.is_bool:
        if not isinstance(x, (bool, np.bool_)):
            raise TypeError(f"{what} takes a bool (True or False), got {described(x)}")
        return int(bool(x))
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise TypeError(f"{what} takes {'an int' if dt.is_int else 'a number'}, got {described(x)}")
    if dt.is_int:
        if not isinstance(x, numbers.Integral):
            raise TypeError(f"{what} takes an int, got {described(x)}: an int scalar never truncates a float; "
                            f"round it yourself, or declare the scalar with a float dtype")
        if not dt.min() <= int(x) <= dt.max():
            raise ValueError(f"{what}: {int(x)} is outside {a(dt.name)}'s range {dt.min()}..{dt.max()}")
        return int(x)
    try:
        f, finite = float(x), True
        finite = math.isfinite(f) or isinstance(x, numbers.Integral)  # an int too large for a float64 is finite
    except OverflowError:
        f, finite = (math.inf if x > 0 else -math.inf), True
    r = round_float(f, dt)
    if math.isinf(r) and finite:
        raise ValueError(f"{what}: {x!r} is outside {a(dt.name)}'s range (largest finite value "
                         f"{largest_float(dt)!r}); pass inf explicitly if that is what you mean")
    return r


def check_relation(kernel: str, v: VarSpec, var_vals: dict[str, Any]) -> None:
    """ValueError unless lo_rel <= value <= hi_rel for these var values (the bounds that name other vars)."""
    from ..ir.uop import sym_eval
    x = var_vals[v.name]
    lo = v.lo if v.lo_rel is None else sym_eval(v.lo_rel, var_vals)
    hi = v.hi if v.hi_rel is None else sym_eval(v.hi_rel, var_vals)
    if not lo <= x <= hi:
        show = lambda r, n: str(n) if r is None else f"{_sym_text(r)} = {n}"
        raise ValueError(f"{kernel}: var {v.name}={x} is outside its declared range [{show(v.lo_rel, lo)}, "
                         f"{show(v.hi_rel, hi)}] for {var_vals}")


def _sym_text(u: Any) -> str:
    """A bound expression as the user wrote it, roughly: `n - 1`, `(n * 2)`."""
    from ..ir.ops import Ops
    if not hasattr(u, "op"):
        return str(u)
    if u.op is Ops.CONST:
        return str(u.arg)
    if u.op is Ops.VAR:
        return u.arg[0]
    if u.op is Ops.CAST:
        return _sym_text(u.src[0])
    sym = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%", Ops.MAX: "max"}.get(u.op, "?")
    a, b = (_sym_text(x) for x in u.src)
    if u.op is Ops.ADD and b.startswith("-"):
        return f"{a} - {b[1:]}"
    return f"{a} {sym} {b}"
