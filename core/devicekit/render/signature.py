"""Reading the signature of a hand-written kernel, shared by every plugin that accepts source (C, CUDA, MSL, OpenCL).

A plugin's `parse_source(src, entry, **options)` does two things with this module:

1. In the reader process (`parse_worker.bounded("pkg.module:reader", ...)`, so a pathological source cannot hang the
   caller), its reader parses the source with libclang and returns a `Signature` (plain, picklable data):
   - `parse(fname, text, args, unsaved, skip_bodies=False)` -> a libclang TranslationUnit (`clang_index()` is one
     index per process). The `libclang` wheel ships no compiler headers: pass the include setup of the compiler the
     source pairs with (C: its builtin include dir; OpenCL: `-cl-no-stdinc` plus the types opencl-c-base.h would
     declare, or a header dir that has it; otherwise its implicit include is a fatal error);
   - `find_function(tu, entry, fname, is_definition=None)` -> (the FUNCTION_DECL / FUNCTION_TEMPLATE cursor or
     None, names found); with skipped bodies pass `is_definition=lambda c: Bodies(text).span(c) is not None`;
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
   {"param": bytes} for each local param. `launch_shared(spec, var_vals)` evaluates those at launch.

libclang (the `libclang` wheel, a dependency of the source-reading plugins, not of the core) is imported only when a
function that needs it runs.
"""

from __future__ import annotations

import ast
import atexit
import functools
import operator
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import CompileError
from ..ir.dtypes import DType, dtypes
from ..ir.ops import Ops
from ..ir.uop import SymInt, UOp, sym_eval

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


# ---------------------------------------------------------------- plain data: what a reader returns


@dataclass(frozen=True)
class Param:
    """One parameter of a hand-written kernel, in declaration order."""

    name: str
    kind: str  # "buffer" | "scalar" | "local" | "builtin"
    dtype: DType | None  # buffer/local: the element (a vector dtype for float4 *); scalar: its type; builtin: None
    writable: bool = False  # buffers: the element is not const and not in the constant address space
    space: str = ""  # "global", "local", "constant", "private", "" when the language names none (C, CUDA)
    type: str = ""  # the type as written
    line: int = 0
    extent: int | str | None = None  # elements stated: float x[1024] -> 1024, double A[n][m] -> "(n)*(m)"
    attr: tuple[str, ...] = ()  # a Metal attribute's tokens: ("buffer", "(", "0", ")"), ("thread_position_in_grid",)
    slot: int | None = None  # Metal [[buffer(n)]] / [[threadgroup(n)]] index


@dataclass(frozen=True)
class Signature:
    """What a reader found: the entry as the user named it and its params; `facts` holds plugin-specific answers
    (a C++ entry's source name, host-only line ranges, ...)."""

    entry: str
    params: tuple[Param, ...]
    line: int = 0
    facts: tuple[tuple[str, Any], ...] = field(default=())

    def fact(self, key: str, default: Any = None) -> Any:
        return dict(self.facts).get(key, default)


# ---------------------------------------------------------------- libclang side (runs in the reader process)


@functools.cache
def clang_index():
    """One libclang index per process, freed before interpreter teardown (cindex's __del__ needs its module)."""
    import clang.cindex as ci
    atexit.register(clang_index.cache_clear)
    return ci.Index.create()


def parse(fname: str, text: str, args: list[str], unsaved: list[tuple[str, str]] = (), src: str = "",
          skip_bodies: bool = False):
    """A libclang TranslationUnit of `text` (an unsaved file named `fname`); CompileError when libclang gives up.
    `skip_bodies`: function bodies are not parsed (faster, and a body using names the reader cannot see cannot
    poison a template); then no cursor is a definition: use `has_body`."""
    import clang.cindex as ci
    try:
        return clang_index().parse(fname, args=["-ferror-limit=0", *args], unsaved_files=[(fname, text), *unsaved],
                                   options=ci.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES if skip_bodies else 0)
    except ci.TranslationUnitLoadError as e:
        raise CompileError(f"libclang could not parse the source: {e}", "", src or text) from None


def included_files(tu, skip_prefix: str = "") -> tuple[str, ...]:
    """Every file the translation unit included (libclang's inclusion list), but the stand-ins under
    `skip_prefix`: the reader's list of what the compile reads, for the cache's dependency manifest."""
    out = []
    for inc in tu.get_includes():
        name = inc.include.name if inc.include is not None else ""
        if name and not (skip_prefix and name.startswith(skip_prefix)):
            out.append(name)
    return tuple(sorted(set(out)))


def _in_file(c, fname: str) -> bool:
    return c.location.file is not None and c.location.file.name == fname


