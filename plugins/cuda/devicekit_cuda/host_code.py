"""Where a hand-written CUDA file's host code is, in the file and in its own headers, so NVRTC sees device code only.

nvcc gives a .cu file's host code to the host compiler; NVRTC compiles device code only and has no host headers, so
host code must not reach it. Host code is, at namespace scope (in the reader's libclang parse):
  * function definitions and prototypes with neither __global__ nor __device__ (constexpr ones are kept: device
    code may call them), unless a device declaration of the same name exists;
  * variables that are neither __device__, __constant__, __shared__, __managed__, const nor constexpr: device code
    cannot use them, and their types often come from host libraries (`cublasHandle_t handle;` in llm.c's common.h).
Each is blanked, its lines kept, so NVRTC's line numbers are the user's. The file's own headers (found on the
include path: PolyBench/ACC's `#include <polybench.c>` at the end of every .cu, llm.c's common.h) are blanked the
same way and given to NVRTC in memory under the name they are included by (NVRTC takes an in-memory header before
the file on disk)."""

from __future__ import annotations

import re

from devicekit.render import signature as sg

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]')
_DEVICE_SPACES = {"dk_global", "dk_device", "dk_constant", "dk_shared", "dk_managed"}
MAX_HEADER_BYTES = 1 << 22


def annotations(c) -> set[str]:
    import clang.cindex as ci
    return {a.spelling for a in c.get_children() if a.kind == ci.CursorKind.ANNOTATE_ATTR}


def _is_const(t) -> bool:
    import clang.cindex as ci
    while t.kind in (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY, ci.TypeKind.VARIABLEARRAY,
                     ci.TypeKind.DEPENDENTSIZEDARRAY):
        t = t.element_type
    return t.is_const_qualified()


def _read(path: str, encoding: str) -> str | None:
    try:
        with open(path, encoding=encoding, errors="replace") as f:
            return f.read(MAX_HEADER_BYTES)
    except OSError:
        return None


def host_ranges(tu, main_file: str, main_text: str, line_offset: int, skip_prefix: str,
                skip_names: tuple[str, ...] = ()) -> dict[str, list[tuple[int, int]]]:
    """{file: [(first line, last line), ...]} of host code in `main_file` (user line numbers: `line_offset` lines of
    preamble taken off) and in every header of the file's own (libclang's inclusion list but the stand-ins under
    `skip_prefix`). Variables named in `skip_names` (the reader's own additions) are left alone."""
    import clang.cindex as ci
    own = {inc.include.name for inc in tu.get_includes()
           if inc.include is not None and not inc.include.name.startswith(skip_prefix)}
    bodies: dict[str, sg.Bodies | None] = {main_file: sg.Bodies(main_text)}
    scopes = (ci.CursorKind.NAMESPACE, ci.CursorKind.LINKAGE_SPEC, ci.CursorKind.UNEXPOSED_DECL)
    functions = (ci.CursorKind.FUNCTION_DECL, ci.CursorKind.FUNCTION_TEMPLATE)
    found: list[tuple[str, object]] = []

    def walk(cursor):
        for c in cursor.get_children():
            if c.kind not in scopes and c.kind not in functions and c.kind != ci.CursorKind.VAR_DECL:
                continue  # the kind is cheap to ask, the location is not: filter on it first
            f = c.location.file
            name = f.name if f is not None else None
            if name != main_file and name not in own:
                continue
            if name == main_file and c.location.line <= line_offset:
                continue
            if c.kind in scopes:
                walk(c)
            else:
                found.append((name, c))
    walk(tu.cursor)
    device = {c.spelling for _, c in found if c.kind in functions and annotations(c) & _DEVICE_SPACES}
    out: dict[str, list[tuple[int, int]]] = {}
    for fname, c in found:
        if fname not in bodies:  # byte columns (libclang's) are character offsets in a latin-1 reading
            text = _read(fname, "latin-1")
            bodies[fname] = sg.Bodies(text) if text is not None else None
        if bodies[fname] is None or annotations(c) & _DEVICE_SPACES:
            continue
        if any(t.spelling == "constexpr" for t in c.get_tokens()):
            continue  # usable from device code (functions with --expt-relaxed-constexpr): keep
        if c.kind == ci.CursorKind.VAR_DECL:
            if c.spelling in skip_names or _is_const(c.type):
                continue
            span = (c.extent.start.line, c.extent.end.line)
        else:
            span = bodies[fname].span(c)
            if span is None:  # a prototype: host only unless a device declaration shares its name
                if c.spelling in device:
                    continue
                span = (c.extent.start.line, c.extent.end.line)
        shift = line_offset if fname == main_file else 0
        start, end = span[0] - shift, span[1] - shift
        if start >= 1:
            out.setdefault(fname, []).append((start, end))
    return out


def include_names(tu, main_file: str, main_text: str, skip_prefix: str) -> dict[str, str]:
    """{include name as written: file} for the file's own headers; a name that reaches two files is left out (one
    in-memory header per name)."""
    texts = {main_file: main_text.split("\n")}
    names: dict[str, str] = {}
    clash: set[str] = set()
    for inc in tu.get_includes():
        if inc.include is None or inc.include.name.startswith(skip_prefix) or inc.source is None:
            continue
        src = inc.source.name
        if src not in texts:
            text = _read(src, "utf-8")
            texts[src] = text.split("\n") if text is not None else []
        lines = texts[src]
        line = inc.location.line
        m = _INCLUDE.match(lines[line - 1]) if 0 < line <= len(lines) else None
        if m is None:
            continue
        name, path = m.group(1), inc.include.name
        if names.setdefault(name, path) != path:
            clash.add(name)
    return {n: p for n, p in names.items() if n not in clash}


def blank(text: str, ranges) -> str:
    """`text` with the lines of `ranges` (1-based, inclusive) emptied, the line count kept."""
    if not ranges:
        return text
    lines = text.split("\n")
    for start, end in ranges:
        for i in range(start - 1, min(end, len(lines))):
            lines[i] = ""
    return "\n".join(lines)


def device_headers(ranges: dict[str, list[tuple[int, int]]], names: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """(include name, text with its host code blanked) for each own header that has host code."""
    out = []
    for name, path in sorted(names.items()):
        if ranges.get(path):
            text = _read(path, "utf-8")
            if text is not None:
                out.append((name, blank(text, ranges[path])))
    return tuple(out)
