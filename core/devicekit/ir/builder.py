"""KernelBuilder: the small, typed API that builds a kernel graph; `build()` verifies it into an ir.Kernel."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import names
from .accept import as_dtype
from .dtypes import DType, dtypes
from .ops import RANGE_KINDS, Ops
from .uop import KernelError, SymInt, UOp, as_uop

if TYPE_CHECKING:
    from ..render.program_spec import ParamSpec, VarSpec


@dataclass(frozen=True, eq=False)
class Kernel:
    """A verified kernel: a SINK of STOREs plus its signature. Immutable; `key` is a content hash."""

    name: str
    sink: UOp
    params: tuple[ParamSpec, ...]
    vars: tuple[VarSpec, ...]
    param_uops: tuple[UOp, ...] = field(repr=False)
    var_uops: tuple[UOp, ...] = field(repr=False)
    checked: bool = True  # False: no run-time bounds checks (ir/bounds.py); `build(checked=False)`

    @property
    def key(self) -> bytes:
        import hashlib
        h = hashlib.sha256(self.sink.key)
        h.update(repr((self.name, [(p.name, p.dtype.name, p.writable) for p in self.params],
                       [(v.name, v.lo, v.hi) for v in self.vars])).encode())
        if not self.checked:
            h.update(b"unchecked")
        for p in self.param_uops:
            h.update(p.key)
        return h.digest()

    def __post_init__(self) -> None:
        # a Kernel is verified whoever assembles it (the builder, a transform, a graph built by hand)
        from .verify import verify
        verify(self)

    def uops(self) -> list[UOp]:
        return self.sink.toposort()


class BufferRef:
    """A global buffer parameter or a local (shared) array: index it to load, assign an item to store."""

    def __init__(self, builder: KernelBuilder, uop: UOp):
        self._b, self.uop = builder, uop

    @property
    def dtype(self) -> DType:
        return self.uop.dtype

    @property
    def name(self) -> str:
        return self.uop.arg[1] if self.uop.op is Ops.PARAM else self.uop.arg[0]

    def __repr__(self) -> str:
        return f"<{'param' if self.uop.op is Ops.PARAM else 'local'} {self.name}: {self.dtype}>"

    def _index(self, idx: Any, gate: UOp | None = None, unchecked: bool = False) -> UOp:
        idx = as_uop(idx, dtypes.index if not isinstance(idx, UOp) else None)
        if not idx.dtype.scalar().is_int or idx.dtype.count != 1:
            raise KernelError(f"index into {self.name} must be a scalar integer, got {idx.dtype}", idx)
        if idx.dtype != dtypes.index:
            idx = idx.cast(dtypes.index)
        arg = "unchecked" if unchecked else None  # ir/bounds.py: no run-time bounds check for this access
        if gate is None:
            return UOp(Ops.INDEX, self.dtype, (self.uop, idx), arg)
        if not isinstance(gate, UOp) or gate.dtype != dtypes.bool:
            raise KernelError(f"the gate of a load/store on {self.name} must be a bool value", idx)
        return UOp(Ops.INDEX, self.dtype, (self.uop, idx, gate), arg)

    def __getitem__(self, idx: Any) -> UOp:
        return self.load(idx)

    def load(self, idx: Any, gate: UOp | None = None, default: Any = 0, unchecked: bool = False) -> UOp:
        """Load one element; with a gate, lanes where the gate is false read `default` and touch no memory.
        `unchecked=True`: no run-time bounds check even when the index cannot be proven in bounds (docs/ir.md)."""
        ix = self._index(idx, gate, unchecked)
        srcs: tuple[UOp, ...] = (ix,) if gate is None else (ix, as_uop(default, self.dtype))
        if self.uop.op is Ops.DEFINE_LOCAL and self._b._last_barrier is not None:
            srcs = (*srcs, self._b._last_barrier)
        arg = None
        if self.uop.op is Ops.PARAM and self.uop.arg[2]:
            # memory order (ir/order.py): read where it is built, after the param's last store so far
            arg = ("after", self._b._last_store.get(self.uop, -1), len(self._b._stmts))
        return UOp(Ops.LOAD, self.dtype, srcs, arg)

    def __setitem__(self, idx: Any, value: Any) -> None:
        self.store(idx, value)

    def store(self, idx: Any, value: Any, gate: UOp | None = None, unchecked: bool = False) -> None:
        self._b._store(self, self._index(idx, gate, unchecked), value)


class KernelBuilder:
    """Builds one kernel. Params and vars keep their declaration order: that is the kernel's signature."""

    def __init__(self, name: str = "kernel"):
        self.name = names.check(name, "kernel name")
        self._params: list[UOp] = []
        self._vars: list[UOp] = []
        self._stmts: list[UOp] = []
        self._names: set[str] = set()
        self._last_barrier: UOp | None = None
        self._last_store: dict[UOp, int] = {}  # param -> statement index of its last store
        self._built = False
        self._range_ids = itertools.count()  # per kernel: the same kernel built twice is the same graph

    def _claim(self, name: str, what: str) -> None:
        """The one name check of params, vars and locals (ir/names.py): the rule, then uniqueness."""
        names.check(name, f"{what} name")
        if name in self._names:
            raise ValueError(f"{what} name {name!r} is already used in kernel {self.name}")
        if name in names.LOWERING_VARS:
            raise ValueError(f"{what} name {name!r} is reserved: CPU lowering names the split range's bounds "
                             f"{' and '.join(names.LOWERING_VARS)}")
        if name == names.BOUNDS_PARAM:
            raise ValueError(f"{what} name {name!r} is reserved: it is the hidden bounds-check param (docs/ir.md)")
        self._names.add(name)

    def var(self, name: str, lo: int = 0, hi: int = 2**31 - 1) -> UOp:
        """An int scalar argument with inclusive bounds [lo, hi] (checked at every launch)."""
        self._claim(name, "var")
        for what, b in (("lo", lo), ("hi", hi)):
            if isinstance(b, bool) or not isinstance(b, int):
                raise KernelError(f"var {name}: {what} must be an int, got {b!r}")
            if not dtypes.index.min() <= b <= dtypes.index.max():
                raise KernelError(f"var {name}: {what}={b} is outside the var's dtype ({dtypes.index}: "
                                  f"{dtypes.index.min()}..{dtypes.index.max()})")
        if lo > hi:
            raise ValueError(f"var {name}: lo={lo} > hi={hi}")
        v = UOp(Ops.VAR, dtypes.index, (), (name, int(lo), int(hi)))
        self._vars.append(v)
        return v

    def param(self, name: str, dtype: DType | Any, size: SymInt, writable: bool = False) -> BufferRef:
        """A global buffer of `size` elements (an int or an expression over vars); `dtype` as `ir.accept` takes
        it (dtypes.float32, np.float32, "float32")."""
        self._claim(name, "param")
        dtype = as_dtype(dtype, f"param {name}")
        if dtype.count != 1 or dtype == dtypes.void:
            raise TypeError(f"param {name}: dtype must be a scalar dtype (e.g. dtypes.float32, np.float32), got "
                            f"{dtype!r}" + ("; a param is an array of scalars: pass "
                                            f"{dtype.scalar()!r}" if dtype.count != 1 else ""))
        size_u = as_uop(size)
        if not size_u.dtype.is_int:
            raise KernelError(f"param {name}: size must be an integer expression", size_u)
        for u in size_u.toposort():
            if u.op not in (Ops.CONST, Ops.VAR, Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX):
                raise KernelError(f"param {name}: size may only use vars and constants, found {u.op.name}", u)
        p = UOp(Ops.PARAM, dtype, (size_u.cast(dtypes.index),), (len(self._params), name, bool(writable)))
        self._params.append(p)
        return BufferRef(self, p)

    def local(self, name: str, dtype: DType | Any, size: int) -> BufferRef:
        """Local (shared) memory, one array per workgroup; order accesses with `barrier()`."""
        self._claim(name, "local")
        dtype = as_dtype(dtype, f"local {name}")
        if not isinstance(size, int) or size <= 0:
            raise ValueError(f"local {name}: size must be a positive int, got {size!r}")
        return BufferRef(self, UOp(Ops.DEFINE_LOCAL, dtype, (), (name, size)))

    def range(self, end: SymInt, kind: str = "loop") -> UOp:
        """A loop index 0 <= i < end. kind: global, local, loop, reduce, unroll (unroll needs a constant end)."""
        if kind not in RANGE_KINDS:
            raise ValueError(f"range kind must be one of {RANGE_KINDS}, got {kind!r}")
        end_u = as_uop(end)
        if not end_u.dtype.is_int:
            raise KernelError("range end must be an integer", end_u)
        if end_u.dtype != dtypes.index:
            end_u = end_u.cast(dtypes.index)
        for u in end_u.toposort():
            if u.op in (Ops.RANGE, Ops.LOAD):
                raise KernelError("a range's end may only depend on vars and constants (no loads, no other ranges)", u)
        if kind == "unroll" and end_u.op is not Ops.CONST:
            raise KernelError("an unroll range needs a constant end", end_u)
        return UOp(Ops.RANGE, dtypes.index, (end_u,), (next(self._range_ids), kind))

    def barrier(self) -> None:
        """Every thread of the workgroup reaches this before any continues; orders local memory."""
        b = UOp(Ops.BARRIER, dtypes.void, tuple(s for s in self._stmts if s.op is Ops.STORE), len(self._stmts))
        self._stmts.append(b)
        self._last_barrier = b

    def _store(self, buf: BufferRef, index: UOp, value: Any) -> None:
        if self._built:
            raise RuntimeError(f"kernel {self.name} was already built")
        if buf.uop.op is Ops.PARAM and not buf.uop.arg[2]:
            raise KernelError(f"store to read-only param {buf.name}: declare it with writable=True", index)
        v = as_uop(value, buf.dtype)
        if v.dtype != buf.dtype:
            raise KernelError(f"store of a {v.dtype} value into {buf.name} ({buf.dtype}): cast it", v)
        srcs: tuple[UOp, ...] = (index, v)
        if self._last_barrier is not None:
            srcs = (*srcs, self._last_barrier)
        if buf.uop.op is Ops.PARAM:
            self._last_store[buf.uop] = len(self._stmts)
        self._stmts.append(UOp(Ops.STORE, dtypes.void, srcs, len(self._stmts)))

    def build(self, checked: bool = True) -> Kernel:
        """Verify and freeze the kernel (a KernelError names the bad node and where it was built). `checked=False`
        drops the run-time bounds checks of accesses the verifier cannot prove in bounds (docs/ir.md)."""
        from ..render.program_spec import ParamSpec, VarSpec  # the render package imports the IR: import late
        if not self._stmts:
            raise KernelError(f"kernel {self.name} stores nothing")
        sink = UOp(Ops.SINK, dtypes.void, tuple(self._stmts), self.name)
        params = tuple(ParamSpec(p.arg[1], p.dtype, _sym(p.src[0]), p.arg[2]) for p in self._params)
        vars_ = tuple(VarSpec(*v.arg) for v in self._vars)
        k = Kernel(self.name, sink, params, vars_, tuple(self._params), tuple(self._vars), bool(checked))  # verifies
        self._built = True
        return k


def _sym(u: UOp) -> SymInt:
    return u.arg if u.op is Ops.CONST else u
