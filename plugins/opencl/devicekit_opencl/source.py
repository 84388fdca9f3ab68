"""Hand-written OpenCL C kernels: read the signature of `entry` with libclang (the core's
devicekit.render.signature) and make a ProgramSpec of it, so `dev.program_from_source(src, entry)` builds a kernel as
its author wrote it.

Conventions (docs/handwritten.md):
- the entry is a `__kernel` (or `kernel`) function returning void;
- `__global T *` and `__constant T *` params are buffers (read-only when T is const or the space is constant; T may be
  a vector such as float4), `__local T *` params are local memory the launch allocates (`shared_bytes={"name":
  bytes}`, an int or an expression over the int params), scalars (char..long, uchar..ulong, size_t, half, float,
  double) are vars; all in any order: `execute(buffers, vals)` takes each list in declaration order, `dk.run` by name;
- `sizes={"x": "n"}` states buffer sizes in elements; a size not stated is unchecked;
- `global_size` counts work-groups and `local_size` work-items a group (as every devicekit GPU kind: the NDRange is
  global_size * local_size); given here (ints or expressions over the int params) or at each launch;
- a view passed to a hand-written kernel becomes a sub-buffer, so its offset must be aligned to the device's
  CL_DEVICE_MEM_BASE_ADDR_ALIGN (128 bytes on PoCL).
libclang reads the file as OpenCL C 1.2 (`-x cl`) with stand-ins for the types opencl-c.h declares (the libclang
wheel has no headers): only the signature is judged here, the body is the driver's to compile. The preprocessor sees
what the driver's does: the device's extension macros (`cl_khr_fp64`, `cl_khr_fp16`, ...: the renderer's
`source_macros()`), __OPENCL_VERSION__, and the -D / -U / -I / -cl-std= / -cl-fast-relaxed-math options of
DEVICEKIT_OPENCL_BUILD_OPTIONS, so `#ifdef` and macro-defined types resolve as they do when the driver builds it.
"""

from __future__ import annotations

import re

from devicekit.errors import CompileError
from devicekit.ir.dtypes import dtypes
from devicekit.render import signature as sg
from devicekit.render.parse_worker import bounded

_FILE = "/devicekit-opencl-shim/kernel.cl"
_SCALARS = {"char": "char", "uchar": "unsigned char", "short": "short", "ushort": "unsigned short", "int": "int",
            "uint": "unsigned int", "long": "long", "ulong": "unsigned long", "float": "float", "double": "double",
            "half": "half"}


def _preamble() -> str:
    lines = ["#pragma OPENCL EXTENSION cl_khr_fp16 : enable", "#pragma OPENCL EXTENSION cl_khr_fp64 : enable",
             "typedef unsigned char uchar; typedef unsigned short ushort; typedef unsigned int uint;",
             "typedef unsigned long ulong; typedef ulong size_t; typedef long ptrdiff_t; typedef long intptr_t;",
             "typedef ulong uintptr_t;"]
    for name, c in _SCALARS.items():
        vecs = [f"typedef {c} {name}{k} __attribute__((ext_vector_type({k})));" for k in (2, 3, 4, 8, 16)]
        lines += ["#ifdef cl_khr_fp64", *vecs, "#endif"] if name == "double" else vecs
    return "\n".join(lines) + "\n"


_PASSED = ("-D", "-U", "-I")  # build options that change what the preprocessor sees (with their value)


def build_macros(options: list[str]) -> list[str]:
    """The build options (DEVICEKIT_OPENCL_BUILD_OPTIONS' words) that the signature reader must see too: -D, -U, -I
    (joined or with the value as the next word), -cl-std=, -cl-fast-relaxed-math (it defines
    __FAST_RELAXED_MATH__); the rest only change code generation."""
    out, it = [], iter(options)
    for w in it:
        if w in _PASSED:
            out += [w, next(it, "")]
        elif w.startswith(_PASSED) or w.startswith("-cl-std=") or w == "-cl-fast-relaxed-math":
            out.append(w)
    return out


_PREAMBLE = _preamble()
_OFFSET = _PREAMBLE.count("\n")


def _opencl_object(t) -> bool:
    """An image / sampler / event / queue / pipe type (libclang's OCL* and PIPE kinds; clang names them image2d_t,
    sampler_t, ... when the bindings do not know the kind)."""
    try:
        name = t.get_canonical().kind.name
    except ValueError:  # a kind newer than these bindings
        name = ""
    return name.startswith("OCL") or name == "PIPE" or bool(re.search(
        r"\b(image[123]d\w*_t|sampler_t|event_t|queue_t|clk_event_t|reserve_id_t)\b|\bpipe\b", t.spelling))


