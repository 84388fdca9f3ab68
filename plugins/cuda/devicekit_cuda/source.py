"""Hand-written CUDA kernels: read the signature of `entry` with libclang and make a ProgramSpec of it, so that
`dev.program_from_source(src, entry)` (or `CUDARenderer.parse_source`) runs a kernel a framework author wrote.

Conventions (docs/architecture.md, "CUDA plugin"):
- the entry is `extern "C" __global__ void entry(...)` (C linkage: the runtime finds it by name);
- pointer params are buffers, in order, element dtype from the C type (float, double, half/__half, __nv_bfloat16,
  bool, 8-64 bit ints); a buffer is writable unless its element type is const;
- integer params are int vars (bounds: the C type's range), passed with the C type's size;
- `sizes={"x": "n"}` states buffer sizes in elements (int, or an expression over the int params with + - * // %);
  a size not stated is unchecked;
- `global_size` (blocks) and `local_size` (threads a block), tuples of ints or expressions over the int params, give
  the launch dims; without them a launch needs explicit `global_size=`/`local_size=` (else it is one thread).
Only the signature is read here: the body is NVRTC's to judge (its log comes back in a CompileError at compile).
"""

from __future__ import annotations

from devicekit.errors import CompileError
from devicekit.ir.dtypes import dtypes
from devicekit.ir.ops import Ops
from devicekit.ir.uop import UOp
from devicekit.render.program_spec import ParamSpec, ProgramSpec, VarSpec
from devicekit.render.signature import clang_dtype, clang_index, size_expr

_FILE = "kernel.cu"
_SHIM_DIR = "/devicekit-cuda-shim"
# just enough CUDA for libclang to read a kernel's signature as C++
_PREAMBLE = """#define __global__ __attribute__((annotate("dk_global")))
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__
#define __constant__
#define __restrict__ __restrict
struct dk_uint3 { unsigned int x, y, z; };
extern dk_uint3 threadIdx, blockIdx, blockDim, gridDim;
extern int warpSize;
typedef _Float16 __half; typedef _Float16 half;
struct __nv_bfloat16 { unsigned short x; }; typedef __nv_bfloat16 nv_bfloat16;
"""
_HEADERS = ("cuda_fp16.h", "cuda_bf16.h", "cuda_runtime.h", "cuda.h", "stdint.h", "cstdint", "math.h", "cmath",
            "math_constants.h", "cuda_runtime_api.h", "device_launch_parameters.h", "stddef.h", "cstddef")
_ARG_FORMAT = {1: "b", 2: "h", 4: "i", 8: "q"}


_BF16 = {"__nv_bfloat16": dtypes.bfloat16, "nv_bfloat16": dtypes.bfloat16}


def _find(cursor, entry):
    import clang.cindex as ci
    found, names = None, []
    for c in cursor.get_children():
        if c.location.file is not None and c.location.file.name != _FILE:
            continue
        if c.kind in (ci.CursorKind.LINKAGE_SPEC, ci.CursorKind.UNEXPOSED_DECL, ci.CursorKind.NAMESPACE):
            f, n = _find(c, entry)
            found, names = found or f, names + n
        elif c.kind == ci.CursorKind.FUNCTION_DECL and c.is_definition():
            names.append(c.spelling)
            if c.spelling == entry:
                found = c
    return found, names


