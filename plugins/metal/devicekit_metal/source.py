"""Read the signature of a hand-written Metal kernel with libclang (through the shim): the reader that
`MetalRenderer.parse_source` runs through the core's `compile.source_spec.read_source`, behind
`dev.program_from_source(src, entry)` and `dk.target("METAL").program_from_source`. Conventions
(docs/handwritten.md; the runtime binds by the attributes):
- `device [const] T *name [[buffer(i)]]` and `constant T *name [[buffer(i)]]` params are buffers (constant ones and
  const elements are read-only; T may be a vector such as float4, or atomic_uint/atomic_int/atomic_float);
- `constant T& name [[buffer(i)]]` params (T: bool, 8-64 bit ints, half, float) are vars; the runtime passes each
  with setBytes in T's size;
- `threadgroup T *name [[threadgroup(i)]]` params are threadgroup memory the launch allocates:
  `shared_bytes={"name": bytes}` (an int, or an expression over the int params; an int alone for a single one);
- any other param must carry a Metal builtin attribute (`[[thread_position_in_grid]]`, ...), which Metal fills in;
- a buffer or var param without [[buffer(i)]] gets the first index no other param names, in declaration order,
  as Apple's compiler assigns it (explicit and implicit indices may be mixed, as ggml's kernels do);
- buffers and vars may come in any order and at any indices: `execute(buffers, vals)` takes each list in
  declaration order, `dk.run` takes them by name;
- a buffer's size (elements, what a launch checks) comes from `sizes={"x": 1024, "y": "n*4"}`, else it is unchecked;
- `global_size` (threadgroups per grid) and `local_size` (threads per threadgroup) may be given here (ints or
  expressions over the vars) or at each `execute(...)`; the runtime uses `dispatchThreadgroups`.
The source is read in a helper process bounded by DEVICEKIT_PARSE_TIMEOUT.
"""

from __future__ import annotations

import dataclasses

from devicekit.errors import CompileError
from devicekit.ir.dtypes import dtypes
from devicekit.render import signature as sg

from .hostcheck import _SHIM_ARGS, _builtin_include_args, host_msl

BUILTINS = frozenset({
    "thread_position_in_grid", "thread_position_in_threadgroup", "threadgroup_position_in_grid",
    "threads_per_threadgroup", "threadgroups_per_grid", "threads_per_grid", "thread_index_in_threadgroup",
    "thread_index_in_simdgroup", "simdgroup_index_in_threadgroup", "threads_per_simdgroup",
    "simdgroups_per_threadgroup", "thread_execution_width", "dispatch_threads_per_threadgroup",
    "grid_origin", "grid_size", "quadgroup_index_in_threadgroup", "thread_index_in_quadgroup",
})
FNAME = "kernel.metal.cpp"
_LANE = {"float": dtypes.float32, "_Float16": dtypes.float16, "metal::bfloat": dtypes.bfloat16,
         "bfloat": dtypes.bfloat16,
         "int": dtypes.int32, "unsigned int": dtypes.uint32, "short": dtypes.int16, "unsigned short": dtypes.uint16,
         "char": dtypes.int8, "unsigned char": dtypes.uint8, "long": dtypes.int64, "unsigned long": dtypes.uint64,
         "bool": dtypes.bool}
# the shim's spellings of Metal's struct-like types: bfloat, atomics, and vectors (float4 is metal::vec<float, 4>)
RECORDS = {"bfloat": dtypes.bfloat16, "atomic<unsigned int>": dtypes.uint32, "atomic<int>": dtypes.int32,
           "atomic<float>": dtypes.float32,
           **{f"vec<{t}, {n}>": dt.vec(n) for t, dt in _LANE.items() for n in (2, 3, 4)}}


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


