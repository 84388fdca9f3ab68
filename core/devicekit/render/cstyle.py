"""CStyleRenderer: the base renderer for C-like languages (C for CPU, CUDA C, Metal Shading Language).

It walks the linear form (docs/linear-form.md) once and turns each op into a line or an inline expression.
Subclasses change the language through the hooks below (class attributes and small methods); none of them
re-implements lowering. The keys of `code_for_op` (plus `math_fns`) are the ALU ops rendered natively, and so
decide what the core decomposes before rendering, as in tinygrad.

Naming: every user name (kernel, param, var, local array) is spelled `user_name(name)` = `ir.names.mangle(name)`
(`dku_<name>`), a namespace no keyword, header macro, builtin or temporary of any renderer uses, so a user may name
a var `int`, `INFINITY` or `alu0`; the kernel's entry symbol is `dku_<kernel>` (`entry_symbol`). Ranges are
`ridx<n>` and accumulators `acc<n>` (numbered here in order, so equal kernels give equal source: the
source is the compile cache key), GPU indices `gidx<axis>` / `lidx<axis>`, loads `val<n>`, other values `alu<n>` /
`cast<n>`. A vector value is one scalar per lane (`acc3_0`, `acc3_1`, ...) unless `native_vector(dtype)` says the
language has that vector type. Which of the two a value is depends on its dtype alone: an op that mixes them (a CAST
from a native int16x8 to a scalarized uint64x8, an ALU op with a scalarized result or operand) is rendered lane by
lane, reading a native operand's lanes through `render_gep` and building a native result with `render_vectorize`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from ..ir.dtypes import DType, dtypes
from ..ir.names import mangle
from ..ir.ops import Ops
from ..ir.uop import KernelError, UOp
from .prepare import const_threads
from .renderer import Renderer

__all__ = ["CStyleRenderer", "KernelParam", "const_threads", "infix"]

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


def _b(op: str) -> Callable[..., str]:
    """`(a op b)`; a right operand that starts with a sign is parenthesized: `x - -2.0` rendered `(x--2.0)`, which C
    reads as `x-- 2.0` (a decrement; a compile error the deep fuzz profile found on seed 4)."""
    return lambda a, b, dtype: f"({a}{op}({b}))" if b.startswith(("-", "+")) else f"({a}{op}{b})"


infix = _b  # the same for plugins' renderers (Metal, WGSL), whose `--` is a decrement too


class CStyleRenderer(Renderer):
    """Linear form -> C-like source. Override the hooks; keep `render_linear` as is."""

    lang = "c"
    core_split = False

    # ---- kernel signature
    kernel_prefix: ClassVar[str] = ""  # before the return type: 'extern "C" __global__ ', 'kernel ', ...
    kernel_return: ClassVar[str] = "void"  # the entry point's return type
    buffer_prefix: ClassVar[str] = ""  # before a buffer param's type: 'device ' (Metal)
    buffer_const: ClassVar[str] = "const "  # qualifier of read-only buffers
    buffer_restrict: ClassVar[str] = "restrict "  # after the '*': 'restrict ', '__restrict__ ', ''
    arg_int_prefix: ClassVar[str] = "long long"  # type of an int var param: 'long long', 'constant long&' ...
    extra_params: ClassVar[tuple[str, ...]] = ()  # appended to the signature (Metal's [[threadgroup_position_in_grid]])
    # ---- memory and sync
    smem_prefix: ClassVar[str] = ""  # local memory declaration prefix: '__shared__ ', 'threadgroup '
    smem_align: ClassVar[str] = ""  # e.g. '__attribute__((aligned(16))) '
    barrier: ClassVar[str] = ""  # '__syncthreads();', 'threadgroup_barrier(mem_flags::mem_threadgroup);'
    # ---- literals
    infinity: ClassVar[str] = "INFINITY"
    nan: ClassVar[str] = "NAN"
    float_suffix: ClassVar[dict[str, str]] = {"float32": "f", "float64": "", "float16": "f", "bfloat16": "f"}
    int_suffix: ClassVar[dict[str, str]] = {"int64": "ll", "uint64": "ull", "uint32": "u", "int32": ""}
    # ---- types
    type_map: ClassVar[dict[str, str]] = {
        "bool": "bool", "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
        "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int", "uint64": "unsigned long long",
        "float16": "half", "bfloat16": "__bf16", "float32": "float", "float64": "double"}
    # ---- ALU: op -> fn(*operand_strings, dtype=result dtype) -> expression. Keys = natively rendered ops.
    code_for_op: ClassVar[dict[Ops, Callable[..., str]]] = {
        Ops.NEG: lambda x, dtype: f"(!{x})" if dtype.scalar() == dtypes.bool else f"(-({x}))" if x.startswith(("-", "+")) else f"(-{x})",
        Ops.RECIP: lambda x, dtype: f"(1/{x})",
        Ops.ADD: _b("+"), Ops.SUB: _b("-"), Ops.MUL: _b("*"), Ops.FDIV: _b("/"), Ops.IDIV: _b("/"), Ops.MOD: _b("%"),
        Ops.CMPLT: _b("<"), Ops.CMPNE: _b("!="), Ops.CMPEQ: _b("=="),
        Ops.AND: _b("&"), Ops.OR: _b("|"), Ops.XOR: _b("^"),
        Ops.SHL: lambda a, b, dtype: f"({a}<<({b}&{dtype.bits - 1}))",  # shift amounts are taken modulo the width
        Ops.SHR: lambda a, b, dtype: f"({a}>>({b}&{dtype.bits - 1}))",
        Ops.MAX: lambda a, b, dtype: f"(({a}<{b})?{b}:{a})",  # NaN in a propagates, NaN in b does not
        Ops.WHERE: lambda c, a, b, dtype: f"({c}?{a}:{b})",
        Ops.MULACC: lambda a, b, c, dtype: f"(({a}*{b})+{c})",  # two roundings: compile without fp contraction
    }
    # unary math functions rendered as calls through `render_math`; keys are natively rendered ops too
    math_fns: ClassVar[dict[Ops, str]] = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt",
                                          Ops.TRUNC: "trunc"}
    # ops whose code repeats an operand: their operands are never inlined (keeps source size linear)
    repeats_operands: ClassVar[frozenset[Ops]] = frozenset({Ops.MAX})

    @property
    def native_ops(self) -> frozenset[Ops]:  # type: ignore[override]
        """ALU ops this renderer renders itself: the keys of `code_for_op` and `math_fns`."""
        return frozenset(self.code_for_op) | frozenset(self.math_fns)

    # ================= hooks: types and literals
    def render_dtype(self, dt: DType) -> str:
        """C spelling of a scalar or vector dtype."""
        return self.type_map[dt.name] if dt.count == 1 else self.vector_type(dt)

    def vector_type(self, dt: DType) -> str:
        """Name of a vector type ('float4'); typedefs come from `render_preamble`."""
        return f"{self.type_map[dt.name].replace(' ', '')}{dt.count}"

    def render_const(self, value, dt: DType) -> str:
        """A scalar literal of type dt (vector constants arrive as VECTORIZE of scalar CONSTs)."""
        if dt.is_bool:
            return "1" if value else "0"
        if dt.is_float:
            if math.isnan(value):
                return self.nan if dt.name == "float32" else self.render_cast(self.nan, dtypes.float32, dt)
            if math.isinf(value):
                s = self.infinity if value > 0 else f"(-{self.infinity})"
                return s if dt.name == "float32" else self.render_cast(s, dtypes.float32, dt)
            return self.render_float(value, dt)
        return self.render_int(int(value), dt)

    def render_float(self, value: float, dt: DType) -> str:
        """A finite float literal: shortest exact repr plus the type's suffix; half/bf16 through a cast."""
        s = repr(float(value))
        if "e" not in s and "." not in s:
            s += ".0"
        s += self.float_suffix.get(dt.name, "")
        return s if dt.name in ("float32", "float64") else self.render_cast(s, dtypes.float32, dt)

    def render_int(self, value: int, dt: DType) -> str:
        """An integer literal of type dt (the most negative value spelled so C parses it)."""
        suffix = self.int_suffix.get(dt.name)
        if value == dt.min() and dt.is_int and not dt.is_unsigned and dt.bits >= 32:
            s = f"({value + 1}{suffix or ''}-1)"
        else:
            s = f"{value}{suffix or ''}"
        return s if suffix is not None else f"(({self.render_dtype(dt)}){s})"

    # ================= hooks: conversions and vectors
    def render_cast(self, x: str, src: DType, dst: DType) -> str:
        """Value conversion (C cast). Override for bfloat16 or vector converts."""
        return f"(({self.render_dtype(dst)})({x}))"

    def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
        """Reinterpret the bits of x (same size). Default: a union compound literal (valid C99)."""
        return f"((union {{{self.render_dtype(src)} a; {self.render_dtype(dst)} b;}}){{.a = {x}}}).b"

    def render_vectorize(self, lanes: list[str], dt: DType) -> str:
        """Build a vector from lane expressions: '(float4){a,b,c,d}'; CUDA: make_float4(...); Metal: float4(...)."""
        return f"(({self.render_dtype(dt)}){{{','.join(lanes)}}})"

    def render_gep(self, x: str, lane: int, dt: DType) -> str:
        """Lane `lane` of vector x: 'x[1]'; CUDA: 'x.y'."""
        return f"{x}[{lane}]"

    def render_math(self, fn: str, x: str, dt: DType) -> str:
        """A unary math function call: exp2f(x) for float32, exp2(x) for float64."""
        return f"{fn}{'f' if dt.scalar() == dtypes.float32 else ''}({x})"

    # ================= hooks: memory
    def render_load(self, buf: str, idx: str, dt: DType) -> str:
        """Read element idx of buf; a vector dtype reads dt.count contiguous lanes."""
        return f"{buf}[{idx}]" if dt.count == 1 else f"(*(({self.render_dtype(dt)}*)({buf}+{idx})))"

    def render_store(self, buf: str, idx: str, value: str, dt: DType) -> str:
        """Write value at element idx of buf (a statement, without the ';')."""
        return f"{buf}[{idx}] = {value}" if dt.count == 1 else f"*(({self.render_dtype(dt)}*)({buf}+{idx})) = {value}"

    def render_local(self, name: str, dt: DType, size: int) -> str:
        """Declare local (shared) memory: '__shared__ float smem[256];'."""
        return f"{self.smem_prefix}{self.smem_align}{self.render_dtype(dt)} {name}[{size}];"

    def render_special(self, name: str, axis: int, extent: str) -> str:
        """Expression of a GPU index SPECIAL (gidxN = block index, lidxN = thread index); e.g. 'blockIdx.x'. The walk
        has checked `axis` is 0, 1 or 2."""
        raise NotImplementedError(f"{type(self).__name__} has no GPU indices ({name})")

    # ================= hooks: signature and file
    def render_param(self, name: str, dt: DType, writable: bool) -> str:
        """One buffer parameter declaration."""
        const = "" if writable else self.buffer_const
        return f"{self.buffer_prefix}{const}{self.render_dtype(dt)} *{self.buffer_restrict}{name}"

    def render_var(self, name: str) -> str:
        """One int var parameter declaration (vars are int64)."""
        return f"{self.arg_int_prefix} {name}"

    def render_scalar(self, name: str, dt: DType) -> str:
        """One k.scalar parameter declaration; `dt` is its wire dtype (ir.dtypes.scalar_wire: never bool, half or
        bfloat16). Metal: 'constant float& name'."""
        return f"{self.render_dtype(dt)} {name}"

    def render_preamble(self, used: set[DType]) -> str:
        """Text before the kernel: includes, typedefs for the vector types in `used`, helpers."""
        return ""

    def kernel_attributes(self, lk) -> str:
        """The function header's attributes, between the return type and the name, from the linear kernel `lk`
        (CUDA: `__launch_bounds__(threads) ` when the block size is a constant). Default: none. When it returns
        text, `render_kernel` receives it as `attributes=`."""
        return ""

    def render_kernel(self, name: str, params: list[KernelParam], body: list[str], used: set[DType],
                      attributes: str = "") -> str:
        """Assemble preamble, signature and indented body into the final source. `params` are structured
        (`KernelParam`: name, kind, dtype, writable, ...), buffers first, then vars, then the split bounds; the
        default joins their `decl`s, so an override may change any of them or spell them from scratch.
        `attributes` is `kernel_attributes`' text."""
        pre = self.render_preamble(used)
        decls = [p.decl if isinstance(p, KernelParam) else str(p) for p in params]
        sig = f"{self.kernel_prefix}{self.kernel_return} {attributes}{name}({', '.join(decls + list(self.extra_params))})"
        return (pre + "\n" if pre else "") + sig + " {\n" + "\n".join(body) + "\n}\n"

    def user_name(self, name: str) -> str:
        """How the source spells a user's param, var or local array name (never a keyword, macro or temporary)."""
        return mangle(name)

    def entry_symbol(self, name: str) -> str:
        """The kernel's entry point: mangled like every user name, so `sqrtf` or `main` cannot clash either."""
        return mangle(name)

    def promotes(self, dt: DType) -> bool:
        """Whether the language computes ALU results of scalar type dt in a wider type (C's integer promotion of
        char/short; half with excess precision), so each result is cast back to dt to wrap/round as the IR says."""
        return dt.name in ("int8", "uint8", "int16", "uint16", "float16", "bfloat16")

    def _rounded(self, f: Callable[..., str], d: DType) -> Callable[..., str]:
        # cast to the dtype f is called with (metal plugin fix): a native vector result (char4, half4) is cast back
        # to its vector type, not to the scalar `d`; per-lane calls pass the scalar dtype, so those are unchanged
        return lambda *a, dtype: self.render_cast(f(*a, dtype=dtype), dtype, dtype)

    def native_vector(self, dt: DType) -> bool:
        """Whether vector dtype dt is rendered as a vector type of the language. Default: no, every vector value
        becomes one scalar per lane (loads/stores per lane too); the compiler re-vectorizes. Override for the widths
        your language has (and whose operators it defines)."""
        return False

    # ================= the walk (not a hook)
    def render_linear(self, lk, name: str) -> str:
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
            return dt.count > 1 and not self.native_vector(dt)

        def lane(u, k: int) -> str:
            """Lane k of u's value: a scalarized vector's k-th expression, a native vector's GEP, a scalar itself."""
            x = r[u]
            if isinstance(x, list):
                return x[k]
            return self.render_gep(x, k, u.dtype) if u.dtype.count > 1 else x

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
            return all(epoch[pos[u]] == epoch[i] for i in at) and user.op not in self.repeats_operands

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
                emit(f"{self.render_dtype(u.dtype.scalar() if isinstance(expr, list) else u.dtype)} {var} = {x};")
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
            return lanes if lanes_of(u.dtype) else self.render_vectorize(lanes, u.dtype)

        param_names = {p.name: self.user_name(p.name) for p in lk.params}
        var_names = {v.name: self.user_name(v.name) for v in lk.vars}  # not the lowering's core_start/core_end
        # the PARAM uops carry the storage dtype after lowering (bfloat16 emulated as uint16 bits)
        stored = {u.arg[0]: u.dtype for u in uops if u.op is Ops.PARAM}
        pdt = [stored.get(i, p.dtype) for i, p in enumerate(lk.params)]
        sig = [KernelParam(param_names[p.name], "buffer", dt, p.writable, p.name, i,
                           self.render_param(param_names[p.name], dt, p.writable))
               for i, (p, dt) in enumerate(zip(lk.params, pdt))]
        sig += [KernelParam(var_names[v.name], "var", dtypes.int64, False, v.name, j, self.render_var(var_names[v.name]))
                if v.scalar is None else
                KernelParam(var_names[v.name], "var", v.dtype, False, v.name, j,
                            self.render_scalar(var_names[v.name], v.dtype))
                for j, v in enumerate(lk.vars)]
        if lk.core_split is not None:
            sig += [KernelParam(n, "split", dtypes.int64, False, n, j, self.render_var(n))
                    for j, n in enumerate(("core_start", "core_end"))]
        used.update(pdt)
        used.update(v.dtype for v in lk.vars if v.scalar is not None)  # an unused scalar's type is declared too

        for u in uops:
            op, dt, src = u.op, u.dtype, u.src
            if dt != dtypes.void and op not in (Ops.PARAM,):
                used.add(dt.scalar() if lanes_of(dt) else dt)
            if op is Ops.PARAM:
                r[u] = param_names.get(u.arg[1]) or self.user_name(u.arg[1])
            elif op is Ops.VAR:
                r[u] = var_names.get(u.arg[0], u.arg[0])
            elif op is Ops.SCALAR:
                r[u] = var_names[u.arg]
            elif op is Ops.CONST:
                r[u] = self.render_const(u.arg, dt)
            elif op is Ops.SPECIAL:
                nm, axis = u.arg
                if not 0 <= axis < 3:  # the lowering makes at most 3; CUDA, OpenCL, MSL and WGSL have no more
                    raise KernelError(f"{type(self).__name__}: GPU launches have 3 axes; {nm} asks for axis {axis}")
                emit(f"{self.render_dtype(dtypes.index)} {nm} = {self.render_special(nm, axis, r[src[0]])};")
                r[u] = nm
            elif op is Ops.RANGE:
                v = f"ridx{len(ids)}"  # numbered here, in order: the source is the cache key, keep it stable
                ids[u] = v
                emit(f"for ({self.render_dtype(dtypes.index)} {v} = {r[src[0]]}; {v} < {r[src[1]]}; {v}++) {{")
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
                        emit(f"{self.render_dtype(dt.scalar())} {x} = {lane(src[0], k)};")
                else:
                    emit(f"{self.render_dtype(dt)} {v} = {r[src[0]]};")
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
                            emit(f"{self.render_dtype(dt.scalar())} {t} = {x};")
                        vals = tmps
                    for a, x in zip(r[src[0]], vals):
                        emit(f"{a} = {x};")
                else:
                    emit(f"{r[src[0]]} = {r[src[1]]};")
                r[u] = r[src[0]]
            elif op is Ops.DEFINE_LOCAL:
                v = self.user_name(u.arg[0])
                emit(self.render_local(v, dt, u.arg[1]))
                r[u] = v
            elif op is Ops.INDEX:
                index_parts[u] = (r[src[0]], r[src[1]], r[src[2]] if len(src) > 2 else None)
                nest[u] = max(nest.get(s, 0) for s in src)
            elif op is Ops.LOAD:
                buf, idx, gate = index_parts[src[0]]
                if lanes_of(dt):
                    exprs = [self.render_load(buf, f"{idx}+{k}" if k else idx, dt.scalar()) for k in range(dt.count)]
                    if gate is not None:
                        exprs = [f"({gate}?{x}:{lane(src[1], k)})" for k, x in enumerate(exprs)]
                    define(u, exprs, "val")
                else:
                    expr = self.render_load(buf, idx, dt)
                    if gate is not None:
                        expr = f"({gate}?{expr}:{r[src[1]]})"
                    define(u, expr, "val")
            elif op is Ops.STORE:
                buf, idx, gate = index_parts[src[0]]
                vdt = src[1].dtype
                if isinstance(r[src[1]], list):
                    sts = [self.render_store(buf, f"{idx}+{k}" if k else idx, lane(src[1], k), vdt.scalar()) + ";"
                           for k in range(vdt.count)]
                else:
                    sts = [self.render_store(buf, idx, r[src[1]], vdt) + ";"]
                for st in sts:
                    emit(f"if ({gate}) {st}" if gate is not None else st)
            elif op is Ops.BARRIER:
                emit(self.barrier)
            elif op in self.math_fns:
                fn = self.math_fns[op]
                define(u, per_lane(u, lambda k: self.render_math(fn, lane(src[0], k), dt.scalar()))  # noqa: B023 (called at once)
                       or self.render_math(fn, r[src[0]], dt), "alu")
            elif op in self.code_for_op:
                f = self.code_for_op[op]
                if self.promotes(dt.scalar()) and op not in (Ops.WHERE,):  # C computes these in int/float: round back
                    f = self._rounded(f, dt.scalar())
                define(u, per_lane(u, lambda k: f(*[lane(s, k) for s in src], dtype=dt.scalar()))  # noqa: B023 (called at once)
                       or f(*[r[s] for s in src], dtype=dt), "alu")
            elif op is Ops.CAST:
                define(u, per_lane(u, lambda k: self.render_cast(lane(src[0], k), src[0].dtype.scalar(), dt.scalar()))  # noqa: B023 (called at once)
                       or self.render_cast(r[src[0]], src[0].dtype, dt), "cast")
            elif op is Ops.BITCAST:
                if (lanes_of(src[0].dtype) or lanes_of(dt)) and src[0].dtype.count != dt.count:
                    raise NotImplementedError(f"{type(self).__name__}: bitcast {src[0].dtype} -> {dt} changes lanes")
                define(u, per_lane(u, lambda k: self.render_bitcast(lane(src[0], k), src[0].dtype.scalar(),  # noqa: B023 (called at once)
                                                                    dt.scalar()))  # noqa: B023 (called at once)
                       or self.render_bitcast(r[src[0]], src[0].dtype, dt), "cast")
            elif op is Ops.VECTORIZE:
                if lanes_of(dt):
                    r[u] = [r[s] for s in src]
                    nest[u] = max(nest.get(s, 0) for s in src)
                else:
                    define(u, self.render_vectorize([r[s] for s in src], dt), "vec")
            elif op is Ops.GEP:
                if isinstance(r[src[0]], list):
                    r[u] = r[src[0]][u.arg]
                    nest[u] = nest.get(src[0], 0)
                else:
                    define(u, self.render_gep(r[src[0]], u.arg, src[0].dtype), "alu")
            else:
                raise NotImplementedError(f"{type(self).__name__} cannot render {u.short()}")
        attributes = self.kernel_attributes(lk)
        if attributes:  # keyword only when set: an override of render_kernel need not take it
            return self.render_kernel(name, sig, lines, used, attributes=attributes)
        return self.render_kernel(name, sig, lines, used)
