"""Hand-written CUDA kernels: read the signature of `entry` with libclang and make a ProgramSpec of it, so that
`dev.program_from_source(src, entry)` (or `dk.target("CUDA").program_from_source`, or `CUDARenderer.parse_source`)
compiles a kernel as its author wrote it.

Conventions (docs/handwritten.md; docs/decisions.md, "CUDA plugin"):
- the entry is a `__global__` function, with C++ linkage (the norm) or `extern "C"`; `entry` is its source name,
  or a template instantiation (`entry="matrixMul<32>"`, `"reduce<float, 256>"`): NVRTC instantiates it and
  reports the lowered (mangled) name the runtime loads (`compiler.CUDACompiler.compile`);
- pointer params are buffers, scalars are vars (bool, 8-64 bit ints, size_t, half, float, double), in any order:
  `execute(buffers, vals)` takes each list in declaration order, `dk.run` takes them by name. Element types include
  CUDA's vector types (`float4 *` is a float32x4 buffer), `__half`/`half`, `__half2`, `__nv_bfloat16`; a buffer is
  read-only when its element is const;
- `sizes={"x": "n"}` states buffer sizes in elements (int, or an expression over the int params); a size not stated
  is unchecked;
- `global_size` (blocks) and `local_size` (threads a block), ints or expressions over the int params, give the launch
  dims here; otherwise each launch passes them (`execute(..., global_size=, local_size=)`, `dk.run(...)`);
- `shared_bytes` (an int or expression, bytes) sizes `extern __shared__` memory for each launch.
The source is read with the file's own headers (found on NVRTC's include path) and empty stand-ins for every other
`#include` (the CUDA headers, the C++ library: only the signature is judged here, the body is NVRTC's); the host code
of the file and of its own headers (host_code.py) is blanked out (line numbers kept) before NVRTC sees it, since
NVRTC compiles device code only: the blanked headers go to NVRTC in memory (meta "cuda_headers").
"""

from __future__ import annotations

import re

from devicekit.errors import CompileError
from devicekit.ir.dtypes import dtypes
from devicekit.render import signature as sg
from devicekit.render.parse_worker import bounded

from . import host_code

_SHIM_DIR = "/devicekit-cuda-shim"
_FILE = f"{_SHIM_DIR}/kernel.cu"
_ENTRY_VAR = "__dk_entry_ptr"
_VEC = {"char": dtypes.int8, "uchar": dtypes.uint8, "short": dtypes.int16, "ushort": dtypes.uint16,
        "int": dtypes.int32, "uint": dtypes.uint32, "long": dtypes.int64, "ulong": dtypes.uint64,
        "longlong": dtypes.int64, "ulonglong": dtypes.uint64, "float": dtypes.float32, "double": dtypes.float64}
_CTYPE = {"char": "signed char", "uchar": "unsigned char", "short": "short", "ushort": "unsigned short", "int": "int",
          "uint": "unsigned int", "long": "long", "ulong": "unsigned long", "longlong": "long long",
          "ulonglong": "unsigned long long", "float": "float", "double": "double"}
RECORDS = {"__nv_bfloat16": dtypes.bfloat16, "__half2": dtypes.float16.vec(2),
           "__nv_bfloat162": dtypes.bfloat16.vec(2),
           **{f"{n}{k}": (dt if k == 1 else dt.vec(k)) for n, dt in _VEC.items() for k in (1, 2, 3, 4)}}


