"""Reading the signature of a hand-written kernel, shared by every plugin that accepts source (C, CUDA, MSL):
libclang types to dtypes, and the size expressions users write for buffers. libclang (the `libclang` wheel, a
dependency of those plugins, not of the core) is imported only when a function here runs."""

from __future__ import annotations

import ast
import atexit
import functools
import operator

from ..errors import CompileError
from ..ir.dtypes import DType, dtypes
from ..ir.uop import SymInt, UOp

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod}


def size_expr(expr: int | str, vars_: dict[str, UOp], what: str) -> SymInt:
    """An int, or a string over the kernel's int params with + - * // % and parentheses (parsed with ast, never
    evaluated as code) -> a SymInt the runtime checks buffer sizes with."""
    if isinstance(expr, bool) or not isinstance(expr, (int, str)):
        raise CompileError(f"{what}: expected an int or an expression string, got {expr!r}")
    if isinstance(expr, int):
        return expr

    def ev(n: ast.AST) -> SymInt:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in vars_:
                raise CompileError(f"{what}: {n.id!r} is not an integer parameter (have: {', '.join(vars_) or 'none'})")
            return vars_[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in _BINOPS:
            a, b = ev(n.left), ev(n.right)
            if isinstance(a, int) and isinstance(b, int):
                return _BINOPS[type(n.op)](a, b)
            return _BINOPS[type(n.op)](a if isinstance(a, UOp) else UOp.const(dtypes.index, a), b)
        raise CompileError(f"{what}: unsupported expression {expr!r} (use ints, int params, + - * // %)")

    try:
        return ev(ast.parse(expr.strip(), mode="eval"))
    except SyntaxError as e:
        raise CompileError(f"{what}: cannot parse {expr!r}: {e.msg}") from None


@functools.cache
def clang_index():
    """One libclang index per process, freed before interpreter teardown (cindex's __del__ needs its module)."""
    import clang.cindex as ci
    atexit.register(clang_index.cache_clear)
    return ci.Index.create()


def clang_dtype(t, records: dict[str, DType] | None = None) -> DType | None:
    """The dtype of a canonical libclang scalar type, or None. `records` maps struct names a language uses for
    scalars (CUDA's __nv_bfloat16, Metal's bfloat) to their dtype."""
    import clang.cindex as ci
    spelling = t.spelling.replace("const ", "").replace("volatile ", "").strip()
    if spelling in ("_Float16", "__fp16"):
        return dtypes.float16
    try:
        k = t.kind
    except ValueError:  # a type kind newer than these python bindings (e.g. Float16)
        return dtypes.float16 if "_Float16" in spelling or spelling.endswith("half") else None
    if k == ci.TypeKind.BOOL:
        return dtypes.bool
    if k == ci.TypeKind.FLOAT:
        return dtypes.float32
    if k == ci.TypeKind.DOUBLE:
        return dtypes.float64
    if k.name in ("HALF", "FLOAT16"):
        return dtypes.float16
    if k == ci.TypeKind.RECORD and records:
        return records.get(spelling.split("::")[-1])
    unsigned = {ci.TypeKind.UCHAR, ci.TypeKind.CHAR_U, ci.TypeKind.USHORT, ci.TypeKind.UINT, ci.TypeKind.ULONG,
                ci.TypeKind.ULONGLONG}
    signed = {ci.TypeKind.SCHAR, ci.TypeKind.CHAR_S, ci.TypeKind.SHORT, ci.TypeKind.INT, ci.TypeKind.LONG,
              ci.TypeKind.LONGLONG}
    if k in unsigned or k in signed:
        return dtypes.from_name(f"{'u' if k in unsigned else ''}int{t.get_size() * 8}")
    return None
