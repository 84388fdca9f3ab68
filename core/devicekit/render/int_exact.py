"""Integer ops of a C-family renderer that wrap and divide as the IR says (docs/ir.md), where C does not.

C (and OpenCL C, CUDA C++, MSL) leaves signed overflow undefined, so compilers fold `x < x + 1` to true; it promotes
char/short to int, so an inlined 8-bit sum keeps its carry; and x / 0, x % 0 and MIN / -1 trap or are undefined.
`exact_int_ops` wraps a renderer's `code_for_op` so that on scalar ints add/sub/mul/neg/shl/mulacc run in unsigned
arithmetic and are read back as the signed type, 8/16-bit results are cut to their width after every op, and
division gives the reference's answers (x / 0 = x % 0 = 0, MIN / -1 = MIN, MIN % -1 = 0; a literal divisor other
than 0 and -1, the usual index arithmetic, stays a plain `/`). Comparisons and WHERE are left as they are: their
result is a bool or one of their operands. The OpenCL and CUDA renderers use it."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..ir.dtypes import DType
from ..ir.ops import Ops

__all__ = ["WRAPPING", "exact_int_ops", "int_literal"]

WRAPPING = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.SHL, Ops.MULACC})
_AS_IS = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.WHERE})
_INT_LITERAL = re.compile(r"^\(*\(?(?:\([a-z ]+\))?\(?(-?\d+)(?:u|ll|ull|L|UL)?\)*$")

Code = Callable[..., str]


def int_literal(x: str) -> int | None:
    """The value of a rendered integer literal (`5`, `(-3L)`, `((long)7)`), None for any other expression."""
    m = _INT_LITERAL.match(x)
    return int(m.group(1)) if m else None


def exact_int_ops(code: dict[Ops, Code], type_map: dict[str, str], unsigned: dict[int, str],
                  as_signed: Callable[[str, DType], str] | None = None) -> dict[Ops, Code]:
    """`code` with every op but comparisons and WHERE wrapped as the module docstring says. `type_map`: dtype name ->
    C type; `unsigned`: bits -> the unsigned type the op runs in (8 and 16 bits: a 32-bit one); `as_signed(expr, s)`
    reads an unsigned expression back as scalar dtype `s` (default: a C cast, which compilers do modulo 2^n)."""
    def cast(expr: str, s: DType) -> str:
        return f"(({type_map[s.name]})({expr}))"
    back = as_signed or cast

    def divide(a: str, b: str, op: Ops, s: DType) -> str:
        c, t = "/" if op is Ops.IDIV else "%", type_map[s.name]
        lit = int_literal(b)
        if lit is not None and lit not in (0, -1):
            return cast(f"{a}{c}{b}", s) if s.bits < 32 else f"({a}{c}{b})"
        if not s.is_unsigned:
            u = unsigned[s.bits]
            minus1 = back(f"(({u})0)-(({u})({a}))", s) if op is Ops.IDIV else f"(({t})0)"
            return f"((({b})==0)?(({t})0):((({b})==-1)?{minus1}:{cast(f'{a}{c}{b}', s)}))"
        return f"((({b})==0)?(({t})0):{cast(f'{a}{c}{b}', s)})"

    def exact(fn: Code, op: Ops) -> Code:
        def render(*xs: str, dtype: DType) -> str:
            s = dtype.scalar()
            if dtype.count != 1 or not s.is_int:
                return fn(*xs, dtype=dtype)
            if op in (Ops.IDIV, Ops.MOD):
                return divide(*xs, op, s)
            if op in WRAPPING:
                u = unsigned[s.bits]
                if op is Ops.SHL:
                    return back(f"(({u})({xs[0]}))<<(({xs[1]})&{s.bits - 1})", s)
                return back(fn(*[f"(({u})({x}))" for x in xs], dtype=dtype), s)
            return cast(fn(*xs, dtype=dtype), s) if s.bits < 32 else fn(*xs, dtype=dtype)
        return render

    return {op: fn if op in _AS_IS else exact(fn, op) for op, fn in code.items()}