def _is_kernel(fn) -> bool:
    """`__kernel`/`kernel` on the definition: clang's kernel attribute, whose tokens are the qualifier, also when a
    macro spells it or the name (`__kernel void TEMPLATE(relu, Dtype)(...)`, as Caffe's OpenCL kernels are named)."""
    return any(t.spelling in ("__kernel", "kernel") for c in fn.get_children() if c.kind.is_attribute()
               for t in c.get_tokens())


def read_opencl(src: str, entry: str, macros: tuple[str, ...] = ()) -> sg.Signature:
    """(In the reader process.) The Signature of the kernel `entry`; `macros`: more libclang flags (the device's
    predefined macros and the user's -D options)."""
    import clang.cindex as ci

    text = _PREAMBLE + src
    tu = sg.parse(_FILE, text, ["-x", "cl", "-cl-std=CL1.2", "-cl-no-stdinc", "-Wno-everything",
                                "-ferror-limit=0", *macros], src=src)
    fn, names = sg.find_function(tu, entry, _FILE)
    if fn is None:
        raise CompileError(f"no function definition named {entry!r} in the source (found: "
                           f"{', '.join(sorted(set(names))) or 'none'})", "\n".join(sg.first_errors(tu, _FILE, _OFFSET)),
                           src)
    line = fn.location.line - _OFFSET
    if errs := sg.signature_errors(tu, fn, _FILE, _OFFSET):
        raise CompileError(f"{entry}: its signature does not parse (only OpenCL C's own types, what the file "
                           "declares and the headers it includes from the working dir or include_dirs= are known "
                           "here)", "\n".join(errs), src)
    if not _is_kernel(fn):
        raise CompileError(f"{entry}:{line}: the entry point must be a __kernel function", "", src)
    if fn.result_type.kind != ci.TypeKind.VOID:
        raise CompileError(f"{entry}:{line}: a kernel returns void", "", src)
    params = []
    for a in fn.get_arguments():
        pline = a.location.line - _OFFSET
        where = f"{entry}:{pline}: param {a.spelling!r} ({a.type.spelling})"
        if _opencl_object(a.type):
            raise sg.Unsupported(f"{where}: OpenCL images, samplers, events, queues and pipes cannot be passed by "
                                 "devicekit: take the pixels as a __global buffer (uchar4 *, float4 *) and index them")
        p = sg.read_param(a.spelling, a.type, pline, where, tokens=tuple(x.spelling for x in a.get_tokens()))
        if p.kind == "buffer" and p.space not in ("global", "constant"):
            raise CompileError(f"{where}: a pointer param of a kernel is __global, __constant or __local", "", src)
        if p.kind == "scalar" and p.dtype == dtypes.bool:
            raise CompileError(f"{where}: OpenCL does not allow bool kernel params: take a uchar or int", "", src)
        params.append(p)
    return sg.Signature(entry, tuple(params), line, (("includes", sg.included_files(tu)),))


def parse_opencl_source(src: str, entry: str, sizes: dict | None = None, global_size=None, local_size=None,
                        shared_bytes=None, device: str = "OPENCL", macros: tuple[str, ...] = ()):
    """The ProgramSpec of a hand-written OpenCL C kernel (see the module docstring). `macros`: the device's
    predefined macros as libclang flags (OpenCLRenderer.source_macros)."""
    from . import settings
    if not isinstance(src, str) or not isinstance(entry, str) or not entry.strip():
        raise CompileError(f"program_from_source(src, entry): expected source text and a kernel name, got "
                           f"{type(src).__name__} and {entry!r}")
    entry = entry.strip()
    from devicekit.compile.deps import active_context
    ctx = active_context()  # the driver finds quoted includes in the working dir, then include_dirs= (-I), defines=
    macros = (*macros, *build_macros(settings.get("DEVICEKIT_OPENCL_BUILD_OPTIONS")), f"-iquote{ctx.cwd}",
              *ctx.cc_args())
    sig = bounded("devicekit_opencl.source:read_opencl", src, entry, macros)
    return sg.build_spec(sig, src, device=device, lang="opencl", sizes=sizes, global_size=global_size,
                         local_size=local_size, shared_bytes=shared_bytes)
