"""The reader side of hand-written kernel signatures (see devicekit.render.signature, whose names these are too):
what a plugin's reader runs in the reader process with libclang, and the plain, picklable data it returns
(`Param`, `Signature`). libclang is imported only when a function that needs it runs."""

from __future__ import annotations

import atexit
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import CompileError
from ..ir.dtypes import DType, dtypes

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



def entry_function(tu, entry: str, fname: str, src: str, line_offset: int = 0, is_definition=None,
                   with_errors: bool = True):
    """`find_function`'s definition of `entry`, else the one CompileError every reader gives: the functions the file
    defines and, with `with_errors`, its first errors (a typo in the signature can hide the definition)."""
    fn, names = find_function(tu, entry, fname, is_definition)
    if fn is None:
        errs = "\n".join(first_errors(tu, fname, line_offset)) if with_errors else ""
        raise CompileError(f"no function definition named {entry.split('<')[0]!r} in the source (found: "
                           f"{', '.join(sorted(set(names))) or 'none'})", errs, src)
    return fn


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