def _preamble() -> str:
    vecs = "\n".join(f"struct __align__({min(16, _VEC[n].itemsize * (4 if k == 3 else k))}) {n}{k} "
                     f"{{ {_CTYPE[n]} {', '.join('xyzw'[:k])}; }};" for n in _VEC for k in (1, 2, 3, 4))
    return f"""#define __global__ __attribute__((annotate("dk_global")))
#define __device__ __attribute__((annotate("dk_device")))
#define __host__ __attribute__((annotate("dk_host")))
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ __attribute__((annotate("dk_shared")))
#define __constant__ __attribute__((annotate("dk_constant")))
#define __managed__ __attribute__((annotate("dk_managed")))
#define __restrict__ __restrict
#define __CUDACC__ 1
#define __NVCC__ 1
typedef decltype(sizeof(0)) size_t; typedef decltype((char*)0 - (char*)0) ptrdiff_t;
typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long long int64_t;
typedef unsigned char uint8_t; typedef unsigned short uint16_t; typedef unsigned int uint32_t;
typedef unsigned long long uint64_t; typedef long intptr_t; typedef unsigned long uintptr_t; typedef long clock_t;
{vecs}
namespace std {{ using ::size_t; using ::ptrdiff_t; using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
  using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t; }}
namespace cuda {{ namespace std {{ using ::size_t; using ::ptrdiff_t; using ::int8_t; using ::int16_t; using ::int32_t;
  using ::int64_t; using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t; }} }}
namespace cub {{
enum BlockReduceAlgorithm {{ BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY, BLOCK_REDUCE_RAKING, BLOCK_REDUCE_WARP_REDUCTIONS }};
enum BlockScanAlgorithm {{ BLOCK_SCAN_RAKING, BLOCK_SCAN_RAKING_MEMOIZE, BLOCK_SCAN_WARP_SCANS }};
enum BlockLoadAlgorithm {{ BLOCK_LOAD_DIRECT, BLOCK_LOAD_STRIPED, BLOCK_LOAD_VECTORIZE, BLOCK_LOAD_TRANSPOSE,
  BLOCK_LOAD_WARP_TRANSPOSE, BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED }};
enum BlockStoreAlgorithm {{ BLOCK_STORE_DIRECT, BLOCK_STORE_STRIPED, BLOCK_STORE_VECTORIZE, BLOCK_STORE_TRANSPOSE,
  BLOCK_STORE_WARP_TRANSPOSE, BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED }};
enum BlockHistogramAlgorithm {{ BLOCK_HISTO_SORT, BLOCK_HISTO_ATOMIC }};
}}
struct dim3 {{ unsigned int x, y, z; dim3(unsigned int x = 1, unsigned int y = 1, unsigned int z = 1); }};
namespace cooperative_groups {{}}
extern uint3 threadIdx, blockIdx; extern dim3 blockDim, gridDim;
extern int warpSize;
typedef _Float16 __half; typedef _Float16 half;
struct __align__(4) __half2 {{ _Float16 x, y; }}; typedef __half2 half2;
struct __align__(2) __nv_bfloat16 {{ unsigned short x; }}; typedef __nv_bfloat16 nv_bfloat16;
struct __align__(4) __nv_bfloat162 {{ __nv_bfloat16 x, y; }}; typedef __nv_bfloat162 nv_bfloat162;
"""


_PREAMBLE = _preamble()
_OFFSET = _PREAMBLE.count("\n")  # libclang reports physical lines: shift them back to the user's
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.MULTILINE)


def includes(src: str) -> list[str]:
    return sorted(set(_INCLUDE.findall(src)))


MAX_HEADERS = 500  # a file's own headers the reader follows (each read once)


def stub_names(src: str, dirs: list[str]) -> list[str]:
    """The include names the reader gives an empty stand-in: every name, reached from `src` or from a header of the
    file's own (found in `dirs`, the compiler's include path in order, or beside the including header), that is
    not found there (the CUDA headers, the C++ library: NVRTC's, not the reader's). Found headers are read by the
    reader as NVRTC reads them."""
    import os
    stubs, seen, todo = set(), set(), [(name, None) for name in includes(src)]
    while todo and len(seen) < MAX_HEADERS:
        name, beside = todo.pop()
        where = [beside] if beside else []
        path = next((p for d in [*where, *dirs] if os.path.isfile(p := os.path.join(d, name))), None)
        if path is None:
            stubs.add(name)
            continue
        path = os.path.realpath(path)
        if path in seen:
            continue
        seen.add(path)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read(1 << 22)
        except OSError:
            continue
        todo += [(n, os.path.dirname(path)) for n in includes(text)]
    return sorted(stubs)


