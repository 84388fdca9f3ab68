"""Hand-written WGSL compute shaders: the signature from the module's `@group(0) @binding(n)` declarations.

Conventions (docs/handwritten.md):
- the entry is an `@compute @workgroup_size(x[, y[, z]]) fn entry(...)` with integer literal sizes; a launch's
  local_size must be that size (or left out), and global_size counts workgroups;
- every `var<storage, read>` / `var<storage, read_write>` binding of group 0 is a buffer param (`array<T>` or
  `array<T, N>`, T one of f32, i32, u32, f16, atomic<i32>, atomic<u32>), in binding order; read_write ones are
  writable;
- at most one `var<uniform>` binding, of a struct whose fields (i32, u32, f32) are the vars, in field order;
- `sizes={"x": "n"}` states buffer sizes in elements (unchecked otherwise). The body is naga's to judge, at compile.
"""

from __future__ import annotations

import re

from devicekit.errors import CompileError
from devicekit.ir.dtypes import dtypes
from devicekit.render import signature as sg

_ELEM = {"f32": dtypes.float32, "i32": dtypes.int32, "u32": dtypes.uint32, "f16": dtypes.float16,
         "atomic<i32>": dtypes.int32, "atomic<u32>": dtypes.uint32}
_FIELD = {"f32": dtypes.float32, "i32": dtypes.int32, "u32": dtypes.uint32}
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_BINDING = re.compile(r"((?:@(?:group|binding)\s*\(\s*\d+\s*\)\s*){2})var\s*<\s*(storage|uniform)\s*(?:,\s*(\w+)\s*)?>"
                      r"\s*(\w+)\s*:\s*([^;]+);")
_STRUCT = re.compile(r"struct\s+(\w+)\s*\{([^}]*)\}")
_ENTRY = r"@compute\s*@workgroup_size\s*\(([^)]*)\)\s*fn\s+{}\s*\("


def _line(src: str, pos: int) -> int:
    return src.count("\n", 0, pos) + 1


def parse_wgsl_source(src: str, entry: str, sizes: dict | None = None, global_size=None, local_size=None,
                      device: str = "WEBGPU"):
    """The ProgramSpec of a hand-written WGSL shader (see the module docstring)."""
    if not isinstance(src, str) or not isinstance(entry, str) or not entry.strip():
        raise CompileError(f"program_from_source(src, entry): expected WGSL text and an entry name, got "
                           f"{type(src).__name__} and {entry!r}")
    entry = entry.strip()
    text = _COMMENTS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), src)  # positions (line numbers) kept
    m = re.search(_ENTRY.format(re.escape(entry)), text)
    if m is None:
        found = re.findall(r"@compute[^{]*?fn\s+(\w+)", text)
        raise CompileError(f"no @compute function named {entry!r} with a @workgroup_size in the shader (found: "
                           f"{', '.join(found) or 'none'})", "", src)
    try:
        wg = tuple(int(x.strip().rstrip("iu"), 0) for x in m.group(1).split(",") if x.strip())
    except ValueError:
        raise CompileError(f"{entry}:{_line(text, m.start())}: @workgroup_size({m.group(1)}) must be integer "
                           "literals for devicekit to launch it", "", src) from None
    wg = wg + (1,) * (3 - len(wg))
    structs = {s.group(1): s for s in _STRUCT.finditer(text)}
    params: list[tuple[int, sg.Param]] = []
    bindings: list[int] = []
    uniform: int | None = None
    for b in _BINDING.finditer(text):
        attrs = dict(re.findall(r"@(group|binding)\s*\(\s*(\d+)\s*\)", b.group(1)))
        line = _line(text, b.start())
        group, slot, space, access, name, typ = int(attrs["group"]), int(attrs["binding"]), *b.group(2, 3, 4, 5)
        typ = re.sub(r"\s+", "", typ)
        if group != 0:
            raise CompileError(f"{entry}:{line}: binding {name!r} is in @group({group}); devicekit binds group 0 only",
                               "", src)
        if space == "storage":
            em = re.fullmatch(r"array<(atomic<\w+>|\w+)(?:,\w+)?>", typ)
            if em is None or em.group(1) not in _ELEM:
                raise CompileError(f"{entry}:{line}: storage binding {name!r} has type {typ}; devicekit passes "
                                   f"array<T> of {', '.join(_ELEM)}", "", src)
            params.append((slot, sg.Param(name, "buffer", _ELEM[em.group(1)], access == "read_write", "global", typ,
                                          line)))
            bindings.append(slot)
        else:
            if uniform is not None:
                raise CompileError(f"{entry}:{line}: a second uniform binding ({name!r}); devicekit passes the vars "
                                   "in one uniform struct", "", src)
            st = structs.get(typ)
            if st is None:
                raise CompileError(f"{entry}:{line}: uniform binding {name!r} must be a struct declared in the "
                                   f"shader, got {typ}", "", src)
            uniform = slot
            for f in st.group(2).split(","):
                if not f.strip():
                    continue
                fname, _, ftyp = (x.strip() for x in f.partition(":"))
                if ftyp not in _FIELD:
                    raise CompileError(f"{entry}:{_line(text, st.start())}: uniform field {fname!r} has type {ftyp}; "
                                       f"devicekit passes {', '.join(_FIELD)}", "", src)
                params.append((slot, sg.Param(fname, "scalar", _FIELD[ftyp], False, "", ftyp, line)))
    if len(set(bindings) | ({uniform} if uniform is not None else set())) != len(bindings) + (uniform is not None):
        raise CompileError(f"{entry}: two bindings share one @binding number", "", src)
    ordered = [p for _, p in sorted(params, key=lambda t: t[0])]
    sig = sg.Signature(entry, tuple(ordered), _line(text, m.start()))
    return sg.build_spec(sig, src, device=device, lang="wgsl", sizes=sizes, global_size=global_size,
                         local_size=local_size if local_size is not None else None,
                         meta=(("wgsl_bindings", tuple(sorted(bindings))), ("wgsl_uniform", uniform),
                               ("wgsl_workgroup_size", wg)))
