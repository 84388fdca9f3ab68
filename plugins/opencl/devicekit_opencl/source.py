"""Hand-written OpenCL C kernels: the signature of `entry`, read with libclang (devicekit.render.signature), as a
ProgramSpec, so `dev.program_from_source(src, entry)` builds a kernel as its author wrote it (README.md,
docs/handwritten.md). libclang reads it as OpenCL C 1.2 (`-x cl`) with stand-ins for the types opencl-c.h declares
(the wheel has no headers); its preprocessor sees what the driver's does (the flags OpenCLRenderer.parse_source
passes: the device's macros, the -D/-U/-I/-cl-std= options of DEVICEKIT_OPENCL_BUILD_OPTIONS)."""

from __future__ import annotations

import re

from devicekit.errors import CompileError
from devicekit.ir.dtypes import dtypes
from devicekit.render import signature as sg

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


_PREAMBLE = _preamble()
_OFFSET = _PREAMBLE.count("\n")
# images, samplers, events, queues, pipes (as clang spells them when these bindings do not know the type's kind)
_OBJECT = re.compile(r"\b(image[123]d\w*_t|sampler_t|event_t|queue_t|clk_event_t|reserve_id_t)\b|\bpipe\b")


def _opencl_object(t) -> bool:
    try:
        name = t.get_canonical().kind.name
    except ValueError:  # a kind newer than these bindings
        name = ""
    return name.startswith("OCL") or name == "PIPE" or bool(_OBJECT.search(t.spelling))


def _is_kernel(fn) -> bool:
    """`__kernel`/`kernel` on the definition: clang's kernel attribute, whose tokens are the qualifier, also when a
    macro spells it or the name (`__kernel void TEMPLATE(relu, Dtype)(...)`, as Caffe's OpenCL kernels are named)."""
    return any(t.spelling in ("__kernel", "kernel") for c in fn.get_children() if c.kind.is_attribute()
               for t in c.get_tokens())


def read_opencl(src: str, entry: str, macros: tuple[str, ...] = ()) -> sg.Signature:
    """(In the reader process.) The Signature of the kernel `entry`; `macros`: more libclang flags."""
    import clang.cindex as ci

    tu = sg.parse(_FILE, _PREAMBLE + src, ["-x", "cl", "-cl-std=CL1.2", "-cl-no-stdinc", "-Wno-everything",
                                           "-ferror-limit=0", *macros], src=src)
    fn = sg.entry_function(tu, entry, _FILE, src, _OFFSET)
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