def flag_search(flags) -> tuple[list[str], list[str]]:
    """(include dirs, defines) of NVRTC flags (`-I dir`, `-Idir`, `--include-path=dir`, `-D X`, `-DX`,
    `--define-macro=X`): what DEVICEKIT_CUDA_FLAGS adds to the compiler's preprocessor, which the reader must see
    too."""
    dirs, defs, it = [], [], iter(flags)
    for w in it:
        for opt, out in (("-I", dirs), ("--include-path", dirs), ("-D", defs), ("--define-macro", defs)):
            if w == opt:
                out.append(next(it, ""))
            elif w.startswith(opt + "=") and opt.startswith("--"):
                out.append(w[len(opt) + 1:])
            elif w.startswith(opt) and not opt.startswith("--") and len(w) > len(opt):
                out.append(w[len(opt):])
            else:
                continue
            break
    return [d for d in dirs if d], [d for d in defs if d]


def _annotations(c) -> set[str]:
    return host_code.annotations(c)


def read_cuda(src: str, entry: str, dirs: tuple[str, ...] = (), defines: tuple[str, ...] = ()) -> sg.Signature:
    """(In the reader process.) The Signature of the kernel `entry` (a name or a template instantiation); `dirs`
    is NVRTC's include path in order (the working dir, include_dirs=, DEVICEKIT_CUDA_FLAGS' -I), `defines` its -D:
    the file's own headers are read from there, anything not found there gets an empty stand-in."""
    import clang.cindex as ci

    instance = "<" in entry
    text = _PREAMBLE + src + (f"\nauto* {_ENTRY_VAR} = &{entry};\n" if instance else "")
    shims = [(f"{_SHIM_DIR}/{h}", "") for h in stub_names(src, list(dirs))]
    tu = sg.parse(_FILE, text, ["-x", "c++", "-std=c++17", "-nostdinc", "-nostdinc++", *(f"-I{d}" for d in dirs),
                                f"-I{_SHIM_DIR}", *(f"-D{d}" for d in defines), "-Wno-everything",
                                "-ferror-limit=0"], shims, src=src, skip_bodies=True)
    bodies = sg.Bodies(text)
    fn = sg.entry_function(tu, entry, _FILE, src, is_definition=lambda c: bodies.span(c) is not None,
                           with_errors=False)
    line = fn.location.line - _OFFSET
    is_template = fn.kind == ci.CursorKind.FUNCTION_TEMPLATE
    if is_template and not instance:
        tparams = [c.spelling for c in fn.get_children() if c.kind in (
            ci.CursorKind.TEMPLATE_TYPE_PARAMETER, ci.CursorKind.TEMPLATE_NON_TYPE_PARAMETER)]
        raise CompileError(f"{entry}:{line}: {entry} is a template ({', '.join(tparams)}): name an instantiation, "
                           f"e.g. entry=\"{entry}<...>\"", "", src)
    if instance and not is_template:
        raise CompileError(f"{entry}:{line}: {fn.spelling} is not a template: pass entry={fn.spelling!r}", "", src)
    if errs := sg.signature_errors(tu, fn, _FILE, _OFFSET):
        raise CompileError(f"{entry}: its signature does not parse (CUDA's own types, what the file declares and its "
                           "own headers found on the include path are known here: the working dir, include_dirs=, "
                           "DEVICEKIT_CUDA_FLAGS' -I)", "\n".join(errs), src)
    if fn.result_type.kind != ci.TypeKind.VOID and not is_template:
        raise CompileError(f"{entry}:{line}: a kernel returns void", "", src)
    if "dk_global" not in _annotations(fn):
        raise CompileError(f"{entry}:{line}: the entry point must be a __global__ function (a kernel)", "", src)
    decls = sg.template_params(fn)
    if is_template:
        types = sg.instance_arg_types(tu, _ENTRY_VAR, _FILE)
        if types is None or len(types) != len(decls):
            last = text.count("\n")
            errs = [f"{d.spelling}" for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error
                    and d.location.line >= last - 1 and d.location.file and d.location.file.name == _FILE]
            raise CompileError(f"{entry}: cannot instantiate {entry} from the source: "
                               f"{'; '.join(errs) or 'check the template arguments'}", "", src)
    else:
        types = [a.type for a in decls]
    params = []
    for a, t in zip(decls, types):
        pline = a.location.line - _OFFSET
        where = f"{entry}:{pline}: param {a.spelling!r} ({t.spelling})"
        params.append(sg.read_param(a.spelling, t, pline, where, records=RECORDS,
                                    tokens=tuple(x.spelling for x in a.get_tokens())))
    for p in params:
        if p.kind == "local":
            raise CompileError(f"{entry}:{p.line}: param {p.name!r}: CUDA has no local-memory params (use "
                               "extern __shared__ and shared_bytes=)", "", src)
    extern_c = not is_template and fn.mangled_name in (fn.spelling, f"_{fn.spelling}")
    hosts = host_code.host_ranges(tu, _FILE, text, _OFFSET, _SHIM_DIR, skip_names=(_ENTRY_VAR,))
    own = host_code.include_names(tu, _FILE, text, _SHIM_DIR)
    facts = (("extern_c", extern_c), ("host_ranges", tuple(hosts.get(_FILE, ()))),
             ("device_headers", host_code.device_headers(hosts, own)), ("own_headers", tuple(sorted(own))),
             ("includes", sg.included_files(tu, skip_prefix=_SHIM_DIR)))
    return sg.Signature(entry, tuple(params), line, facts)


