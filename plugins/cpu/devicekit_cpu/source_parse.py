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

from devicekit.errors import CompileError
from devicekit.ir.dtypes import dtypes
from devicekit.ir.ops import Ops
from devicekit.ir.uop import SymInt, UOp
from devicekit.render.program_spec import ParamSpec, ProgramSpec, VarSpec
from devicekit.render.signature import clang_dtype, clang_index, size_expr


def parse_c_source(src: str, entry: str, sizes: dict | None = None, split=None, device: str = "CPU",
                   lang: str = "c") -> ProgramSpec:
    import clang.cindex as ci

    fname = "kernel.c"
    try:
        tu = clang_index().parse(fname, args=["-x", "c", "-std=gnu11"], unsaved_files=[(fname, src)])
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
            dt = clang_dtype(elem.get_canonical())
            if dt is None:
                raise CompileError(f"{where}: unsupported element type {elem.spelling!r}", "", src)
            if ints:
                raise CompileError(f"{where}: buffers come before int params in a devicekit kernel", "", src)
            count = t.element_count if t.kind == ci.TypeKind.CONSTANTARRAY else None
            bufs.append((a.spelling, dt, not elem.is_const_qualified(), count))
        elif (dt := clang_dtype(t)) is not None and (dt.is_int or dt.is_bool):
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
        core_split = size_expr(split, var_uops, "split")
    sizes = dict(sizes or {})
    unknown = set(sizes) - {b[0] for b in bufs}
    if unknown:
        raise CompileError(f"sizes= names {', '.join(sorted(unknown))}, which are not buffer params of {entry}")
    params = []
    for name, dt, writable, count in bufs:
        size = size_expr(sizes[name], var_uops, f"sizes[{name!r}]") if name in sizes else (count or 0)
        params.append(ParamSpec(name, dt, size, writable))
    outs = tuple(i for i, p in enumerate(params) if p.writable)
    return ProgramSpec(name=entry, src=src, device=device, lang=lang, params=tuple(params), vars=var_specs,
                       core_split=core_split, outs=outs, ins=tuple(range(len(params))),
                       meta=(("split_cost", 1 << 12), ("from_source", True)))