def read_msl(src: str, entry: str, search: tuple[str, ...] = ()) -> sg.Signature:
    """(In the reader process.) The Signature of the Metal kernel `entry`; `search`: -iquote/-I/-D flags of the
    compile's header setup (the working dir, include_dirs=, defines=)."""
    import clang.cindex as ci

    args = [*_SHIM_ARGS, *search, *_builtin_include_args(), "-Wno-unknown-attributes"]
    tu = sg.parse(FNAME, host_msl(src), args, src=src)
    fns = [c for c in tu.cursor.get_children() if c.kind == ci.CursorKind.FUNCTION_DECL and c.is_definition()
           and c.location.file is not None and c.location.file.name == FNAME]
    fn = next((c for c in fns if c.spelling == entry), None)
    if fn is None:
        errs = sg.first_errors(tu, FNAME)
        raise CompileError(f"no kernel named {entry!r} in the source (found: "
                           f"{', '.join(sorted(c.spelling for c in fns)) or 'none'})", "\n".join(errs), src)
    if errs := sg.signature_errors(tu, fn, FNAME):
        raise CompileError(f"{entry}: its signature does not parse (checked against devicekit-metal's shim of "
                           "<metal_stdlib>, which declares only what kernels commonly use)", "\n".join(errs), src)
    toks = [t.spelling for t in fn.get_tokens()]
    head = toks[:toks.index(entry)] if entry in toks else []
    if "kernel" not in head and "kernel" not in _line_before(src, fn.extent.start.line, fn.extent.start.column):
        raise CompileError(f"{entry} is not declared `kernel void ...`", "", src)
    per_param = _split_params(toks, entry)
    arguments = list(fn.get_arguments())
    if len(per_param) != len(arguments):
        raise CompileError(f"{entry}: could not read its parameter list", "", src)
    params = []
    for a, ptoks in zip(arguments, per_param):
        attr = _attribute(ptoks)
        where = f"{entry}:{a.location.line}: param {a.spelling!r} ({a.type.spelling})"
        if attr and attr[0] in BUILTINS:
            params.append(sg.Param(a.spelling, "builtin", None, type=a.type.spelling, line=a.location.line,
                                   attr=tuple(attr)))
            continue
        if attr[:1] == ["dk_threadgroup"]:
            attr[0] = "threadgroup"
        if not attr and ({"device", "constant"} & set(ptoks)):
            attr = ["buffer", "(", "implicit", ")"]  # the index left out: the first free one (_implicit_slots)
        if attr[:2] not in (["buffer", "("], ["threadgroup", "("]) or len(attr) < 3 or \
                not (attr[2].isdigit() or attr[2] == "implicit"):
            raise CompileError(f"{where}: needs [[buffer(i)]], [[threadgroup(i)]] or a Metal builtin attribute",
                               "", src)
        p = sg.read_param(a.spelling, a.type, a.location.line, where, records=RECORDS, tokens=tuple(ptoks),
                          by_ref_scalars=True)
        want = "local" if attr[0] == "threadgroup" else ("buffer", "scalar")
        if p.kind not in want:
            raise CompileError(f"{where}: a [[{attr[0]}(i)]] param is " + (
                "`threadgroup T *`" if attr[0] == "threadgroup" else
                "`device T *` / `constant T *` (a buffer) or `constant T &` (a scalar)"), "", src)
        params.append(dataclasses.replace(p, attr=tuple(attr), slot=int(attr[2]) if attr[2].isdigit() else None))
    if any(p.attr[2:3] == ("implicit",) for p in params):
        params = _implicit_slots(params)
    _check_slots(params, entry, src)
    return sg.Signature(entry, tuple(params), fn.location.line, (("includes", sg.included_files(tu)),))


def _implicit_slots(params: list) -> list:
    """Buffer params without [[buffer(i)]] get the first indices no other param names, in declaration order, as
    Apple's compiler assigns them (the MSL specification: an index not given is the first available one). ggml's
    kernel_add_row leaves src0, src1, dst without one beside `nb [[buffer(28)]]`, and ggml-metal.m binds 0, 1, 2."""
    used = {p.slot for p in params if p.attr[:1] == ("buffer",) and p.slot is not None}
    free = (i for i in range(1 << 16) if i not in used)
    return [dataclasses.replace(p, slot=next(free)) if p.attr[2:3] == ("implicit",) else p for p in params]


def _check_slots(params: list, entry: str, src: str) -> None:
    """Each [[buffer(i)]] and [[threadgroup(i)]] index once, buffer slots within Metal's table, no double scalar."""
    from .renderer import MAX_BUFFERS

    for kind in ("buffer", "threadgroup"):
        seen: dict[int, str] = {}
        for p in params:
            if p.slot is not None and p.attr[0] == kind:
                if p.slot in seen:
                    raise CompileError(f"{entry}: {p.name!r} and {seen[p.slot]!r} are both [[{kind}({p.slot})]]", "",
                                       src)
                seen[p.slot] = p.name
    for p in params:
        if p.kind in ("buffer", "scalar") and p.slot >= MAX_BUFFERS:
            raise CompileError(f"{entry}:{p.line}: param {p.name!r} is [[buffer({p.slot})]]; Metal has buffer slots "
                               f"0..{MAX_BUFFERS - 1}", "", src)
        if p.kind == "scalar" and p.dtype == dtypes.float64:
            raise CompileError(f"{entry}:{p.line}: param {p.name!r}: Metal has no double", "", src)
