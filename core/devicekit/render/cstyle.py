"""CStyleRenderer: the base renderer for C-like languages (C for CPU, CUDA C, Metal Shading Language).

Its walk (devicekit.render.cstyle_walk) goes over the linear form (docs/linear-form.md) once and turns each op into
a line or an inline expression; this module holds the language hooks the walk calls. Subclasses change the
language through the hooks below (class attributes and small methods); none of them re-implements lowering. The keys of `code_for_op` (plus `math_fns`) are the ALU ops rendered natively, and so
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
from collections.abc import Callable
from typing import ClassVar

from ..ir.dtypes import DType, dtypes
from ..ir.names import mangle
from ..ir.ops import Ops
from .cstyle_walk import KernelParam, walk
from .prepare import const_threads
from .renderer import Renderer

__all__ = ["CStyleRenderer", "KernelParam", "const_threads", "infix"]


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
    # the type a bool is kept as in buffers and local arrays where the language allows no bool there ('uchar':
    # OpenCL C); None: bool itself. Loads read it back as `!= 0`, stores write the value cast to it (`mem_type`)
    bool_memory: ClassVar[str | None] = None
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
    def mem_type(self, dt: DType) -> str:
        """The type of dt's elements in memory (buffers, local arrays): `bool_memory` for a bool where it is set."""
        return self.bool_memory if self.bool_memory and dt.is_bool and dt.count == 1 else self.render_dtype(dt)

    def render_load(self, buf: str, idx: str, dt: DType) -> str:
        """Read element idx of buf; a vector dtype reads dt.count contiguous lanes; a bool kept as `bool_memory`
        reads back as `!= 0`."""
        if dt.count == 1:
            return f"({buf}[{idx}]!=0)" if self.bool_memory and dt.is_bool else f"{buf}[{idx}]"
        return f"(*(({self.render_dtype(dt)}*)({buf}+{idx})))"

    def render_store(self, buf: str, idx: str, value: str, dt: DType) -> str:
        """Write value at element idx of buf (a statement, without the ';'); a bool kept as `bool_memory` is cast to
        it."""
        if dt.count == 1:
            return f"{buf}[{idx}] = ({self.bool_memory})({value})" if self.bool_memory and dt.is_bool else \
                f"{buf}[{idx}] = {value}"
        return f"*(({self.render_dtype(dt)}*)({buf}+{idx})) = {value}"

    def render_local(self, name: str, dt: DType, size: int) -> str:
        """Declare local (shared) memory: '__shared__ float smem[256];' (its elements of `mem_type`)."""
        return f"{self.smem_prefix}{self.smem_align}{self.mem_type(dt)} {name}[{size}];"

    def render_special(self, name: str, axis: int, extent: str) -> str:
        """Expression of a GPU index SPECIAL (gidxN = block index, lidxN = thread index); e.g. 'blockIdx.x'. The walk
        has checked `axis` is 0, 1 or 2."""
        raise NotImplementedError(f"{type(self).__name__} has no GPU indices ({name})")

    # ================= hooks: signature and file
    def render_param(self, name: str, dt: DType, writable: bool) -> str:
        """One buffer parameter declaration (its elements of `mem_type`)."""
        const = "" if writable else self.buffer_const
        return f"{self.buffer_prefix}{const}{self.mem_type(dt)} *{self.buffer_restrict}{name}"

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
        """The walk (devicekit.render.cstyle_walk): not a hook; a renderer changes its language through the hooks."""
        return walk(self, lk, name)
