"""Read the signature of a hand-written C kernel with libclang and make a ProgramSpec of it.

Conventions (docs/architecture.md, "CPU plugin"):
- pointer (or array) params are buffers, in order; their element dtype comes from the C type; a buffer is
  writable unless its element type is const-qualified (`const float *x` is read-only);
- integer params are int vars (their bounds: the C type's range); any other param type is an error;
- a buffer's size (elements, what a launch checks) comes from, first, `sizes={"x": 1024, "y": "n*4"}` (an int,
  or an expression over the int params with + - * // % and parentheses), then a constant array declarator
  (`float x[1024]`); otherwise it is unchecked (size 0: any buffer is accepted);
- params named `core_start` and `core_end` (the last two, integers) make the kernel splittable across threads:
  pass `split="n"` (the extent, an int or expression) and the runtime calls it once per chunk of [0, extent).
"""

from __future__ import annotations

import ast
import atexit
import functools
import operator

from devicekit.errors import CompileError
from devicekit.ir.dtypes import dtypes
from devicekit.ir.ops import Ops
from devicekit.ir.uop import SymInt, UOp
from devicekit.render.program_spec import ParamSpec, ProgramSpec, VarSpec


@functools.cache
def _index():
    import clang.cindex as ci
    atexit.register(_index.cache_clear)  # free it before interpreter teardown (cindex's __del__ needs its module)
    return ci.Index.create()


def _dtype(t):
    """devicekit dtype of a canonical libclang scalar type, or None."""
    import clang.cindex as ci
    k = t.kind
    if k == ci.TypeKind.BOOL:
        return dtypes.bool
    if k in (ci.TypeKind.FLOAT,):
        return dtypes.float32
    if k in (ci.TypeKind.DOUBLE,):
        return dtypes.float64
    if k.name in ("HALF", "FLOAT16"):
        return dtypes.float16
    unsigned = {ci.TypeKind.UCHAR, ci.TypeKind.CHAR_U, ci.TypeKind.USHORT, ci.TypeKind.UINT, ci.TypeKind.ULONG,
                ci.TypeKind.ULONGLONG}
    signed = {ci.TypeKind.SCHAR, ci.TypeKind.CHAR_S, ci.TypeKind.SHORT, ci.TypeKind.INT, ci.TypeKind.LONG,
              ci.TypeKind.LONGLONG}
    if k in unsigned or k in signed:
        bits = t.get_size() * 8
        return dtypes.from_name(f"{'u' if k in unsigned else ''}int{bits}")
    return None


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod}


def _sym(expr, vars_: dict[str, UOp], what: str) -> SymInt:
    """An int or an expression over the int params (a string) -> SymInt."""
    if isinstance(expr, bool) or not isinstance(expr, (int, str)):
        raise CompileError(f"{what}: expected an int or an expression string, got {expr!r}")
    if isinstance(expr, int):
        return expr

    def ev(n):
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
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as e:
        raise CompileError(f"{what}: cannot parse {expr!r}: {e.msg}") from None
    return ev(tree)


def parse_c_source(src: str, entry: str, sizes: dict | None = None, split=None, device: str = "CPU",
                   lang: str = "c") -> ProgramSpec:
    import clang.cindex as ci

    fname = "kernel.c"
    try:
        tu = _index().parse(fname, args=["-x", "c", "-std=gnu11"], unsaved_files=[(fname, src)])
    except ci.TranslationUnitLoadError as e:
        raise CompileError(f"libclang could not parse the source: {e}", "", src) from None
    errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
    if errors:
        log = "\n".join(f"{d.location.file or fname}:{d.location.line}:{d.location.column}: error: {d.spelling}"
                        for d in errors)
        raise CompileError(f"{entry}: the C source has {len(errors)} error(s)", log, src)
    fn = None
    for c in tu.cursor.get_children():
        if c.kind == ci.CursorKind.FUNCTION_DECL and c.spelling == entry and c.is_definition():
            fn = c
    if fn is None:
        found = sorted({c.spelling for c in tu.cursor.get_children()
                        if c.kind == ci.CursorKind.FUNCTION_DECL and c.is_definition()
                        and c.location.file and c.location.file.name == fname})
        raise CompileError(f"no function definition named {entry!r} in the source (found: {', '.join(found) or 'none'})",
                           "", src)
    if fn.result_type.kind != ci.TypeKind.VOID:
        raise CompileError(f"{entry}:{fn.location.line}: a kernel returns void, {entry} returns "
                           f"{fn.result_type.spelling}", "", src)
    if fn.storage_class == ci.StorageClass.STATIC:
        raise CompileError(f"{entry}:{fn.location.line}: the entry point must not be static", "", src)

    bufs: list[tuple[str, object, bool, int | None]] = []
    ints: list[tuple[str, object]] = []
    for a in fn.get_arguments():
        t = a.type.get_canonical()
        where = f"{entry}:{a.location.line}: param {a.spelling!r} ({a.type.spelling})"
        if t.kind in (ci.TypeKind.POINTER, ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY):
            elem = t.get_pointee() if t.kind == ci.TypeKind.POINTER else t.element_type
            dt = _dtype(elem.get_canonical())
            if dt is None:
                raise CompileError(f"{where}: unsupported element type {elem.spelling!r}", "", src)
            if ints:
                raise CompileError(f"{where}: buffers come before int params in a devicekit kernel", "", src)
            count = t.element_count if t.kind == ci.TypeKind.CONSTANTARRAY else None
            bufs.append((a.spelling, dt, not elem.is_const_qualified(), count))
        elif (dt := _dtype(t)) is not None and (dt.is_int or dt.is_bool):
            ints.append((a.spelling, dt))
        else:
            raise CompileError(f"{where}: only pointers/arrays (buffers) and integers (vars) can be params", "", src)

    names = [n for n, _ in ints]
    core_split: SymInt | None = None
    if names[-2:] == ["core_start", "core_end"]:
        ints = ints[:-2]
        if split is None:
            raise CompileError(f"{entry} takes core_start/core_end: pass split= (the extent to divide)", "", src)
    elif split is not None:
        raise CompileError(f"split= needs {entry} to end with (long long core_start, long long core_end)", "", src)
    var_specs = tuple(VarSpec(n, int(dt.min()), int(dt.max())) for n, dt in ints)
    var_uops = {v.name: UOp(Ops.VAR, dtypes.index, (), (v.name, v.lo, v.hi)) for v in var_specs}
    if split is not None:
        core_split = _sym(split, var_uops, "split")
    sizes = dict(sizes or {})
    unknown = set(sizes) - {b[0] for b in bufs}
    if unknown:
        raise CompileError(f"sizes= names {', '.join(sorted(unknown))}, which are not buffer params of {entry}")
    params = []
    for name, dt, writable, count in bufs:
        size = _sym(sizes[name], var_uops, f"sizes[{name!r}]") if name in sizes else (count or 0)
        params.append(ParamSpec(name, dt, size, writable))
    outs = tuple(i for i, p in enumerate(params) if p.writable)
    return ProgramSpec(name=entry, src=src, device=device, lang=lang, params=tuple(params), vars=var_specs,
                       core_split=core_split, outs=outs, ins=tuple(range(len(params))),
                       meta=(("split_cost", 1 << 12), ("from_source", True)))
