"""UOp: one immutable, hash-consed node of a kernel graph, with the operators that build expressions.

Two UOps with the same (op, dtype, src, arg) are the same object, so graphs compare and hash by identity
and common subexpressions are shared for free. The first place in user code that built a node is kept in
`site`, so errors can point at the user's line.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .dtypes import DType, dtypes
from .ops import ALU, Ops

_CACHE: dict[tuple, weakref.ref] = {}  # key -> a weak reference to its one node (WeakValueDictionary's Python-level
# KeyedRef was a tenth of lowering a matmul); a node's death removes its entry (`_gone`)
_LOCAL = threading.local()  # .lowering: no user sites for the nodes lowering makes (`no_sites`)
_TOPO: OrderedDict[UOp, tuple[UOp, ...]] = OrderedDict()  # the last roots' toposorts (UOps are immutable)
_TOPO_NODES = 400_000  # at most this many nodes in _TOPO (it keeps its roots' graphs alive)
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class KernelError(ValueError):
    """A malformed kernel: the message names the node and the line of user code that built it."""

    def __init__(self, message: str, node: UOp | None = None):
        where = f" (built at {node.site})" if node is not None and node.site else ""
        what = f"\n  node: {node.short()}" if node is not None else ""
        super().__init__(f"{message}{where}{what}")
        self.node = node


_OURS: dict[str, bool] = {}  # code file -> inside the devicekit package (abspath per frame was a lowering hot spot)


def _ours(filename: str) -> bool:
    if (r := _OURS.get(filename)) is None:
        r = _OURS[filename] = os.path.abspath(filename).startswith(_PKG_DIR)
    return r


@contextlib.contextmanager
def no_sites():
    """Nodes made inside (by lowering, on this thread) get no user site: finding one walked the stack for every node
    (a sixth of lowering a matmul); a lowered node's error names the user's node it came from anyway."""
    was = getattr(_LOCAL, "lowering", False)
    _LOCAL.lowering = True
    try:
        yield
    finally:
        _LOCAL.lowering = was


def user_site() -> str:
    """file:line of the innermost frame outside the devicekit package (where the user's code is)."""
    return _user_site()


class _Ref(weakref.ref):
    """The weak reference of a node's _CACHE entry, holding its key: one C-level object per node (a closure per
    node, or weakref.KeyedRef's Python __init__, cost half of making a node)."""

    __slots__ = ("key",)


def _gone(ref: _Ref) -> None:
    if _CACHE.get(ref.key) is ref:  # not a newer node's entry
        del _CACHE[ref.key]


def _user_site() -> str:
    f = sys._getframe(2)
    while f is not None and _ours(f.f_code.co_filename):
        f = f.f_back
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else ""


ConstLike = int | float | bool


class UOp:
    __slots__ = ("__weakref__", "_key", "_site", "arg", "dtype", "op", "src")

    op: Ops
    dtype: DType
    src: tuple[UOp, ...]
    arg: Any

    def __new__(cls, op: Ops, dtype: DType = dtypes.void, src: tuple[UOp, ...] = (), arg: Any = None) -> UOp:  # noqa: PYI034
        key = (op, dtype, src, "nan" if isinstance(arg, float) and arg != arg else arg)
        if (ref := _CACHE.get(key)) is not None and (ret := ref()) is not None:
            if not ret._site and not getattr(_LOCAL, "lowering", False):  # first made by lowering, now by a user
                _set_site(ret, _user_site())
            return ret
        self = _object_new(cls)  # the slots' own setters: object.__setattr__ per field was a third of a new node
        _set_op(self, op)
        _set_dtype(self, dtype)
        _set_src(self, src)
        _set_arg(self, arg)
        _set_key(self, None)
        _set_site(self, "" if getattr(_LOCAL, "lowering", False) else _user_site())
        ref = _CACHE[key] = _Ref(self, _gone)
        ref.key = key
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("UOp is immutable")

    def __reduce__(self):
        """The graph as a flat table (sources by position): pickling src tuples recursed once per level of depth."""
        nodes = self.toposort()
        at = {u: n for n, u in enumerate(nodes)}
        return (_from_table, (tuple((u.op, u.dtype, tuple(at[s] for s in u.src), u.arg) for u in nodes),))

    def __repr__(self) -> str:
        return self.short()

    def short(self) -> str:
        srcs = ", ".join(s.op.name for s in self.src)
        arg = "" if self.arg is None else f", arg={self.arg!r}"
        return f"UOp({self.op.name}, {self.dtype}{arg}, src=({srcs}))"

    # identity semantics: `==` is structural identity (hash-consed); use .eq()/.ne() to build comparisons
    __hash__ = object.__hash__

    @property
    def site(self) -> str:
        return self._site

    @property
    def key(self) -> bytes:
        """A stable content hash of the whole graph (for caches that outlive the process)."""
        if self._key is None:  # sources first, in one pass: a 100,000-deep chain recursed past Python's limit
            import hashlib
            for u in self.toposort(stop=lambda x: x._key is not None):
                h = hashlib.sha256(repr((u.op.name, u.dtype.name, u.dtype.count, _arg_repr(u.arg))).encode())
                for s in u.src:
                    h.update(s._key)
                _set_key(u, h.digest())
        return self._key

    # ---- graph helpers
    def toposort(self, stop: Callable[[UOp], bool] | None = None) -> list[UOp]:
        """Every node reachable from self, sources before users, sources left to right (an explicit stack: graphs
        as deep as the user builds them). `stop(u)` true: u and what is below it are left out. The last few roots'
        orders are kept (lowering sorts the same sink several times)."""
        if stop is None and (hit := _TOPO.get(self)) is not None:
            with contextlib.suppress(KeyError):  # another thread may have evicted it since
                _TOPO.move_to_end(self)
            return list(hit)
        order: list[UOp] = []
        if stop is not None and stop(self):
            return order
        seen = {self}
        stack = [(self, iter(self.src))]
        push, pop, add = stack.append, stack.pop, seen.add
        while stack:
            u, it = stack[-1]
            for s in it:
                if s not in seen:
                    add(s)
                    if stop is not None and stop(s):
                        continue
                    push((s, iter(s.src)))
                    break
            else:
                pop()
                order.append(u)
        if stop is None and 64 < len(order) <= _TOPO_NODES // 8:
            _TOPO[self] = tuple(order)
            while len(_TOPO) > 32 or sum(map(len, _TOPO.values())) > _TOPO_NODES:  # a bound on what it keeps alive
                _TOPO.popitem(last=False)
        return order

    def replace(self, **kw: Any) -> UOp:
        return UOp(kw.get("op", self.op), kw.get("dtype", self.dtype), kw.get("src", self.src), kw.get("arg", self.arg))

    # ---- constructors
    @staticmethod
    def const(dtype: DType, value: ConstLike) -> UOp:
        return UOp(Ops.CONST, dtype, (), normalize_const(value, dtype))

    def const_like(self, value: ConstLike) -> UOp:
        return UOp.const(self.dtype, value)

    def alu(self, op: Ops, *others: UOp | ConstLike) -> UOp:
        srcs = (self, *(o if isinstance(o, UOp) else _weak_const(o, self.dtype) for o in others))
        return make_alu(op, srcs)

    # ---- python operators build ALU nodes (python scalars take the other operand's dtype)
    def __add__(self, x): return binop(Ops.ADD, self, x)
    def __radd__(self, x): return binop(Ops.ADD, x, self)
    def __sub__(self, x): return binop(Ops.SUB, self, x)
    def __rsub__(self, x): return binop(Ops.SUB, x, self)
    def __mul__(self, x): return binop(Ops.MUL, self, x)
    def __rmul__(self, x): return binop(Ops.MUL, x, self)
    def __truediv__(self, x): return binop(Ops.FDIV, self, x)
    def __rtruediv__(self, x): return binop(Ops.FDIV, x, self)
    def __floordiv__(self, x): return binop(Ops.IDIV, self, x)
    def __rfloordiv__(self, x): return binop(Ops.IDIV, x, self)
    def __mod__(self, x): return binop(Ops.MOD, self, x)
    def __rmod__(self, x): return binop(Ops.MOD, x, self)
    def __and__(self, x): return binop(Ops.AND, self, x)
    def __rand__(self, x): return binop(Ops.AND, x, self)
    def __or__(self, x): return binop(Ops.OR, self, x)
    def __ror__(self, x): return binop(Ops.OR, x, self)
    def __xor__(self, x): return binop(Ops.XOR, self, x)
    def __rxor__(self, x): return binop(Ops.XOR, x, self)
    def __lshift__(self, x): return binop(Ops.SHL, self, x)
    def __rshift__(self, x): return binop(Ops.SHR, self, x)
    def __lt__(self, x): return binop(Ops.CMPLT, self, x)
    def __gt__(self, x): return binop(Ops.CMPLT, x, self)
    def __le__(self, x): return binop(Ops.CMPLT, x, self).logical_not()
    def __ge__(self, x): return binop(Ops.CMPLT, self, x).logical_not()
    def __neg__(self): return make_alu(Ops.NEG, (self,))
    def __invert__(self): return self.logical_not() if self.dtype.scalar() == dtypes.bool else binop(Ops.XOR, self, -1)

    def eq(self, x) -> UOp: return binop(Ops.CMPEQ, self, x)
    def ne(self, x) -> UOp: return binop(Ops.CMPNE, self, x)
    def logical_not(self) -> UOp: return binop(Ops.CMPNE, self, True)
    def maximum(self, x) -> UOp: return binop(Ops.MAX, self, x)
    def minimum(self, x) -> UOp:
        """(x < self) ? x : self, MAX's mirror (a NaN in self propagates, one in x does not). Not -max(-a, -b):
        negation wraps for unsigned ints and INT_MIN (min(0u, 5u) came out 5)."""
        x = as_uop(x, self.dtype)
        return make_alu(Ops.WHERE, (binop(Ops.CMPLT, x, self), x, self))

    def __abs__(self) -> UOp:
        """|x|: the sign bit cleared for floats (abs(-0.0) is 0.0, NaN stays NaN), x itself for unsigned ints,
        (x < 0) ? -x : x for signed ints (abs(INT_MIN) wraps to INT_MIN, as in C and numpy)."""
        s = self.dtype.scalar()
        if s.is_bool:
            raise KernelError("abs() of a bool value", self)
        if s.is_float:
            bits = {2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[s.itemsize]
            bt = bits if self.dtype.count == 1 else bits.vec(self.dtype.count)
            return binop(Ops.AND, self.bitcast(bt), (1 << (8 * s.itemsize - 1)) - 1).bitcast(self.dtype)
        if s.is_unsigned:
            return self
        return make_alu(Ops.WHERE, (binop(Ops.CMPLT, self, 0), -self, self))

    def __pow__(self, n) -> UOp:
        """x ** n for a Python int n: repeated multiplication by squaring (exact for ints; for floats within a few
        ulps of a correctly rounded pow); n < 0 only for floats (1 / x**-n). For a non-integer exponent write
        ir.exp2(y * ir.log2(x))."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise KernelError(f"x ** {n!r}: only a Python int exponent is supported; for a float exponent write "
                              "ir.exp2(y * ir.log2(x))", self)
        if n < 0:
            if not self.dtype.scalar().is_float:
                raise KernelError(f"x ** {n}: a negative exponent of an integer {self.dtype} value", self)
            return binop(Ops.FDIV, as_uop(1.0, self.dtype), self ** -n)
        result, base = None, self
        while n:
            if n & 1:
                result = base if result is None else result * base
            n >>= 1
            if n:
                base = base * base
        return result if result is not None else as_uop(1, self.dtype)

    def __bool__(self):
        raise TypeError("a UOp has no truth value while building a kernel: use ir.where(cond, a, b), .eq() or .ne()")

    # ---- reductions over a range
    def sum(self, *ranges: UOp) -> UOp: return _reduce(self, Ops.ADD, ranges)
    def max(self, *ranges: UOp) -> UOp: return _reduce(self, Ops.MAX, ranges)
    def prod(self, *ranges: UOp) -> UOp: return _reduce(self, Ops.MUL, ranges)

    # ---- conversions
    def cast(self, dtype: DType) -> UOp:
        if dtype.count != self.dtype.count:
            if self.dtype.count == 1 and dtype.count > 1:
                raise KernelError(f"cast {self.dtype} -> {dtype}: use ir.vectorize to build a vector", self)
            dtype = dtype.scalar().vec(self.dtype.count) if self.dtype.count > 1 else dtype
        return self if dtype == self.dtype else UOp(Ops.CAST, dtype, (self,))

    def bitcast(self, dtype: DType) -> UOp:
        if dtype.nbytes != self.dtype.nbytes:
            raise KernelError(f"bitcast {self.dtype} -> {dtype} changes the size ({self.dtype.nbytes} vs {dtype.nbytes} bytes)", self)
        return self if dtype == self.dtype else UOp(Ops.BITCAST, dtype, (self,))

    def gep(self, lane: int) -> UOp:
        if self.dtype.count == 1:
            raise KernelError(f"gep on a scalar {self.dtype}", self)
        if not 0 <= lane < self.dtype.count:
            raise KernelError(f"lane {lane} out of range for {self.dtype}", self)
        return UOp(Ops.GEP, self.dtype.scalar(), (self,), lane)

    def __getitem__(self, lane: int) -> UOp:
        if not isinstance(lane, int):
            raise KernelError("only vector values can be indexed (by an int lane); index buffers through their handle", self)
        return self.gep(lane)

    # ---- symbolic bounds (for the verifier and for launch-size arithmetic)
    @property
    def vmin(self) -> int | float:
        return bounds(self)[0]

    @property
    def vmax(self) -> int | float:
        return bounds(self)[1]


SymInt = int | UOp
_object_new = object.__new__
_set_op, _set_dtype, _set_src, _set_arg = UOp.op.__set__, UOp.dtype.__set__, UOp.src.__set__, UOp.arg.__set__  # type: ignore[attr-defined]
_set_key, _set_site = UOp._key.__set__, UOp._site.__set__  # type: ignore[attr-defined]


def _from_table(table: tuple) -> UOp:
    """UOp.__reduce__'s inverse: rebuild (hash-consed) in order; the last node is the root."""
    built: list[UOp] = []
    for op, dtype, src, arg in table:
        built.append(UOp(op, dtype, tuple(built[i] for i in src), arg))
    return built[-1]


def _arg_repr(arg: Any) -> str:
    if isinstance(arg, Ops):
        return arg.name
    if isinstance(arg, tuple):
        return "(" + ",".join(_arg_repr(a) for a in arg) + ")"
    if isinstance(arg, float):
        return arg.hex() if math.isfinite(arg) else repr(arg)
    return repr(arg)


def normalize_const(value: ConstLike, dtype: DType) -> ConstLike:
    s = dtype.scalar()
    if s.is_bool:
        return bool(value)
    if s.is_int:
        if isinstance(value, float):
            raise KernelError(f"float constant {value} used where {dtype} is expected: cast explicitly")
        v = int(value)
        lo, hi = s.min(), s.max()
        if not lo <= v <= hi:
            v = (v - lo) % (hi - lo + 1) + lo  # two's-complement wrap, as C does for unsigned; stated for signed
        return v
    if s.is_float:
        return float(value)
    raise KernelError(f"no constants of type {dtype}")


def _weak_const(x: ConstLike, like: DType) -> UOp:
    if isinstance(x, bool) and not like.scalar().is_bool:
        raise KernelError(f"bool constant {x} used with a {like} value")
    if isinstance(x, float) and like.scalar().is_int:
        raise KernelError(f"float constant {x} combined with an integer {like} value: cast the value first")
    if not isinstance(x, (int, float, bool)):
        raise KernelError(f"cannot use {type(x).__name__} {x!r} in a kernel expression")
    c = UOp.const(like.scalar(), x)
    return UOp(Ops.VECTORIZE, like, (c,) * like.count) if like.count > 1 else c


def as_uop(x: Any, like: DType | None = None) -> UOp:
    if isinstance(x, UOp):
        return x
    if like is not None:
        return _weak_const(x, like)
    if isinstance(x, bool):
        return UOp.const(dtypes.bool, x)
    if isinstance(x, int):
        return UOp.const(dtypes.index, x)
    if isinstance(x, float):
        return UOp.const(dtypes.float32, x)
    raise KernelError(f"cannot use {type(x).__name__} {x!r} in a kernel expression")


def binop(op: Ops, a: Any, b: Any) -> UOp:
    if not isinstance(a, UOp) and not isinstance(b, UOp):
        raise KernelError(f"{op.name} of two python values")
    a = as_uop(a, b.dtype if isinstance(b, UOp) else None)
    b = as_uop(b, a.dtype)
    return make_alu(op, (a, b))


def make_alu(op: Ops, srcs: tuple[UOp, ...]) -> UOp:
    """Type-check and build an ALU node; the result dtype follows the C-like rules in docs/ir.md."""
    from .typing import alu_dtype
    return UOp(op, alu_dtype(op, srcs), srcs)


def _reduce(x: UOp, op: Ops, ranges: tuple[UOp, ...]) -> UOp:
    if not ranges:
        raise KernelError(f"{op.name.lower()} reduction needs at least one range", x)
    for r in ranges:
        if not isinstance(r, UOp) or r.op is not Ops.RANGE:
            raise KernelError(f"reductions take ranges built with k.range(...), got {r!r}", x)
    return UOp(Ops.REDUCE, x.dtype, (x, *ranges), op)


def bounds(u: UOp) -> tuple[Any, Any]:
    """Conservative [min, max] of an integer-valued node, from range ends and var declarations."""
    from .typing import value_bounds
    return value_bounds(u)


def memo_order(root: UOp, memo: dict, leaf: Callable[[UOp], bool] | None = None) -> list[UOp]:
    """The nodes below `root` (itself included) that a memoised analysis still has to compute, sources first: the
    iterative form of `f(u) = ... f(u.src[i]) ...` (recursion broke at a few hundred levels). Nodes in `memo` are not
    entered; `leaf(u)` true: u is computed but its sources are not (an analysis that does not look below it)."""
    if root in memo:
        return []
    order: list[UOp] = []
    seen: set[UOp] = set()
    stack: list[tuple[UOp, bool]] = [(root, False)]
    pop, push, add = stack.pop, stack.append, seen.add
    while stack:
        u, done = pop()
        if done:
            order.append(u)
            continue
        if u in seen or u in memo:
            continue
        add(u)
        push((u, True))
        if (leaf is None or not leaf(u)) and u.src:
            stack.extend([(s, False) for s in reversed(u.src) if s not in seen and s not in memo])
    return order


def is_alu(u: UOp) -> bool:
    return u.op in ALU


def sym_eval(x: SymInt, vals: dict[str, int]) -> int:
    """Evaluate a symbolic int (an int, or an expression over VARs) with the given var values."""
    if isinstance(x, int):
        return x
    memo: dict[int, int] = {}
    for u in x.toposort():
        if u.op is Ops.CONST:
            v = u.arg
        elif u.op is Ops.VAR:
            try:
                v = int(vals[u.arg[0]])
            except KeyError:
                raise KeyError(f"no value given for var {u.arg[0]!r}") from None
        else:
            s = [memo[id(y)] for y in u.src]
            v = _SYM_ALU[u.op](*s)
        memo[id(u)] = v
    return memo[id(x)]


def _cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _cmod(a: int, b: int) -> int:
    return a - b * _cdiv(a, b)


_SYM_ALU = {
    Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b,
    Ops.IDIV: _cdiv, Ops.MOD: _cmod, Ops.MAX: max, Ops.NEG: lambda a: -a,
    Ops.CMPLT: lambda a, b: a < b, Ops.WHERE: lambda c, a, b: a if c else b,
}