def search_path() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(include dirs, defines) NVRTC compiles the current program_from_source with: the working dir (where it finds
    the file's quoted includes), include_dirs=, then DEVICEKIT_CUDA_FLAGS' -I (relative ones from the working dir);
    defines=, then the flags' -D. The reader is given the same."""
    import os

    from devicekit.compile.deps import active_context

    from . import settings
    ctx = active_context()
    fdirs, fdefs = flag_search(settings.get("DEVICEKIT_CUDA_FLAGS"))
    dirs = [ctx.cwd, *ctx.include_dirs, *(os.path.normpath(os.path.join(ctx.cwd, d)) for d in fdirs)]
    return tuple(dict.fromkeys(dirs)), (*ctx.defines, *fdefs)


def device_source(src: str, host_ranges) -> str:
    """`src` with its host code blanked (host_code.host_ranges; lines kept, so NVRTC's line numbers are the user's)."""
    return host_code.blank(src, host_ranges)


_ARG_FORMAT = {"bool": "?", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
               "int64": "q", "uint64": "Q", "float16": "e", "float32": "f", "float64": "d"}


def parse_cuda_source(src: str, entry: str, sizes: dict | None = None, global_size=None, local_size=None,
                      shared_bytes=None, device: str = "CUDA"):
    """The ProgramSpec of a hand-written CUDA kernel (see the module docstring)."""
    if not isinstance(src, str) or not isinstance(entry, str) or not entry.strip():
        raise CompileError(f"program_from_source(src, entry): expected source text and a kernel name, got "
                           f"{type(src).__name__} and {entry!r}")
    entry = entry.strip()
    search = search_path()
    sig = bounded("devicekit_cuda.source:read_cuda", src, entry, *search)
    for p in sig.params:
        if p.kind == "scalar" and p.dtype.name not in _ARG_FORMAT:
            raise CompileError(f"{entry}:{p.line}: param {p.name!r} ({p.type}): a {p.dtype} scalar cannot be passed "
                               "yet: take a float and convert inside", "", src)
    spec_src = device_source(src, sig.fact("host_ranges"))
    fmt = "".join("P" if p.kind == "buffer" else _ARG_FORMAT[p.dtype.name] for p in sig.params)
    return sg.build_spec(sig, spec_src, device=device, lang="cuda", sizes=sizes, global_size=global_size,
                         local_size=local_size, shared_bytes=shared_bytes,
                         meta=(("arg_format", fmt), ("name_expr", entry), ("extern_c", sig.fact("extern_c")),
                               ("cuda_search", search), ("cuda_headers", sig.fact("device_headers")),
                               ("cuda_own_headers", sig.fact("own_headers"))))
