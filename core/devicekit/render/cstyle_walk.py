"""The C-style base's walk: the linear form (docs/linear-form.md) in one pass, each op a line or an inline
expression, through the language hooks of `CStyleRenderer` (devicekit.render.cstyle). One job, apart from the
hooks: `CStyleRenderer.render_linear` calls `walk(renderer, lk, name)`, and a renderer changes its language through
the hooks, never here. Also `KernelParam`, the structured signature the walk hands `render_kernel`.

Inlining: a pure op with one user is inlined into it (`_INLINABLE`) unless a side effect lies between them
(`_ORDERED`), its user repeats operands (`repeats_operands`) or the expression would nest past `MAX_INLINE_DEPTH`;
every other value gets a numbered name, counted in order, so equal kernels give equal source (the cache key)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..ir.dtypes import DType, dtypes
from ..ir.ops import Ops
from ..ir.uop import KernelError, UOp

if TYPE_CHECKING:
    from .cstyle import CStyleRenderer

__all__ = ["MAX_INLINE_DEPTH", "KernelParam", "walk"]

# side-effecting ops: an expression is never inlined across one of these
_ORDERED = frozenset({Ops.STORE, Ops.ASSIGN, Ops.RANGE, Ops.ENDRANGE, Ops.IF, Ops.ENDIF, Ops.BARRIER,
                      Ops.DEFINE_ACC, Ops.DEFINE_LOCAL})
# an inlined expression nests at most this deep (then it gets a name): a 2,000-step chain inlined whole was one
# line of 2,000 nested parentheses, past clang's bracket depth (256) and slow to compile; each level adds <= 4
MAX_INLINE_DEPTH = 40
# ops whose value may be inlined into its single user (pure, cheap to re-read)
_INLINABLE = frozenset({Ops.NEG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.TRUNC, Ops.ADD, Ops.SUB,
                        Ops.MUL, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND,
                        Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.WHERE, Ops.MULACC, Ops.CAST, Ops.BITCAST, Ops.GEP})


@dataclass(frozen=True)
class KernelParam:
    """One argument of the kernel signature as `render_kernel` receives it: structured, so a renderer may spell it
    its own way (OpenCL passes a buffer as a base pointer plus a byte offset, for views that sub-buffers cannot
    express) instead of rewriting a rendered string.

    `name` is how the body spells it (`dku_a`, `core_start`); `kind` is "buffer", "var" (an int64 var or a k.scalar,
    in `ProgramSpec.vars` order) or "split" (`core_start` / `core_end`, when `core_split` applies); `dtype` is a
    buffer's storage element dtype (bfloat16 params arrive as uint16 bits), int64 for vars and a scalar's wire dtype
    (`ir.dtypes.scalar_wire`); `writable` is the
    buffer's; `user_name` is the ProgramSpec's name; `index` the position in `ProgramSpec.params` or `.vars`;
    `decl` the base's rendering (`render_param` / `render_var` / `render_scalar`), which the default `render_kernel` joins."""

    name: str
    kind: str
    dtype: DType
    writable: bool = False
    user_name: str = ""
    index: int = 0
    decl: str = ""

    def __str__(self) -> str:
        return self.decl