def find_function(tu, entry: str, fname: str, is_definition=None):
    """The definition of `entry` (the name before any `<...>`) in `fname`, searching namespaces and extern "C"
    blocks: (cursor or None, names of every function defined there). `is_definition(cursor)` replaces libclang's
    answer (needed when bodies were skipped: see `has_body`)."""
    import clang.cindex as ci
    base = entry.split("<", 1)[0].strip().split("::")[-1]
    found, names = None, []
    kinds = (ci.CursorKind.FUNCTION_DECL, ci.CursorKind.FUNCTION_TEMPLATE)
    defined = is_definition or (lambda c: c.is_definition())

    scopes = (ci.CursorKind.LINKAGE_SPEC, ci.CursorKind.UNEXPOSED_DECL, ci.CursorKind.NAMESPACE)

    def walk(cursor):
        nonlocal found
        for c in cursor.get_children():
            if c.kind not in scopes and c.kind not in kinds:
                continue  # the kind is cheap to ask, the location is not: filter on it first
            if c.location.file is not None and c.location.file.name != fname:
                continue
            if c.kind in scopes:
                walk(c)
            elif c.kind in kinds and defined(c):
                names.append(c.spelling)
                if c.spelling == base and found is None:
                    found = c
    walk(tu.cursor)
    return found, names


_PUNCT = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[{}();]', re.DOTALL)


class Bodies:
    """Where function bodies are, from the text the parser read (bodies skipped by the parser are still there):
    `span(cursor)` -> (first line, last line) of the declaration with its body, or None for a prototype. One regex
    pass over the text (comments and literals skipped), so it costs microseconds, not a token walk."""

    def __init__(self, text: str):
        import bisect
        self._bisect = bisect
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        toks = [(m.start(), m.group()) for m in _PUNCT.finditer(text) if m.group()[0] in "{}();"]
        self.offsets = [o for o, _ in toks]
        self.toks = [t for _, t in toks]

    def _offset(self, line: int, col: int) -> int:
        return self.line_starts[line - 1] + col - 1

    def _line(self, offset: int) -> int:
        return self._bisect.bisect_right(self.line_starts, offset)

    def span(self, c) -> tuple[int, int] | None:
        end = self._offset(c.extent.end.line, c.extent.end.column)
        depth = paren = 0
        for j in range(self._bisect.bisect_left(self.offsets, end), len(self.toks)):
            tok = self.toks[j]
            if depth == 0 and paren == 0 and tok == ";":
                return None
            if tok == "(":
                paren += 1
            elif tok == ")":
                paren -= 1
            elif tok == "{":
                depth += 1
            elif tok == "}":
                depth -= 1
                if depth == 0:
                    return c.extent.start.line, self._line(self.offsets[j])
        return None


def template_params(fn) -> list[Any]:
    """The PARM_DECL children of a function (template) cursor, in order."""
    import clang.cindex as ci
    if fn.kind == ci.CursorKind.FUNCTION_DECL:
        return list(fn.get_arguments())
    return [c for c in fn.get_children() if c.kind == ci.CursorKind.PARM_DECL]


def instance_arg_types(tu, var_name: str, fname: str):
    """The canonical parameter types of the function `var_name` points to (`auto* var_name = &f<T, 32>;`), or None."""
    import clang.cindex as ci
    for c in tu.cursor.get_children():
        if c.kind == ci.CursorKind.VAR_DECL and c.spelling == var_name and _in_file(c, fname):
            t = c.type.get_canonical()
            if t.kind == ci.TypeKind.POINTER and t.get_pointee().kind == ci.TypeKind.FUNCTIONPROTO:
                return list(t.get_pointee().argument_types())
    return None


def signature_errors(tu, fn, fname: str, line_offset: int = 0) -> list[str]:
    """Error diagnostics between the start of `fn` and its body ('fname:line:col: error: ...', user line numbers),
    and any fatal error (after one libclang stops reporting, so a signature that looked clean may not be). Errors in
    the body are the compiler's to report."""
    import clang.cindex as ci
    body = next((c for c in fn.get_children() if c.kind == ci.CursorKind.COMPOUND_STMT), None)
    start = (fn.extent.start.line, fn.extent.start.column)
    end = (body.extent.start.line, body.extent.start.column) if body is not None else (fn.extent.end.line, 1 << 30)
    out = []
    for d in tu.diagnostics:
        if d.severity >= ci.Diagnostic.Fatal:
            where = f"{fname}:{d.location.line - line_offset}" if _in_file(d, fname) else str(d.location.file)
            out.append(f"{where}:{d.location.column}: fatal error: {d.spelling}")
        elif d.severity >= ci.Diagnostic.Error and _in_file(d, fname) and \
                start <= (d.location.line, d.location.column) < end:
            out.append(f"{fname}:{d.location.line - line_offset}:{d.location.column}: error: {d.spelling}")
    return out


