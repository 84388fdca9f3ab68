"""Read the signature of a hand-written Metal kernel with libclang (through the shim) and make a ProgramSpec of it.

This is `MetalRenderer.parse_source`, behind `dev.program_from_source(src, entry)`. Conventions (the runtime's ABI):
- `device [const] T *name [[buffer(i)]]` params are buffers; they come first, with i = 0, 1, ... in order; a buffer is
  writable unless its element type is const;
- `constant long& name [[buffer(P + j)]]` (or `constant int&` / `uint&` / ...) params are int vars, after the
  buffers; the runtime passes each as 8 little-endian bytes (an `int&` reads the low 32 bits);
- any other param must carry a Metal builtin attribute (`[[thread_position_in_grid]]`, ...), which Metal fills in;
- a buffer's size (elements, what a launch checks) comes from `sizes={"x": 1024, "y": "n*4"}`, else it is unchecked;
- `global_size` (threadgroups per grid) and `local_size` (threads per threadgroup) may be given here (ints or
  expressions over the vars) or at each `execute(...)`; the runtime uses `dispatchThreadgroups`.
"""

from __future__ import annotations

from devicekit.errors import CompileError
from devicekit.ir.dtypes import dtypes
from devicekit.ir.ops import Ops
from devicekit.ir.uop import UOp
from devicekit.render.program_spec import ParamSpec, ProgramSpec, VarSpec
from devicekit.render.signature import clang_dtype, clang_index, size_expr

from .hostcheck import _SHIM_ARGS, _builtin_include_args

BUILTINS = frozenset({
    "thread_position_in_grid", "thread_position_in_threadgroup", "threadgroup_position_in_grid",
    "threads_per_threadgroup", "threadgroups_per_grid", "threads_per_grid", "thread_index_in_threadgroup",
    "thread_index_in_simdgroup", "simdgroup_index_in_threadgroup", "threads_per_simdgroup",
    "simdgroups_per_threadgroup", "thread_execution_width", "dispatch_threads_per_threadgroup",
    "grid_origin", "grid_size", "quadgroup_index_in_threadgroup", "thread_index_in_quadgroup",
})


_BF16 = {"bfloat": dtypes.bfloat16}


def _dtype(t):
    """devicekit dtype of a canonical libclang scalar type as the shim declares Metal's types (no double in MSL)."""
    dt = clang_dtype(t, _BF16)
    return None if dt == dtypes.float64 else dt


def _line_before(src: str, line: int, col: int) -> str:
    lines = src.splitlines()
    return lines[line - 1][:max(col - 1, 0)] if 1 <= line <= len(lines) else ""


def _split_params(tokens: list[str], entry: str) -> list[list[str]]:
    """Tokens of each parameter of `entry(...)`, split at top-level commas."""
    try:
        start = next(i for i in range(len(tokens) - 1) if tokens[i] == entry and tokens[i + 1] == "(") + 2
    except StopIteration:
        return []
    out, cur, depth = [], [], 0
    for tok in tokens[start:]:
        if tok in ("(", "[", "{", "<"):
            depth += 1
        elif tok in (")", "]", "}", ">"):
            if depth == 0:
                break
            depth -= 1
        if tok == "," and depth == 0:
            out.append(cur)
            cur = []
        else:
            cur.append(tok)
    if cur:
        out.append(cur)
    return out


def _attribute(toks: list[str]) -> list[str]:
    """The tokens inside a param's `[[ ... ]]`, or []."""
    for i in range(len(toks) - 1):
        if toks[i] == "[" and toks[i + 1] == "[":
            j = i + 2
            inner = []
            while j < len(toks) and not (toks[j] == "]" and j + 1 < len(toks) and toks[j + 1] == "]"):
                inner.append(toks[j])
                j += 1
            return inner
    return []


