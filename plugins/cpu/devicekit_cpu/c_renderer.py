"""CRenderer: the linear form -> C for the host compiler (clang or cc), on the core's CStyleRenderer."""

from __future__ import annotations

import re
from typing import ClassVar

from devicekit.ir.dtypes import DType, dtypes
from devicekit.ir.ops import Ops
from devicekit.render.cstyle import CStyleRenderer

from . import hostinfo
from .cost import split_cost
from .memo import MemoRender

_LITERAL = re.compile(r"^\(*-?\d+(u|ll|ull)?\)*$")


def _guarded(op: str):
    """Integer / and % that give 0 for a zero divisor (as the reference does) and wrap for INT_MIN / -1, instead of
    trapping (x86 idiv raises SIGFPE, which would kill the process)."""
    def fn(a: str, b: str, dtype: DType) -> str:
        lit = _LITERAL.match(b) is not None
        if not dtype.is_int or (lit and b.strip("()") not in ("0", "0u", "0ll", "0ull", "-1", "-1ll")):
            return f"({a}{op}{b})"
        if dtype.is_unsigned or dtype.bits < 32:  # narrow types compute in int: -INT8_MIN does not overflow
            return f"(({b})==0?0:({a}{op}{b}))"
        ut = "unsigned long long" if dtype.bits == 64 else "unsigned int"
        t = "long long" if dtype.bits == 64 else "int"
        if op == "%":
            return f"((({b})==0||({b})==-1)?0:({a}%{b}))"
        return f"(({b})==0?0:({b})==-1?({t})(({ut})0-({ut})({a})):({a}/{b}))"
    return fn


# double -> float rounded to odd (an inexact result gets its last bit set, toward zero first): float has 13 more bits
# than half, so rounding that float to half gives the correctly rounded half of the double (no double rounding)
_D2H_ODD = """static inline float dk_d2h_odd(double d) {
  float f = (float)d;
  if ((double)f != d && f - f == 0.0f) {
    union { float f; unsigned int u; } b = { f };
    if (fabs((double)f) > fabs(d)) b.u -= 1u;
    b.u |= 1u;
    f = b.f;
  }
  return f;
}"""


class CRenderer(MemoRender, CStyleRenderer):
    """C11 (GNU) for a shared object: `restrict` pointers, int64 vars, libm math, vector values become one scalar per
    lane (the C compiler vectorizes the loops itself). The entry point is the only exported symbol."""

    device = "CPU"
    lang = "c"
    core_split = True
    vectors = True  # the base renders each vector value as one scalar per lane
    vector_register_bytes = hostinfo.vector_register_bytes()  # the host's, as the code runs here
    kernel_prefix = '__attribute__((visibility("default"))) '
    supported_dtypes = frozenset(d for d in dtypes.all() if d.name != "bfloat16")
    type_map: ClassVar = {**CStyleRenderer.type_map, "bool": "_Bool", "float16": "_Float16"}
    code_for_op: ClassVar = {**CStyleRenderer.code_for_op, Ops.IDIV: _guarded("/"), Ops.MOD: _guarded("%")}
    repeats_operands = CStyleRenderer.repeats_operands | {Ops.IDIV, Ops.MOD}
    # exp2/log2/sin come from the core's decompositions (they vectorize; libm calls do not); sqrt/trunc stay libm
    math_fns: ClassVar = {Ops.SQRT: "sqrt", Ops.TRUNC: "trunc"}

    def __init__(self, half: str | None = None):
        """`half`: how float16 is spelled, as the pair's compiler takes it ("_Float16"; "__fp16", clang's storage
        type, computing in float and rounding each result back to half as the reference does; "" for none). Default:
        what `cc_probe.choose` picked for the default CCompiler, so renderer and compiler agree."""
        if half is None:
            from .cc_compiler import FLAGS
            from .cc_probe import choose
            choice = choose(FLAGS)
            half = choice.half if choice is not None else "_Float16"
        self.half = half

    def memo_salt(self) -> str:
        return f"{super().memo_salt()}|half={self.half}"

    def render_dtype(self, dt: DType) -> str:
        if dt.count == 1 and dt.name == "float16":
            if not self.half:
                from devicekit.errors import CompileError
                raise CompileError("float16 on the c pair: no C compiler here builds _Float16 or __fp16 (install "
                                   "clang, or use the llvm pair)")
            return self.half
        return super().render_dtype(dt)

    def render_preamble(self, used: set[DType]) -> str:
        if self.half != "__fp16":
            return "#include <math.h>"
        return "#include <math.h>\n" + _D2H_ODD

    def render_cast(self, x: str, src: DType, dst: DType) -> str:
        if self.half == "__fp16" and dst.scalar() == dtypes.float16 and src.scalar() == dtypes.float64:
            # clang's own double -> __fp16 calls libgcc's __truncdfhf2, whose _Float16 return ABI clang 14 does not
            # share (garbage values): go through float, rounded to odd, which rounds to half exactly as directly
            return f"((__fp16)dk_d2h_odd({x}))"
        return super().render_cast(x, src, dst)

    def render_math(self, fn: str, x: str, dt: DType) -> str:
        if dt.scalar() == dtypes.float16:  # libm has no half functions: compute in float, round back
            return f"(({self.render_dtype(dtypes.float16)}){fn}f((float)({x})))"
        return super().render_math(fn, x, dt)

    def meta(self, lk) -> tuple:
        return (("split_cost", split_cost(lk)),)

    def parse_source(self, src: str, entry: str, sizes: dict | None = None, split=None):
        """A ProgramSpec for hand-written C: the signature of `entry`, read with libclang (see source_parse)."""
        from .source_parse import parse_c_source
        return parse_c_source(src, entry, sizes=sizes, split=split, device=self.device, lang=self.lang)
