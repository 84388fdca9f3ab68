"""Reading the signature of a hand-written kernel, shared by every plugin that accepts source (C, CUDA, MSL, OpenCL).

A plugin's `parse_source(src, entry, **options)` does two things with this module:

1. In the reader process (`parse_worker.bounded("pkg.module:reader", ...)`, so a pathological source cannot hang the
   caller), its reader parses the source with libclang and returns a `Signature` (plain, picklable data); these
   functions and the data live in `render/source_reader.py` and are re-exported here:
   - `parse(fname, text, args, unsaved, skip_bodies=False)` -> a libclang TranslationUnit (`clang_index()` is one
     index per process). The `libclang` wheel ships no compiler headers: pass the include setup of the compiler the
     source pairs with (C: its builtin include dir; OpenCL: `-cl-no-stdinc` plus the types opencl-c-base.h would
     declare, or a header dir that has it; otherwise its implicit include is a fatal error);
   - `find_function(tu, entry, fname, is_definition=None)` -> (the FUNCTION_DECL / FUNCTION_TEMPLATE cursor or
     None, names found); `entry_function(tu, entry, fname, src, ...)` -> the cursor, else the CompileError every
     reader gives (the functions found, the first errors); with skipped bodies pass `is_definition=lambda c: Bodies(text).span(c) is not None`;
     `template_params(fn)` -> its PARM_DECLs; C++ templates: `instance_arg_types(tu, var_name, fname)` reads the
     parameter types of an instantiation the reader wrote into the source as `auto* var_name = &entry<args>;`;
   - `signature_errors(tu, fn, fname, line_offset)` -> the errors inside the signature, and any fatal error (the body
     is the compiler's); `first_errors(tu, fname)` for "entry not found" messages;
   - `Bodies(text).span(cursor)` -> the lines of a definition with its body (None for a prototype), from the text;
   - `read_param(name, type, line, where, records=..., tokens=...)` -> a `Param`, or a one-line CompileError saying
     what to do instead (structs, function pointers, pointers to pointers, void *);
   - `clang_dtype(type, records)` -> the DType of a scalar or vector type (all 8-64 bit ints, bool, half, float,
     double, `float4`/`int2`/... as vectors: ext_vector types directly, struct vector types through `records`;
     a 3-vector that the language pads to four lanes, OpenCL's and Metal's `float3`, is four lanes: its stride).
   A `Param` is a buffer (pointer or array param: global / constant memory), a scalar (by value, or Metal's
   `constant T&`), local (a pointer to dynamic shared memory: OpenCL `__local`, Metal `threadgroup`) or a builtin
   (Metal's `[[thread_position_in_grid]]`, filled by the launch). Address spaces come from the type's spelling
   (`__global`/`global`, `__local`/`local`, `__constant`/`constant`, `__private`) or, where a shim defines them
   away (Metal), from the param's tokens (`device`, `constant`, `threadgroup`). `const` on the element makes a
   buffer read-only, and so does the constant address space; `restrict`/`__restrict__`/`volatile` are ignored.
   Extents the declaration states become the buffer's size: `float x[1024]` -> 1024, C99 `double A[n][m]` -> n*m.

2. In the caller, `build_spec(sig, src, device=..., lang=..., sizes=..., global_size=..., local_size=...,
   shared_bytes=..., split=...)` makes the ProgramSpec: buffers become `params` (declaration order), scalars `vars`
   (declaration order, with their dtype: ints are bounded by their C type, floats take any number), and the
   interleaved order goes to `meta["args"]` (`ProgramSpec.arg_order()`: ("buffer", i) / ("var", j) / ("local", k) /
   ("builtin", k)), with the Params themselves in `meta["source_params"]`. `sizes={"x": "n*4"}` (elements: an int or
   an expression over int params with + - * // % and parentheses) states buffer sizes; `shared_bytes` sizes dynamic
   shared memory: an int/expression for CUDA's `extern __shared__` (or a kernel's only local param), or
   {"param": bytes} for each local param. `launch_shared(spec, var_vals)` evaluates those at launch, and
   `launch_args(spec, var_vals, buffer=, var=, local=)` makes the argument list in declaration order.

libclang (the `libclang` wheel, a dependency of the source-reading plugins, not of the core) is imported only when a
function that needs it runs.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from ..errors import CompileError
from ..ir.dtypes import dtypes
from ..ir.ops import Ops
from ..ir.uop import SymInt, UOp, sym_eval

# the reader side (libclang, the data a reader returns) lives in source_reader.py; its names are this module's too
from .source_reader import (
    Bodies,
    Param,
    Signature,
    Unsupported,
    clang_dtype,
    clang_index,
    entry_function,
    find_function,
    first_errors,
    included_files,
    instance_arg_types,
    parse,
    read_param,
    signature_errors,
    template_params,
)

__all__ = ["Bodies", "Param", "Signature", "Unsupported", "build_spec", "clang_dtype", "clang_index",
           "entry_function", "find_function", "first_errors", "included_files", "instance_arg_types", "launch_args", "launch_shared", "parse", "read_param",
           "signature_errors", "size_expr", "template_params"]

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
            if isinstance(n.op, (ast.FloorDiv, ast.Mod)) and isinstance(b, int) and b == 0:
                raise CompileError(f"{what}: {shown} divides by zero")
            if isinstance(a, int) and isinstance(b, int):
                return _BINOPS[type(n.op)](a, b)
            return _BINOPS[type(n.op)](a if isinstance(a, UOp) else UOp.const(dtypes.index, a), b)
        raise CompileError(f"{what}: unsupported expression {shown} (use ints, int params, + - * // %)")

    shown = repr(expr) if len(expr) <= 200 else f"{expr[:80]!r}... ({len(expr)} characters)"
    try:
        return ev(ast.parse(expr.strip(), mode="eval"))
    except SyntaxError as e:
        raise CompileError(f"{what}: cannot parse {shown}: {e.msg}") from None
    except (RecursionError, MemoryError, ValueError) as e:  # nested too deep, too many digits for int()
        raise CompileError(f"{what}: cannot parse {shown}: {type(e).__name__}: {str(e)[:100]}") from None


def _dims(d: Any, var_uops: dict[str, UOp], what: str) -> tuple[SymInt, ...] | None:
    if d is None:
        return None
    d = tuple(d) if isinstance(d, (tuple, list)) else (d,)
    if not 1 <= len(d) <= 3:
        raise CompileError(f"{what}: 1 to 3 dims, got {d!r}")
    return tuple(size_expr(x, var_uops, what) for x in d)


def build_spec(sig: Signature, src: str, *, device: str, lang: str, sizes: dict | None = None,
               global_size: Any = None, local_size: Any = None, shared_bytes: Any = None,
               split: int | str | None = None, meta: tuple = ()) -> Any:
    """The ProgramSpec of a hand-written kernel from what its reader found (see the module docstring)."""
    from .program_spec import ParamSpec, ProgramSpec, VarSpec

    entry = sig.entry
    bufs = [p for p in sig.params if p.kind == "buffer"]
    scalars = [p for p in sig.params if p.kind == "scalar"]
    locals_ = [p for p in sig.params if p.kind == "local"]
    var_specs = []
    for p in scalars:
        dt = p.dtype
        if dt.count != 1:
            raise CompileError(f"{entry}:{p.line}: param {p.name!r} ({p.type}): vector params by value cannot be "
                               "passed yet: pass the lanes as separate scalars, or a buffer")
        lo, hi = (-float("inf"), float("inf")) if dt.is_float else (int(dt.min()), int(dt.max()))
        var_specs.append(VarSpec(p.name, lo, hi, dt))
    var_uops = {v.name: UOp(Ops.VAR, dtypes.index, (), (v.name, int(v.lo), int(v.hi)))
                for v in var_specs if not v.is_float and v.dtype is not None and not v.dtype.is_bool}
    sizes = dict(sizes or {})
    if not isinstance(sizes, dict):
        raise CompileError(f"sizes=: expected a dict {{param: elements}}, got {type(sizes).__name__}")
    if unknown := set(sizes) - {p.name for p in bufs}:
        raise CompileError(f"sizes= names {', '.join(sorted(unknown))}, which are not buffer params of {entry} "
                           f"(its buffers: {', '.join(p.name for p in bufs) or 'none'})")
    params = []
    for p in bufs:
        if p.name in sizes:
            size = size_expr(sizes[p.name], var_uops, f"sizes[{p.name!r}]")
        elif p.extent is None:
            size = 0  # unchecked
        else:
            try:
                size = size_expr(p.extent, var_uops, f"{entry}: the extent of {p.name!r}")
            except CompileError:
                size = 0  # a dim the checker cannot follow (a macro, a float): unchecked, as when none is stated
        params.append(ParamSpec(p.name, p.dtype, size, p.writable))
    local_bytes: list[SymInt] = []
    dynamic: SymInt | None = None
    if locals_:
        if isinstance(shared_bytes, dict):
            if unknown := set(shared_bytes) - {p.name for p in locals_}:
                raise CompileError(f"shared_bytes= names {', '.join(sorted(unknown))}, which are not local-memory "
                                   f"params of {entry} (those are: {', '.join(p.name for p in locals_)})")
            given = dict(shared_bytes)
        elif shared_bytes is not None and len(locals_) == 1:
            given = {locals_[0].name: shared_bytes}
        elif shared_bytes is not None:
            raise CompileError(f"{entry} has {len(locals_)} local-memory params ({', '.join(p.name for p in locals_)})"
                               ": give each its bytes, shared_bytes={name: bytes, ...}")
        else:
            given = {}
        for p in locals_:
            if p.name not in given:
                raise CompileError(f"{entry}:{p.line}: param {p.name!r} ({p.type}) is local memory the launch "
                                   f"allocates: give its size in bytes, shared_bytes={{{p.name!r}: 4096}} (an int "
                                   "or an expression over the int params)")
            local_bytes.append(size_expr(given[p.name], var_uops, f"shared_bytes[{p.name!r}]"))
    elif isinstance(shared_bytes, dict):
        raise CompileError(f"shared_bytes= is a dict but {entry} has no local-memory params; give the dynamic shared "
                           "memory as one int or expression (bytes)")
    elif shared_bytes is not None:
        dynamic = size_expr(shared_bytes, var_uops, "shared_bytes")
    order, counters = [], {"buffer": 0, "scalar": 0, "local": 0, "builtin": 0}
    for p in sig.params:
        order.append(("var" if p.kind == "scalar" else p.kind, counters[p.kind]))
        counters[p.kind] += 1
    from ..compile.deps import active_context
    facts = (("from_source", True), ("args", tuple(order)), ("source_params", tuple(sig.params)),
             ("source_ctx", active_context()), ("reader_deps", tuple(sig.fact("includes", ()))))
    if local_bytes:
        facts += (("local_bytes", tuple(local_bytes)),)
    if dynamic is not None:
        facts += (("dynamic_shared", dynamic),)
    return ProgramSpec(name=entry, src=src, device=device, lang=lang, params=tuple(params), vars=tuple(var_specs),
                       global_size=_dims(global_size, var_uops, "global_size"),
                       local_size=_dims(local_size, var_uops, "local_size"),
                       core_split=None if split is None else size_expr(split, var_uops, "split"),
                       outs=tuple(i for i, p in enumerate(params) if p.writable), ins=tuple(range(len(params))),
                       meta=facts + tuple(meta))


def launch_shared(spec: Any, var_vals: dict[str, Any]) -> tuple[int, tuple[int, ...]]:
    """(dynamic shared bytes, bytes of each local-memory param) of a hand-written kernel for these var values."""
    ints = {k: v for k, v in var_vals.items() if isinstance(v, int)}
    dyn = spec.get_meta("dynamic_shared")
    locs = spec.get_meta("local_bytes") or ()
    return (0 if dyn is None else int(sym_eval(dyn, ints))), tuple(int(sym_eval(x, ints)) for x in locs)


def launch_args(spec: Any, var_vals: dict[str, Any], buffer: Callable[[int], Any], var: Callable[[int], Any],
                local: Callable[[int], Any]) -> list[Any]:
    """A hand-written kernel's arguments in its declaration order (`ProgramSpec.arg_order`), each as the driver takes
    it: `buffer(i)` for params[i], `var(j)` for vars[j], `local(nbytes)` for a local-memory param (its bytes for these
    var values: `launch_shared`). Builtin params are the launch's own (Metal's thread positions) and are left out."""
    order = spec.arg_order()
    locs = launch_shared(spec, var_vals)[1] if any(kind == "local" for kind, _ in order) else ()
    make = {"buffer": buffer, "var": var, "local": lambda k: local(locs[k])}
    return [make[kind](i) for kind, i in order if kind != "builtin"]
