"""KernelBuilder: the small, typed API that builds a kernel graph; `build()` verifies it into an ir.Kernel."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import names
from .accept import as_dtype
from .dtypes import DType, dtypes, scalar_wire
from .ops import RANGE_KINDS, Ops
from .uop import KernelError, SymInt, UOp, as_uop, user_site

if TYPE_CHECKING:
    from .params import ParamSpec, VarSpec


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
    shapes: tuple[tuple[SymInt, ...] | None, ...] = ()  # per param: its `shape=` (dk.run shapes outputs by it)
    optimize: bool = True  # False: the heuristic optimizer leaves it as written (ir/optimize.py); `build(optimize=False)`
    tiles: tuple[int, int] | None = None  # the optimizer's tile (rows unrolled, lanes upcast) instead of its heuristic's:
    # `with_tiles` (dk.search's candidates); None: the heuristic chooses

    @property
    def key(self) -> bytes:
        import hashlib
        h = hashlib.sha256(self.sink.key)
        h.update(repr((self.name, [(p.name, p.dtype.name, p.writable) for p in self.params],
                       [(v.name, v.lo, v.hi) if v.scalar is None else (v.name, v.scalar.name)
                        for v in self.vars])).encode())
        for v in self.vars:  # bounds that name other vars
            for r in (v.lo_rel, v.hi_rel):
                h.update(b"-" if r is None else r.key)
        if not self.checked:
            h.update(b"unchecked")
        if not self.optimize:
            h.update(b"as-written")
        if self.tiles is not None:
            h.update(repr(("tiles", self.tiles)).encode())
        for p in self.param_uops:
            h.update(p.key)
        return h.digest()

    def __post_init__(self) -> None:
        # a Kernel is verified whoever assembles it (the builder, a transform, a graph built by hand)
        from .verify import verify
        verify(self)

    def uops(self) -> list[UOp]:
        return self.sink.toposort()

    def with_tiles(self, rows: int, lanes: int) -> Kernel:
        """This kernel with the optimizer's register tile set: `rows` copies of each statement over the unrolled
        global range, `lanes` lanes of the upcast one per vector (1, 1: as written). A kernel the optimizer does not
        rewrite compiles as before. What `dk.search` times; its key differs, so every cache tells them apart."""
        import dataclasses
        for what, v in (("rows", rows), ("lanes", lanes)):
            if type(v) is not int or not 1 <= v <= 16:
                raise ValueError(f"{self.name}: with_tiles({what}=) takes an int from 1 to 16, got {v!r}")
        return dataclasses.replace(self, tiles=(rows, lanes))


class BufferRef:
    """A global buffer parameter or a local (shared) array: index it to load, assign an item to store."""

    def __init__(self, builder: KernelBuilder, uop: UOp, shape: tuple[UOp, ...] | None = None):
        self._b, self.uop, self.shape = builder, uop, shape

    @property
    def dtype(self) -> DType:
        return self.uop.dtype

    @property
    def name(self) -> str:
        return self.uop.arg[1] if self.uop.op is Ops.PARAM else self.uop.arg[0]

    def __repr__(self) -> str:
        return f"<{'param' if self.uop.op is Ops.PARAM else 'local'} {self.name}: {self.dtype}>"

    def _flat(self, idx: Any, gate: UOp | None) -> UOp:
        """A tuple index of a shaped param, row-major: ((i0 * d1) + i1) * d2 + i2 ...; each component is recorded
        for the per-dimension proof at build (`verify.check_dimensions`)."""
        if self.shape is None:
            raise KernelError(f"{self.name}[{', '.join(map(str, idx))}]: a tuple index needs a param declared with "
                              f"shape=; {self.name} is flat (index it with one expression)")
        if len(idx) != len(self.shape):
            raise KernelError(f"{self.name} has {len(self.shape)} dimensions, indexed with {len(idx)}")
        flat = None
        for k, (c, d) in enumerate(zip(idx, self.shape)):
            if isinstance(c, float):
                _no_float_index(c, f"index {k} into {self.name}")
            c = as_uop(c, dtypes.index if not isinstance(c, UOp) else None)
            no_scalars(c, f"in index {k} into {self.name}")
            _no_float_index(c, f"index {k} into {self.name}")
            if not c.dtype.is_int or c.dtype.count != 1:
                raise KernelError(f"index {k} into {self.name} must be a scalar integer, got {c.dtype}", c)
            c = c if c.dtype == dtypes.index else c.cast(dtypes.index)
            self._b._dims.append((self.name, k, c, d, gate is not None))
            flat = c if flat is None else flat * d + c
        return flat

    def in_bounds(self, idx: Any) -> UOp:
        """The bool `idx` is inside the param: 0 <= idx < size, or every component inside its dimension."""
        comps = [(as_uop(c, dtypes.index), d) for c, d in zip(idx, self.shape)] if isinstance(idx, tuple) \
            and self.shape is not None else [(as_uop(idx, dtypes.index), self.uop.src[0] if self.uop.op is Ops.PARAM
                                              else UOp.const(dtypes.index, self.uop.arg[1]))]
        ok = None
        for c, d in comps:
            no_scalars(c, f"in an index into {self.name}")
            t = (c >= 0) & (c < d)
            ok = t if ok is None else ok & t
        return ok

    def get(self, idx: Any, default: Any = 0) -> UOp:
        """`buf[idx]` where idx is inside the buffer, else `default` (dict.get): the boundary load of a stencil,
        `x.get(i - 1)`, is `x.load(i - 1, gate=(i - 1 >= 0) & (i - 1 < size), default=0)`."""
        # the gate is the bounds check itself: no lane it lets through can leave the buffer, so no run-time check
        return self.load(idx, gate=self.in_bounds(idx), default=default, unchecked=True)

    def _index(self, idx: Any, gate: UOp | None = None, unchecked: bool = False) -> UOp:
        if isinstance(idx, tuple):
            idx = self._flat(idx, gate)
        if isinstance(idx, float):
            _no_float_index(idx, f"index into {self.name}")
        idx = as_uop(idx, dtypes.index if not isinstance(idx, UOp) else None)
        no_scalars(idx, f"in an index into {self.name}")  # a k.scalar's own message first: it names the scalar
        _no_float_index(idx, f"index into {self.name}")
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
        if self.uop.op is Ops.DEFINE_LOCAL or self.uop.arg[2]:
            # memory order (ir/order.py): read where it is built, after the buffer's last store so far (a local
            # array follows the rules of a writable param: two loads of it around a store are two values)
            arg = ("after", self._b._last_store.get(self.uop, -1), len(self._b._stmts))
        return UOp(Ops.LOAD, self.dtype, srcs, arg)

    def __setitem__(self, idx: Any, value: Any) -> None:
        self.store(idx, value)

    def store(self, idx: Any, value: Any, gate: UOp | None = None, unchecked: bool = False) -> None:
        self._b._store(self, self._index(idx, gate, unchecked), value)


class KernelBuilder:
    """Builds one kernel. Params and vars (and scalars) keep their declaration order: that is the kernel's
    signature."""

    def __init__(self, name: str = "kernel"):
        self.name = names.check(name, "kernel name")
        self._params: list[UOp] = []
        self._shapes: list[tuple[SymInt, ...] | None] = []
        self._vars: list[UOp] = []
        self._stmts: list[UOp] = []
        self._names: set[str] = set()
        self._last_barrier: UOp | None = None
        self._last_store: dict[UOp, int] = {}  # written param or local -> its last store's statement
        self._built = False
        self._range_ids = itertools.count()  # per kernel: the same kernel built twice is the same graph
        self._rels: dict[str, tuple[UOp | None, UOp | None]] = {}  # var -> (lo, hi) expressions of earlier vars
        self._dims: list[tuple] = []  # (param name, dimension, component, its extent, gated) of shaped accesses

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

    def var(self, name: str, lo: SymInt = 0, hi: SymInt = 2**31 - 1) -> UOp:
        """An int scalar argument with inclusive bounds [lo, hi] (checked at every launch). A bound may be an
        expression of earlier vars (`k.var("kk", 0, n - 1)`): the launch checks it, and the bounds proof uses it
        (`x[kk]` with size n needs no run-time check)."""
        self._claim(name, "var")
        rel: dict[str, UOp] = {}
        for what, b in (("lo", lo), ("hi", hi)):
            if isinstance(b, UOp):
                rel[what] = self._relation(name, what, b)
        if rel:
            lo = int(rel["lo"].vmin) if "lo" in rel else lo
            hi = int(rel["hi"].vmax) if "hi" in rel else hi
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
        if rel:
            self._rels[name] = (rel.get("lo"), rel.get("hi"))
        return v

    def scalar(self, name: str, dtype: DType | Any) -> UOp:
        """A scalar argument of any dtype (float16/32/64, bfloat16, int8..int64, uint8..uint64, bool), given at every
        launch by name like a var (`dk.run(k, ..., alpha=1.5)`): a value for expressions (`alpha * x[i]`), never a
        size, index or range bound (an int that is one is a `var`, with bounds). Its value is not part of the
        compiled program: one compile serves every value. `dtype` as `ir.accept` takes it."""
        self._claim(name, "scalar")
        dtype = as_dtype(dtype, f"scalar {name}")
        if dtype.count != 1 or dtype == dtypes.void:
            raise TypeError(f"scalar {name}: dtype must be a scalar dtype (e.g. dtypes.float64, np.int32), got "
                            f"{dtype!r}")
        s = UOp(Ops.SCALAR, dtype, (), name)
        self._vars.append(s)
        return s

    def _relation(self, name: str, what: str, b: UOp) -> UOp:
        """A bound of var `name` that names earlier vars: integer arithmetic of vars and constants only."""
        no_scalars(b, f"in the {what} bound of var {name}")
        if not b.dtype.is_int or b.dtype.count != 1:
            raise KernelError(f"var {name}: {what} must be an int or an integer expression of earlier vars", b)
        for u in b.toposort():
            if u.op is Ops.VAR and u not in self._vars:
                raise KernelError(f"var {name}: {what} uses var {u.arg[0]}, which is not an earlier var of kernel "
                                  f"{self.name}", u)
            if u.op not in (Ops.CONST, Ops.VAR, Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MAX, Ops.CAST):
                raise KernelError(f"var {name}: {what} may only use earlier vars and constants (+ - * // max), found "
                                  f"{u.op.name}", u)
        return b if b.dtype == dtypes.index else b.cast(dtypes.index)

    def param(self, name: str, dtype: DType | Any, size: SymInt | None = None, writable: bool = False,
              shape: tuple[SymInt, ...] | None = None) -> BufferRef:
        """A global buffer of `size` elements (an int or an expression over vars), or of `shape` (row-major, its
        size the product): then `A[i, j]` indexes it and each index is proven inside its dimension at build.
        `dtype` as `ir.accept` takes it (dtypes.float32, np.float32, "float32")."""
        self._claim(name, "param")
        dtype = as_dtype(dtype, f"param {name}")
        if dtype.count != 1 or dtype == dtypes.void:
            raise TypeError(f"param {name}: dtype must be a scalar dtype (e.g. dtypes.float32, np.float32), got "
                            f"{dtype!r}" + ("; a param is an array of scalars: pass "
                                            f"{dtype.scalar()!r}" if dtype.count != 1 else ""))
        dims = None
        if shape is not None:
            if size is not None:
                raise TypeError(f"param {name}: give size or shape, not both")
            if not isinstance(shape, (tuple, list)) or not shape:
                raise TypeError(f"param {name}: shape must be a non-empty tuple of sizes, got {shape!r}")
            dims = tuple(d if d.dtype == dtypes.index else d.cast(dtypes.index) for d in map(as_uop, shape))
            size = dims[0]
            for d in dims[1:]:
                size = size * d
        elif size is None:
            raise TypeError(f"param {name}: a size (or a shape) is required")
        size_u = as_uop(size)
        no_scalars(size_u, f"in the size of param {name}")
        if not size_u.dtype.is_int:
            raise KernelError(f"param {name}: size must be an integer expression", size_u)
        for u in size_u.toposort():
            if u.op not in (Ops.CONST, Ops.VAR, Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX):
                raise KernelError(f"param {name}: size may only use vars and constants, found {u.op.name}", u)
        p = UOp(Ops.PARAM, dtype, (size_u.cast(dtypes.index),), (len(self._params), name, bool(writable)))
        self._params.append(p)
        self._shapes.append(None if dims is None else tuple(_sym(d) for d in dims))
        return BufferRef(self, p, dims)

    def local(self, name: str, dtype: DType | Any, size: int) -> BufferRef:
        """Local (shared) memory, one array per workgroup; order accesses with `barrier()`."""
        self._claim(name, "local")
        dtype = as_dtype(dtype, f"local {name}")
        if not isinstance(size, int) or size <= 0:
            raise ValueError(f"local {name}: size must be a positive int, got {size!r}")
        return BufferRef(self, UOp(Ops.DEFINE_LOCAL, dtype, (), (name, size)))

    def range(self, start_or_end: SymInt, end: SymInt | str | None = None, kind: str = "loop") -> UOp:
        """A loop index: `k.range(end, kind)` is 0 <= i < end, `k.range(start, end, kind)` start <= i < end. kinds:
        global, local, loop, reduce, unroll (unroll needs a constant end). The bounds of a `loop` or `reduce`
        range may use enclosing global, local and loop ranges (triangular loops: `k.range(i + 1, n, "loop")`,
        `k.range(i + 1, kind="reduce")`); other kinds' bounds only vars and constants. An empty range runs nothing."""
        if isinstance(end, str):
            end, kind = None, end
        start, stop = (None, start_or_end) if end is None else (start_or_end, end)
        if kind not in RANGE_KINDS:
            raise ValueError(f"range kind must be one of {RANGE_KINDS}, got {kind!r}")
        bounds = []
        for what, b in (("start", start), ("end", stop)):
            if b is None:
                continue
            bu = as_uop(b)
            no_scalars(bu, f"as a range's {what}")
            if not bu.dtype.is_int or bu.dtype.count != 1:
                raise KernelError(f"range {what} must be an integer", bu)
            if bu.dtype != dtypes.index:
                bu = bu.cast(dtypes.index)
            for u in bu.toposort():
                if u.op is Ops.LOAD:
                    raise KernelError(f"a range's {what} may not depend on a load", u)
                if u.op is Ops.RANGE and (kind not in ("loop", "reduce") or u.arg[1] not in ("global", "local", "loop")):
                    raise KernelError(f"a {kind} range's {what} may only depend on vars and constants"
                                      + (" (a loop or reduce range's bounds may use global, local and loop ranges)"
                                         if kind in ("loop", "reduce") else
                                         "; only loop and reduce ranges may be triangular"), u)
            bounds.append(bu)
        if kind == "unroll" and (bounds[-1].op is not Ops.CONST or start is not None):
            raise KernelError("an unroll range needs a constant end and no start", bounds[-1])
        if start is not None and bounds[0].op is Ops.CONST and bounds[0].arg == 0:
            bounds = bounds[1:]  # k.range(0, n) is k.range(n)
        if len(bounds) == 2 and kind in ("global", "local"):
            # a lane range is 0-based (GPU indices, the CPU split): start + k.range(max(end - start, 0)). The
            # lowering used to read the start as the end (k.range(1, n - 1, "global") ran lane 0 alone)
            lo, hi = bounds
            ext = (UOp.const(dtypes.index, max(hi.arg - lo.arg, 0)) if lo.op is Ops.CONST and hi.op is Ops.CONST
                   else (hi - lo).maximum(0))
            return lo + UOp(Ops.RANGE, dtypes.index, (ext,), (next(self._range_ids), kind))
        return UOp(Ops.RANGE, dtypes.index, tuple(bounds), (next(self._range_ids), kind))

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
        self._last_store[buf.uop] = len(self._stmts)
        self._stmts.append(UOp(Ops.STORE, dtypes.void, srcs, len(self._stmts)))

    def build(self, checked: bool = True, optimize: bool = True) -> Kernel:
        """Verify and freeze the kernel (a KernelError names the bad node and where it was built). `checked=False`
        drops the run-time bounds checks of accesses the verifier cannot prove in bounds (docs/ir.md);
        `optimize=False` keeps the heuristic optimizer's register tiles away from it (ir/optimize.py)."""
        from .params import ParamSpec, VarSpec
        if not self._stmts:
            raise KernelError(f"kernel {self.name} stores nothing")
        sink = UOp(Ops.SINK, dtypes.void, tuple(self._stmts), self.name)
        vars_ = tuple(VarSpec(*v.arg, None, *self._rels.get(v.arg[0], (None, None))) if v.op is Ops.VAR
                      else scalar_spec(v) for v in self._vars)
        if self._dims:
            from .verify import check_dimensions
            check_dimensions(self._dims, vars_)
        params = tuple(ParamSpec(p.arg[1], p.dtype, _sym(p.src[0]), p.arg[2]) for p in self._params)
        k = Kernel(self.name, sink, params, vars_, tuple(self._params), tuple(self._vars), bool(checked),
                   tuple(self._shapes), bool(optimize))  # verifies
        self._built = True
        return k