def first_errors(tu, fname: str, line_offset: int = 0, limit: int = 5) -> list[str]:
    """The first error diagnostics anywhere (for 'entry not found' messages)."""
    import clang.cindex as ci
    out = []
    for d in tu.diagnostics:
        if d.severity >= ci.Diagnostic.Error:
            line = d.location.line - line_offset if _in_file(d, fname) else d.location.line
            out.append(f"{d.location.file or fname}:{line}:{d.location.column}: error: {d.spelling}")
            if len(out) >= limit:
                break
    return out


_UNSIGNED = ("UCHAR", "CHAR_U", "USHORT", "UINT", "ULONG", "ULONGLONG", "UINT128")
_SIGNED = ("SCHAR", "CHAR_S", "SHORT", "INT", "LONG", "LONGLONG", "INT128", "WCHAR")


def _record_name(spelling: str) -> str:
    s = re.sub(r"\b(const|volatile|struct|class|union|__global|__local|__constant|__private|__generic)\b", " ",
               spelling)
    return " ".join(s.split()).split("::")[-1]


def clang_dtype(t, records: dict[str, DType] | None = None) -> DType | None:
    """The dtype of a canonical libclang scalar or vector type, or None. `records` maps struct names a language
    uses for scalars and vectors (CUDA's __nv_bfloat16 and float4, Metal's bfloat) to their dtype."""
    import clang.cindex as ci
    spelling = _record_name(t.spelling)
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
    if k.name in ("VECTOR", "EXTVECTOR"):
        el = clang_dtype(t.element_type.get_canonical(), records)
        n = t.element_count
        if el is None or el.count != 1 or not 1 <= n <= 16:
            return None
        size = t.get_size()
        if n == 3 and size == 4 * el.itemsize:
            n = 4  # OpenCL and Metal pad 3-vectors to four lanes (sizeof(float3) == 16): the buffer's stride
        return el if n == 1 else el.vec(n)
    if k == ci.TypeKind.ENUM:
        return clang_dtype(t.get_declaration().enum_type.get_canonical(), records)
    if k == ci.TypeKind.RECORD:
        return (records or {}).get(spelling)
    if k.name in _UNSIGNED or k.name in _SIGNED:
        bits = t.get_size() * 8
        if bits not in (8, 16, 32, 64):
            return None
        return dtypes.from_name(f"{'u' if k.name in _UNSIGNED else ''}int{bits}")
    return None


_SPACES = {"__global": "global", "global": "global", "__local": "local", "local": "local",
           "__constant": "constant", "constant": "constant", "__private": "private", "private": "private",
           "__generic": "generic", "generic": "generic", "device": "global", "threadgroup": "local"}
_SPELLED_SPACES = ("__global", "__local", "__constant", "__private", "__generic")


def _space(spelling: str, tokens: tuple[str, ...] | None) -> str:
    """The address space a type spelling (OpenCL) or a param's tokens (Metal, whose shim defines them away) name."""
    words = re.findall(r"[A-Za-z_]\w*", spelling)
    for w in words:
        if w in _SPELLED_SPACES:
            return _SPACES[w]
    for w in tokens or ():
        if w in _SPACES:
            return _SPACES[w]
    return ""


_QUALS = {"restrict", "__restrict", "__restrict__", "static", "const", "volatile"}


def _bracket_extent(tokens: tuple[str, ...], name: str) -> str | None:
    """`double A[n][m]` -> "(n)*(m)" from the param's tokens (C99 VLA params: the dims are the user's ints)."""
    if name not in tokens:
        return None
    toks = list(tokens[tokens.index(name) + 1:])
    dims, depth, cur = [], 0, []
    for t in toks:
        if t == "[":
            depth += 1
            if depth == 1:
                cur = []
                continue
        elif t == "]":
            depth -= 1
            if depth == 0:
                dims.append([x for x in cur if x not in _QUALS])
                continue
        if depth >= 1:
            cur.append(t)
    if not dims or any(not d or d == ["*"] for d in dims):
        return None
    return "*".join("(" + " ".join("//" if x == "/" else x for x in d) + ")" for d in dims)


def _tk(t):
    """A type's kind, or None for a kind newer than these python bindings (e.g. _Float16's)."""
    try:
        return t.kind
    except ValueError:
        return None