def parse_msl_source(src: str, entry: str, sizes: dict | None = None, global_size=None, local_size=None,
                     device: str = "METAL") -> ProgramSpec:
    import clang.cindex as ci

    fname = "kernel.metal.cpp"
    args = [*_SHIM_ARGS, *_builtin_include_args(), "-Wno-unknown-attributes"]
    try:
        tu = clang_index().parse(fname, args=args, unsaved_files=[(fname, src)])
    except ci.TranslationUnitLoadError as e:
        raise CompileError(f"libclang could not parse the source: {e}", "", src) from None
    errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
    if errors:
        log = "\n".join(f"kernel.metal:{d.location.line}:{d.location.column}: error: {d.spelling}" for d in errors)
        raise CompileError(f"{entry}: the Metal source has {len(errors)} error(s) (checked against devicekit-metal's "
                           "shim of <metal_stdlib>, which declares only what kernels commonly use)", log, src)
    fns = [c for c in tu.cursor.get_children() if c.kind == ci.CursorKind.FUNCTION_DECL and c.is_definition()
           and c.location.file is not None and c.location.file.name == fname]
    fn = next((c for c in fns if c.spelling == entry), None)
    if fn is None:
        raise CompileError(f"no kernel named {entry!r} in the source (found: "
                           f"{', '.join(sorted(c.spelling for c in fns)) or 'none'})", "", src)
    toks = [t.spelling for t in fn.get_tokens()]
    head = toks[:toks.index(entry)] if entry in toks else []
    if "kernel" not in head and "kernel" not in _line_before(src, fn.extent.start.line, fn.extent.start.column):
        raise CompileError(f"{entry} is not declared `kernel void ...`", "", src)
    per_param = _split_params(toks, entry)
    arguments = list(fn.get_arguments())
    if len(per_param) != len(arguments):
        raise CompileError(f"{entry}: could not read its parameter list", "", src)

    bufs: list[tuple[str, object, bool, int]] = []
    ints: list[tuple[str, object, int]] = []
    signature: list[tuple] = []
    for a, ptoks in zip(arguments, per_param):
        attr = _attribute(ptoks)
        where = f"{entry}:{a.location.line}: param {a.spelling!r} ({a.type.spelling})"
        t = a.type.get_canonical()
        if attr[:2] == ["buffer", "("] and len(attr) >= 3 and attr[2].isdigit():
            slot = int(attr[2])
            if t.kind == ci.TypeKind.POINTER and "device" in ptoks:
                elem = t.get_pointee()
                dt = _dtype(elem.get_canonical())
                if dt is None:
                    raise CompileError(f"{where}: unsupported element type {elem.spelling!r}", "", src)
                if ints:
                    raise CompileError(f"{where}: buffers come before int vars in a devicekit kernel", "", src)
                signature.append(("buffer", len(bufs)))
                bufs.append((a.spelling, dt, not elem.is_const_qualified(), slot))
            elif t.kind == ci.TypeKind.LVALUEREFERENCE and "constant" in ptoks and \
                    (dt := _dtype(t.get_pointee().get_canonical())) is not None and (dt.is_int or dt.is_bool):
                signature.append(("var", len(ints), t.get_pointee().spelling.replace("const ", "").strip()))
                ints.append((a.spelling, dt, slot))
            else:
                raise CompileError(f"{where}: a [[buffer(i)]] param is `device T *` (a buffer) or `constant long&` "
                                   "(an int var)", "", src)
        elif attr and attr[0] in BUILTINS:
            signature.append(("builtin", attr[0], a.type.spelling))
        else:
            raise CompileError(f"{where}: needs [[buffer(i)]] or a Metal builtin attribute", "", src)
    for j, (name, _, _, slot) in enumerate(bufs):
        if slot != j:
            raise CompileError(f"{entry}: buffer {name!r} is [[buffer({slot})]]; devicekit binds buffers at 0, 1, ... "
                               f"in order, so it must be [[buffer({j})]]", "", src)
    for j, (name, _, slot) in enumerate(ints):
        if slot != len(bufs) + j:
            raise CompileError(f"{entry}: var {name!r} is [[buffer({slot})]]; vars follow the buffers, so it must be "
                               f"[[buffer({len(bufs) + j})]]", "", src)
    var_specs = tuple(VarSpec(n, int(max(dt.min(), -(2**63))), int(min(dt.max(), 2**63 - 1))) for n, dt, _ in ints)
    var_uops = {v.name: UOp(Ops.VAR, dtypes.index, (), (v.name, v.lo, v.hi)) for v in var_specs}
    sizes = dict(sizes or {})
    if unknown := set(sizes) - {b[0] for b in bufs}:
        raise CompileError(f"sizes= names {', '.join(sorted(unknown))}, which are not buffer params of {entry}")
    params = tuple(ParamSpec(n, dt, size_expr(sizes[n], var_uops, f"sizes[{n!r}]") if n in sizes else 0, w)
                   for n, dt, w, _ in bufs)
    dims = [None if d is None else tuple(size_expr(x, var_uops, what) for x in (d if isinstance(d, (tuple, list)) else (d,)))
            for d, what in ((global_size, "global_size"), (local_size, "local_size"))]
    return ProgramSpec(name=entry, src=src, device=device, lang="metal", params=params, vars=var_specs,
                       global_size=dims[0], local_size=dims[1], outs=tuple(i for i, p in enumerate(params) if p.writable),
                       ins=tuple(range(len(params))),
                       meta=(("from_source", True), ("signature", tuple(signature)), ("shared_bytes", 0)))
