"""Structural checks of a kernel graph: arity, argument shapes and operand kinds of every node.

The builder only makes well-shaped nodes, but a Kernel can be assembled from UOps directly (a frontend, a
transform, a fuzzer). `verify` runs these checks first, so such a graph gets a KernelError naming the node
instead of an IndexError or KeyError deep in lowering, or silent garbage from the reference.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .dtypes import DType, dtypes
from .ops import BINARY, RANGE_KINDS, TERNARY, UNARY, Ops
from .uop import KernelError, UOp

if TYPE_CHECKING:
    from .builder import Kernel

_LINEAR_ONLY = {Ops.SPECIAL, Ops.ENDRANGE, Ops.DEFINE_ACC, Ops.ASSIGN, Ops.IF, Ops.ENDIF}
_NOT_VALUES = {Ops.SINK, Ops.STORE, Ops.BARRIER, Ops.INDEX, Ops.PARAM, Ops.DEFINE_LOCAL}
_ARITY = {**{o: 1 for o in UNARY}, **{o: 2 for o in BINARY}, **{o: 3 for o in TERNARY}}


def _fail(msg: str, u: UOp) -> None:
    raise KernelError(f"malformed {u.op.name} node: {msg}", u)


def _const_ok(value: object, dt: DType) -> bool:
    if dt.count != 1:
        return False
    if dt.is_bool:
        return isinstance(value, bool)
    if dt.is_int:
        return isinstance(value, int) and not isinstance(value, bool) and dt.min() <= value <= dt.max()
    return dt.is_float and isinstance(value, float)


def _value(u: UOp, s: UOp) -> None:
    if s.op in _NOT_VALUES or s.dtype == dtypes.void:
        _fail(f"operand {s.op.name} is not a value", u)


def check_structure(k: Kernel, nodes: list[UOp]) -> None:
    """Raise KernelError at the first node whose shape is wrong (see the module docstring)."""
    sink = k.sink
    if sink.op is not Ops.SINK:
        raise KernelError(f"a kernel's root must be a SINK, got {sink.op.name}", sink)
    if not sink.src:
        raise KernelError(f"kernel {k.name} stores nothing", sink)
    for s in sink.src:
        if s.op not in (Ops.STORE, Ops.BARRIER):
            _fail(f"a SINK holds STOREs and BARRIERs, not {s.op.name}", sink)
    if len(k.params) != len(k.param_uops) or len(k.vars) != len(k.var_uops):
        raise KernelError(f"kernel {k.name}: signature ({len(k.params)} params, {len(k.vars)} vars) does not match "
                          f"its param/var nodes ({len(k.param_uops)}, {len(k.var_uops)})")
    for slot, (p, pu) in enumerate(zip(k.params, k.param_uops)):
        if pu.op is not Ops.PARAM or pu.arg[0] != slot or pu.arg[1] != p.name or pu.dtype != p.dtype:
            raise KernelError(f"kernel {k.name}: param {slot} ({p.name}) does not match its node {pu.short()}", pu)
        if pu.arg[2] is not p.writable:
            raise KernelError(f"kernel {k.name}: param {p.name} is {'' if p.writable else 'not '}writable in the "
                              f"signature but {'' if pu.arg[2] else 'not '}in its node", pu)
        size = pu.src[0] if len(pu.src) == 1 else None
        if size is None or not (size is p.size or (size.op is Ops.CONST and size.arg == p.size)):
            raise KernelError(f"kernel {k.name}: param {p.name}'s size in the signature ({p.size}) is not the size "
                              f"of its node", pu)
    for v, vu in zip(k.vars, k.var_uops):
        if v.scalar is not None:
            if vu.op is not Ops.SCALAR or vu.arg != v.name or vu.dtype != v.scalar:
                raise KernelError(f"kernel {k.name}: scalar {v.name} does not match its node {vu.short()}", vu)
        elif vu.op is not Ops.VAR or vu.arg != (v.name, v.lo, v.hi):
            raise KernelError(f"kernel {k.name}: var {v.name} does not match its node {vu.short()}", vu)
    for u in nodes:
        op, src, n = u.op, u.src, len(u.src)
        if op in _LINEAR_ONLY:
            _fail("this op exists only in the linear form (after lowering), not in a kernel graph", u)
        if op in _ARITY:
            if n != _ARITY[op]:
                _fail(f"takes {_ARITY[op]} operand(s), has {n}", u)
            for s in src:
                _value(u, s)
        elif op is Ops.SINK:
            if u is not sink:
                _fail("only the root may be a SINK", u)
        elif op is Ops.PARAM:
            if n != 1 or not isinstance(u.arg, tuple) or len(u.arg) != 3 or not src[0].dtype.is_int:
                _fail("needs arg (slot, name, writable) and one integer size operand", u)
        elif op is Ops.VAR:
            if n or not isinstance(u.arg, tuple) or len(u.arg) != 3 or u.dtype != dtypes.index:
                _fail("needs arg (name, lo, hi), no operands, dtype index", u)
            if not all(_const_ok(b, dtypes.index) for b in u.arg[1:]) or u.arg[1] > u.arg[2]:
                _fail(f"bounds {u.arg[1]!r}..{u.arg[2]!r} must be ints of its dtype with lo <= hi", u)
        elif op is Ops.SCALAR:
            if n or not isinstance(u.arg, str) or u.dtype.count != 1 or u.dtype == dtypes.void:
                _fail("needs arg (its name), no operands and a scalar dtype", u)
        elif op is Ops.CONST:
            if n or not _const_ok(u.arg, u.dtype):
                _fail(f"value {u.arg!r} is not a {u.dtype} constant", u)
        elif op is Ops.RANGE:
            if n not in (1, 2) or any(not x.dtype.is_int or x.dtype.count != 1 for x in src):
                _fail("needs one or two scalar integer operands (its end, or its start and end)", u)
            if not isinstance(u.arg, tuple) or len(u.arg) != 2 or u.arg[1] not in RANGE_KINDS:
                _fail(f"arg must be (id, kind) with kind in {RANGE_KINDS}, got {u.arg!r}", u)
        elif op is Ops.DEFINE_LOCAL:
            if n or not isinstance(u.arg, tuple) or len(u.arg) != 2 or not isinstance(u.arg[1], int) or u.arg[1] <= 0:
                _fail("needs arg (name, size > 0) and no operands", u)
        elif op is Ops.INDEX:
            if n not in (2, 3):
                _fail(f"takes (buffer, index[, gate]), has {n} operands", u)
            if src[0].op not in (Ops.PARAM, Ops.DEFINE_LOCAL):
                _fail(f"only params and local arrays can be indexed, not {src[0].op.name}", u)
            if u.dtype != src[0].dtype:
                _fail(f"dtype {u.dtype} differs from its buffer's {src[0].dtype}", u)
            if n == 3 and src[2].dtype != dtypes.bool:
                _fail(f"the gate must be a bool value, got {src[2].dtype}", u)
            if u.arg not in (None, "unchecked"):
                _fail(f"arg must be None or 'unchecked', got {u.arg!r}", u)
        elif op is Ops.LOAD:
            body = src[:-1] if n and src[-1].op is Ops.BARRIER else src
            if not body or body[0].op is not Ops.INDEX:
                _fail("needs an INDEX operand", u)
            gated = len(body[0].src) == 3
            if len(body) != 1 + gated or (gated and body[1].dtype != u.dtype):
                _fail("a gated load takes (index, default of the load's dtype), an ungated one (index)", u)
            if u.dtype != body[0].dtype:
                _fail(f"dtype {u.dtype} differs from its buffer's {body[0].dtype}", u)
            buf = body[0].src[0]
            if buf.op is Ops.PARAM and isinstance(buf.arg, tuple) and len(buf.arg) == 3 and buf.arg[2]:
                a = u.arg
                if not (isinstance(a, tuple) and len(a) == 3 and a[0] == "after"
                        and all(isinstance(x, int) and not isinstance(x, bool) for x in a[1:])):
                    _fail("a load of a writable param needs its build point, arg ('after', last store, statement)"
                          " (BufferRef.load sets it; docs/ir.md, Memory order)", u)
        elif op is Ops.STORE:
            body = src[:-1] if n and src[-1].op is Ops.BARRIER else src
            if len(body) != 2 or body[0].op is not Ops.INDEX:
                _fail("takes (INDEX, value)", u)
            _value(u, body[1])
        elif op is Ops.BARRIER:
            if any(s.op is not Ops.STORE for s in src):
                _fail("orders STOREs only", u)
        elif op is Ops.REDUCE:
            if n < 2:
                _fail("takes (value, range, ...)", u)
            _value(u, src[0])
            if u.dtype != src[0].dtype:
                _fail(f"dtype {u.dtype} differs from its value's {src[0].dtype}", u)
        elif op is Ops.VECTORIZE:
            if not 2 <= n <= 16 or any(s.dtype != src[0].dtype or s.dtype.count != 1 for s in src):
                _fail("takes 2-16 scalar lanes of one dtype", u)
            for s in src:
                _value(u, s)
            if u.dtype != src[0].dtype.vec(n):
                _fail(f"dtype must be {src[0].dtype.vec(n)}, is {u.dtype}", u)
        elif op is Ops.GEP:
            if n != 1 or src[0].dtype.count == 1 or not isinstance(u.arg, int) \
                    or not 0 <= u.arg < src[0].dtype.count or u.dtype != src[0].dtype.scalar():
                _fail("takes one vector operand and a lane within it, and has the vector's scalar dtype", u)
        elif op in (Ops.CAST, Ops.BITCAST):
            if n != 1:
                _fail("takes one operand", u)
            _value(u, src[0])
            if op is Ops.BITCAST and u.dtype.nbytes != src[0].dtype.nbytes:
                _fail(f"changes the size ({src[0].dtype} -> {u.dtype})", u)
        else:
            _fail("unknown op in a kernel graph", u)