def _no_float_index(idx: Any, what: str) -> None:
    """A float (a Python float or a float value) used as an index: the error names the param and the user's line,
    as a store to a read-only param does (it said "float constant 1.5 combined with an integer int64 value")."""
    if isinstance(idx, float) or (isinstance(idx, UOp) and idx.dtype.scalar().is_float):
        shown = repr(idx) if isinstance(idx, float) else f"a {idx.dtype.name} value"
        site = user_site()  # where it is used as an index (a shared node's site is where it was first built)
        raise KernelError(f"{what} is {shown}: an index must be an integer (cast it: .cast(dtypes.int32), or index "
                          f"with a range or var)" + (f" (at {site})" if site else ""))


def _sym(u: UOp) -> SymInt:
    return u.arg if u.op is Ops.CONST else u


def scalar_spec(u: UOp) -> VarSpec:
    """The signature entry of a SCALAR node: its dtype, the type it travels as and that type's range."""
    from .params import VarSpec
    wire = scalar_wire(u.dtype)
    lo, hi = (0, 1) if u.dtype.is_bool else (wire.min(), wire.max())
    return VarSpec(u.arg, lo, hi, wire, scalar=u.dtype)


def no_scalars(u: UOp, use: str) -> None:
    """A KernelError when `u` depends on a k.scalar: a scalar is a value, never an index, a size or a bound (the
    verifier refuses it too, in graphs assembled by hand)."""
    from .verify import scalar_use
    scalar_use(u, use)