class Unsupported(CompileError):
    """A parameter type no launch can pass; the message says what to write instead."""


def read_param(name: str, t, line: int, where: str, records: dict[str, DType] | None = None,
               tokens: tuple[str, ...] | None = None, by_ref_scalars: bool = False) -> Param:
    """A Param from a parameter's type `t` (as declared, or a template instance's canonical type). `tokens`: the
    param's tokens (extents of VLA params, Metal address spaces). `by_ref_scalars`: `constant T&` is a scalar."""
    import clang.cindex as ci
    ct = t.get_canonical()
    written = t.spelling
    k = _tk(ct)
    if k in (ci.TypeKind.POINTER, ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY,
             ci.TypeKind.VARIABLEARRAY, ci.TypeKind.DEPENDENTSIZEDARRAY):
        elem = ct.get_pointee() if k == ci.TypeKind.POINTER else ct.element_type
        extent: int | str | None = None
        if k == ci.TypeKind.CONSTANTARRAY:
            extent = ct.element_count
        elif k == ci.TypeKind.VARIABLEARRAY:  # the dims as written, else as a macro wrote them (POLYBENCH_2D(...))
            extent = _bracket_extent(tokens or (), name) or _bracket_extent(
                (name, "[", *re.findall(r"\w+|\S", written.partition("[")[2])), name)
        inner = elem.get_canonical()
        while _tk(inner) in (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.VARIABLEARRAY, ci.TypeKind.INCOMPLETEARRAY):
            if _tk(inner) == ci.TypeKind.CONSTANTARRAY and isinstance(extent, int):
                extent *= inner.element_count
            elif k != ci.TypeKind.VARIABLEARRAY:  # pointer to rows (double (*B)[n]): the row count is not stated
                extent = None
            inner = inner.element_type.get_canonical()
        if k == ci.TypeKind.POINTER and _tk(elem.get_canonical()) != _tk(inner):
            extent = None
        if _tk(inner) == ci.TypeKind.POINTER:
            raise Unsupported(f"{where}: pointers to pointers cannot be passed to a kernel: pass each array as its "
                              "own buffer param (or one flat buffer and an index)")
        if _tk(inner) in (ci.TypeKind.FUNCTIONPROTO, ci.TypeKind.FUNCTIONNOPROTO):
            raise Unsupported(f"{where}: function pointers cannot be passed to a kernel: call the function "
                              "directly in the kernel, or pass an int that selects it")
        if _tk(inner) == ci.TypeKind.VOID:
            raise Unsupported(f"{where}: a void * buffer has no element type: declare it (float *, const int *, "
                              "unsigned char * for raw bytes)")
        dt = clang_dtype(inner, records)
        if dt is None:
            if _tk(inner) == ci.TypeKind.RECORD:
                raise Unsupported(f"{where}: buffers of structs ({inner.spelling}) cannot be read: pass one buffer "
                                  "per field (structure of arrays), or the bytes as unsigned char *")
            raise Unsupported(f"{where}: unsupported element type {inner.spelling!r}")
        space = _space(elem.spelling, tokens)
        const = elem.is_const_qualified() or inner.is_const_qualified()
        kind = "local" if space == "local" else "buffer"
        return Param(name, kind, dt, writable=not const and space != "constant", space=space, type=written,
                     line=line, extent=extent)
    if k == ci.TypeKind.LVALUEREFERENCE and by_ref_scalars:
        inner = ct.get_pointee().get_canonical()
        dt = clang_dtype(inner, records)
        if dt is None:
            raise Unsupported(f"{where}: a by-reference param must be a scalar or vector (constant float &a), "
                              f"not {inner.spelling!r}")
        return Param(name, "scalar", dt, space=_space(ct.get_pointee().spelling, tokens), type=written, line=line)
    if k in (ci.TypeKind.LVALUEREFERENCE, ci.TypeKind.RVALUEREFERENCE):
        raise Unsupported(f"{where}: reference params cannot be passed to a kernel: take the value (float a) or a "
                          "pointer (float *a)")
    dt = clang_dtype(ct, records)
    if dt is not None:
        return Param(name, "scalar", dt, space=_space(written, tokens), type=written, line=line)
    if k == ci.TypeKind.RECORD:
        raise Unsupported(f"{where}: struct params cannot be read yet: pass each field as its own param, or the "
                          "struct's bytes in a buffer (const unsigned char *)")
    raise Unsupported(f"{where}: unsupported parameter type {ct.spelling!r}: use a pointer (a buffer), an "
                      "integer, float or double")


# ---------------------------------------------------------------- caller side: Signature -> ProgramSpec


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