def walk(rend: CStyleRenderer, lk, name: str) -> str:
    """The source of linear kernel `lk` with entry symbol `name`, in `rend`'s language (its hooks)."""
    uops = list(lk.uops)
    pos = {u: i for i, u in enumerate(uops)}
    uses: dict[UOp, list[int]] = {}
    for i, u in enumerate(uops):
        for s in u.src:
            uses.setdefault(s, []).append(i)
    epoch, e = [], 0
    for u in uops:
        epoch.append(e)
        e += u.op in _ORDERED
    r: dict = {}  # uop -> expression, or a list of lane expressions for a scalarized vector
    index_parts: dict = {}  # INDEX uop -> (buf, idx, gate)
    ids: dict = {}  # RANGE / DEFINE_ACC -> its local name
    nest: dict = {}  # uop -> how deep its inlined expression nests (a named value: absent, 0)
    used: set[DType] = set()
    lines: list[str] = []
    depth = 1
    counter = 0

    def emit(s: str) -> None:
        lines.append("  " * depth + s)

    def lanes_of(dt: DType) -> bool:
        return dt.count > 1 and not rend.native_vector(dt)

    def lane(u, k: int) -> str:
        """Lane k of u's value: a scalarized vector's k-th expression, a native vector's GEP, a scalar itrend."""
        x = r[u]
        if isinstance(x, list):
            return x[k]
        return rend.render_gep(x, k, u.dtype) if u.dtype.count > 1 else x

    def read_per_lane(user) -> bool:
        """Whether `user` reads its vector operands lane by lane: its result or an operand is scalarized (a
        value is scalarized exactly when its dtype is: `lanes_of`)."""
        if user.op in (Ops.VECTORIZE, Ops.GEP, Ops.INDEX, Ops.LOAD):
            return False
        if user.op is Ops.STORE:
            return lanes_of(user.src[1].dtype)
        return lanes_of(user.dtype) or any(lanes_of(s.dtype) for s in user.src)

    def inline_ok(u) -> bool:
        us = uses.get(u, [])
        if len(us) != 1 or u.op not in _INLINABLE:
            return False
        user = uops[us[0]]
        if user.op is Ops.VECTORIZE and lanes_of(user.dtype):  # its lanes are read where it is used
            return False
        if u.dtype.count > 1 and not lanes_of(u.dtype) and read_per_lane(user):  # one GEP a lane: name it once
            return False
        # an address is used where its LOAD/STORE reads it: compare against those positions
        at = uses.get(user, [us[0]]) if user.op is Ops.INDEX else us
        return all(epoch[pos[u]] == epoch[i] for i in at) and user.op not in rend.repeats_operands

    def define(u, expr, prefix: str) -> None:
        nonlocal counter
        d = 1 + max((nest.get(s, 0) for s in u.src), default=0)
        if d <= MAX_INLINE_DEPTH and inline_ok(u):
            r[u] = expr
            nest[u] = d
            return
        names = []
        for x in (expr if isinstance(expr, list) else [expr]):
            var = f"{prefix}{counter}"
            counter += 1
            emit(f"{rend.render_dtype(u.dtype.scalar() if isinstance(expr, list) else u.dtype)} {var} = {x};")
            names.append(var)
        r[u] = names if isinstance(expr, list) else names[0]

    def per_lane(u, fn):
        """Render u lane by lane when it (or an operand) is a scalarized vector; False if it is not. A value is
        scalarized exactly when its dtype is (`lanes_of`): a scalarized result is the list of lane expressions,
        a native vector result computed from scalarized operands is built back from its lanes (VECTORIZE), and
        a native vector operand of a lane-wise op is read one lane at a time (`lane`: its GEP)."""
        n = max([u.dtype.count] + [s.dtype.count for s in u.src])
        if n == 1 or not (lanes_of(u.dtype) or any(isinstance(r.get(s), list) for s in u.src)):
            return False
        lanes = [fn(k) for k in range(n)]
        return lanes if lanes_of(u.dtype) else rend.render_vectorize(lanes, u.dtype)

    param_names = {p.name: rend.user_name(p.name) for p in lk.params}
    var_names = {v.name: rend.user_name(v.name) for v in lk.vars}  # not the lowering's core_start/core_end
    # the PARAM uops carry the storage dtype after lowering (bfloat16 emulated as uint16 bits)
    stored = {u.arg[0]: u.dtype for u in uops if u.op is Ops.PARAM}
    pdt = [stored.get(i, p.dtype) for i, p in enumerate(lk.params)]
    sig = [KernelParam(param_names[p.name], "buffer", dt, p.writable, p.name, i,
                       rend.render_param(param_names[p.name], dt, p.writable))
           for i, (p, dt) in enumerate(zip(lk.params, pdt))]
    sig += [KernelParam(var_names[v.name], "var", dtypes.int64, False, v.name, j, rend.render_var(var_names[v.name]))
            if v.scalar is None else
            KernelParam(var_names[v.name], "var", v.dtype, False, v.name, j,
                        rend.render_scalar(var_names[v.name], v.dtype))
            for j, v in enumerate(lk.vars)]
    if lk.core_split is not None:
        sig += [KernelParam(n, "split", dtypes.int64, False, n, j, rend.render_var(n))
                for j, n in enumerate(("core_start", "core_end"))]
    used.update(pdt)
    used.update(v.dtype for v in lk.vars if v.scalar is not None)  # an unused scalar's type is declared too

    for u in uops:
        op, dt, src = u.op, u.dtype, u.src
        if dt != dtypes.void and op not in (Ops.PARAM,):
            used.add(dt.scalar() if lanes_of(dt) else dt)
        if op is Ops.PARAM:
            r[u] = param_names.get(u.arg[1]) or rend.user_name(u.arg[1])
        elif op is Ops.VAR:
            r[u] = var_names.get(u.arg[0], u.arg[0])
        elif op is Ops.SCALAR:
            r[u] = var_names[u.arg]
        elif op is Ops.CONST:
            r[u] = rend.render_const(u.arg, dt)
        elif op is Ops.SPECIAL:
            nm, axis = u.arg
            if not 0 <= axis < 3:  # the lowering makes at most 3; CUDA, OpenCL, MSL and WGSL have no more
                raise KernelError(f"{type(rend).__name__}: GPU launches have 3 axes; {nm} asks for axis {axis}")
            emit(f"{rend.render_dtype(dtypes.index)} {nm} = {rend.render_special(nm, axis, r[src[0]])};")
            r[u] = nm
        elif op is Ops.RANGE:
            v = f"ridx{len(ids)}"  # numbered here, in order: the source is the cache key, keep it stable
            ids[u] = v
            emit(f"for ({rend.render_dtype(dtypes.index)} {v} = {r[src[0]]}; {v} < {r[src[1]]}; {v}++) {{")
            r[u] = v
            depth += 1
        elif op in (Ops.ENDRANGE, Ops.ENDIF):
            depth -= 1
            emit("}")
        elif op is Ops.IF:
            emit(f"if ({r[src[0]]}) {{")
            depth += 1
        elif op is Ops.DEFINE_ACC:
            v = f"acc{len(ids)}"
            ids[u] = v
            if lanes_of(dt):
                r[u] = [f"{v}_{k}" for k in range(dt.count)]
                for k, x in enumerate(r[u]):
                    emit(f"{rend.render_dtype(dt.scalar())} {x} = {lane(src[0], k)};")
            else:
                emit(f"{rend.render_dtype(dt)} {v} = {r[src[0]]};")
                r[u] = v
        elif op is Ops.ASSIGN:
            if isinstance(r[src[0]], list):  # compute every lane before writing any
                vals = [lane(src[1], k) for k in range(dt.count)]
                accs = r[src[0]]
                # lane k's new value may read other lanes (a shuffle): then compute all before writing any
                if any(re.search(rf"\b{accs[j]}\b", x) for k, x in enumerate(vals) for j in range(len(accs))
                       if j != k):
                    tmps = [f"{r[src[0]][k]}_n{counter}" for k in range(dt.count)]
                    counter += 1
                    for t, x in zip(tmps, vals):
                        emit(f"{rend.render_dtype(dt.scalar())} {t} = {x};")
                    vals = tmps
                for a, x in zip(r[src[0]], vals):
                    emit(f"{a} = {x};")
            else:
                emit(f"{r[src[0]]} = {r[src[1]]};")
            r[u] = r[src[0]]
        elif op is Ops.DEFINE_LOCAL:
            v = rend.user_name(u.arg[0])
            emit(rend.render_local(v, dt, u.arg[1]))
            r[u] = v
        elif op is Ops.INDEX:
            index_parts[u] = (r[src[0]], r[src[1]], r[src[2]] if len(src) > 2 else None)
            nest[u] = max(nest.get(s, 0) for s in src)
        elif op is Ops.LOAD:
            buf, idx, gate = index_parts[src[0]]
            if lanes_of(dt):
                exprs = [rend.render_load(buf, f"{idx}+{k}" if k else idx, dt.scalar()) for k in range(dt.count)]
                if gate is not None:
                    exprs = [f"({gate}?{x}:{lane(src[1], k)})" for k, x in enumerate(exprs)]
                define(u, exprs, "val")
            else:
                expr = rend.render_load(buf, idx, dt)
                if gate is not None:
                    expr = f"({gate}?{expr}:{r[src[1]]})"
                define(u, expr, "val")
        elif op is Ops.STORE:
            buf, idx, gate = index_parts[src[0]]
            vdt = src[1].dtype
            if isinstance(r[src[1]], list):
                sts = [rend.render_store(buf, f"{idx}+{k}" if k else idx, lane(src[1], k), vdt.scalar()) + ";"
                       for k in range(vdt.count)]
            else:
                sts = [rend.render_store(buf, idx, r[src[1]], vdt) + ";"]
            for st in sts:
                emit(f"if ({gate}) {st}" if gate is not None else st)
        elif op is Ops.BARRIER:
            emit(rend.barrier)
        elif op in rend.math_fns:
            fn = rend.math_fns[op]
            define(u, per_lane(u, lambda k: rend.render_math(fn, lane(src[0], k), dt.scalar()))  # noqa: B023 (called at once)
                   or rend.render_math(fn, r[src[0]], dt), "alu")
        elif op in rend.code_for_op:
            f = rend.code_for_op[op]
            if rend.promotes(dt.scalar()) and op not in (Ops.WHERE,):  # C computes these in int/float: round back
                f = rend._rounded(f, dt.scalar())
            define(u, per_lane(u, lambda k: f(*[lane(s, k) for s in src], dtype=dt.scalar()))  # noqa: B023 (called at once)
                   or f(*[r[s] for s in src], dtype=dt), "alu")
        elif op is Ops.CAST:
            define(u, per_lane(u, lambda k: rend.render_cast(lane(src[0], k), src[0].dtype.scalar(), dt.scalar()))  # noqa: B023 (called at once)
                   or rend.render_cast(r[src[0]], src[0].dtype, dt), "cast")
        elif op is Ops.BITCAST:
            if (lanes_of(src[0].dtype) or lanes_of(dt)) and src[0].dtype.count != dt.count:
                raise NotImplementedError(f"{type(rend).__name__}: bitcast {src[0].dtype} -> {dt} changes lanes")
            define(u, per_lane(u, lambda k: rend.render_bitcast(lane(src[0], k), src[0].dtype.scalar(),  # noqa: B023 (called at once)
                                                                dt.scalar()))  # noqa: B023 (called at once)
                   or rend.render_bitcast(r[src[0]], src[0].dtype, dt), "cast")
        elif op is Ops.VECTORIZE:
            if lanes_of(dt):
                r[u] = [r[s] for s in src]
                nest[u] = max(nest.get(s, 0) for s in src)
            else:
                define(u, rend.render_vectorize([r[s] for s in src], dt), "vec")
        elif op is Ops.GEP:
            if isinstance(r[src[0]], list):
                r[u] = r[src[0]][u.arg]
                nest[u] = nest.get(src[0], 0)
            else:
                define(u, rend.render_gep(r[src[0]], u.arg, src[0].dtype), "alu")
        else:
            raise NotImplementedError(f"{type(rend).__name__} cannot render {u.short()}")
    attributes = rend.kernel_attributes(lk)
    if attributes:  # keyword only when set: an override of render_kernel need not take it
        return rend.render_kernel(name, sig, lines, used, attributes=attributes)
    return rend.render_kernel(name, sig, lines, used)