def parse_cuda_source(src: str, entry: str, sizes: dict | None = None, global_size=None, local_size=None,
                      device: str = "CUDA") -> ProgramSpec:
    import clang.cindex as ci

    text = _PREAMBLE + src
    off = _PREAMBLE.count("\n")  # libclang reports physical lines: shift them back to the user's
    shims = [(f"{_SHIM_DIR}/{h}", "") for h in _HEADERS]
    try:
        tu = clang_index().parse(_FILE, args=["-x", "c++", "-std=c++17", "-nostdinc", "-nostdinc++", f"-I{_SHIM_DIR}"],
                            unsaved_files=[(_FILE, text), *shims])
    except ci.TranslationUnitLoadError as e:
        raise CompileError(f"libclang could not parse the source: {e}", "", src) from None
    fn, names = _find(tu.cursor, entry)
    if fn is None:
        raise CompileError(f"no function definition named {entry!r} in the source (found: {', '.join(names) or 'none'})",
                           "", src)
    body = next((c for c in fn.get_children() if c.kind == ci.CursorKind.COMPOUND_STMT), None)
    start = (fn.extent.start.line, fn.extent.start.column)
    end = (body.extent.start.line, body.extent.start.column) if body is not None else (fn.extent.end.line, 1 << 30)
    sig_errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error and d.location.file is not None
                  and d.location.file.name == _FILE and start <= (d.location.line, d.location.column) < end]
    if sig_errors:
        log = "\n".join(f"{_FILE}:{d.location.line - off}:{d.location.column}: error: {d.spelling}"
                        for d in sig_errors)
        raise CompileError(f"{entry}: its signature does not parse", log, src)
    if fn.result_type.kind != ci.TypeKind.VOID:
        raise CompileError(f"{entry}:{fn.location.line - off}: a kernel returns void", "", src)
    if not any(c.kind == ci.CursorKind.ANNOTATE_ATTR and c.spelling == "dk_global" for c in fn.get_children()):
        raise CompileError(f"{entry}:{fn.location.line - off}: the entry point must be a __global__ function", "", src)
    if fn.mangled_name not in (entry, f"_{entry}"):
        raise CompileError(f'{entry}:{fn.location.line - off}: declare the entry point extern "C" (C linkage), so the runtime '
                           f"finds it by name", "", src)

    bufs, ints = [], []
    for a in fn.get_arguments():
        t = a.type.get_canonical()
        where = f"{entry}:{a.location.line - off}: param {a.spelling!r} ({a.type.spelling})"
        if t.kind in (ci.TypeKind.POINTER, ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY):
            elem = t.get_pointee() if t.kind == ci.TypeKind.POINTER else t.element_type
            dt = clang_dtype(elem.get_canonical(), _BF16)
            if dt is None:
                raise CompileError(f"{where}: unsupported element type {elem.spelling!r}", "", src)
            if ints:
                raise CompileError(f"{where}: buffers come before int params in a devicekit kernel", "", src)
            bufs.append((a.spelling, dt, not elem.is_const_qualified()))
        elif (dt := clang_dtype(t, _BF16)) is not None and (dt.is_int or dt.is_bool):
            ints.append((a.spelling, dt))
        else:
            raise CompileError(f"{where}: only pointers (buffers) and integers (vars) can be params", "", src)

    var_specs = tuple(VarSpec(n, int(dt.min()), int(dt.max())) for n, dt in ints)
    var_uops = {v.name: UOp(Ops.VAR, dtypes.index, (), (v.name, v.lo, v.hi)) for v in var_specs}
    sizes = dict(sizes or {})
    if unknown := set(sizes) - {b[0] for b in bufs}:
        raise CompileError(f"sizes= names {', '.join(sorted(unknown))}, which are not buffer params of {entry}")
    params = tuple(ParamSpec(n, dt, size_expr(sizes[n], var_uops, f"sizes[{n!r}]") if n in sizes else 0, w)
                   for n, dt, w in bufs)

    def dims(d, what):
        if d is None:
            return None
        d = tuple(d) if isinstance(d, (tuple, list)) else (d,)
        if not 1 <= len(d) <= 3:
            raise CompileError(f"{what}: 1 to 3 dims, got {d!r}")
        return tuple(size_expr(x, var_uops, what) for x in d)

    fmt = "P" * len(bufs) + "".join(_ARG_FORMAT[dt.itemsize] if dt.is_int else "b" for _, dt in ints)
    return ProgramSpec(name=entry, src=src, device=device, lang="cuda", params=params, vars=var_specs,
                       global_size=dims(global_size, "global_size"), local_size=dims(local_size, "local_size"),
                       outs=tuple(i for i, p in enumerate(params) if p.writable), ins=tuple(range(len(params))),
                       meta=(("from_source", True), ("arg_format", fmt)))
