"""OpenCLRenderer: the linear form -> OpenCL C 1.2, on the core's C-style base (the language choices: README.md).

A buffer is passed as a byte base and a byte offset (`__global uchar *dk_base<i>, ulong dk_off<i>`) and typed at the
top of the body, so a view is its allocation at any byte offset (sub-buffers need CL_DEVICE_MEM_BASE_ADDR_ALIGN).
Integers wrap and divide as the IR says (devicekit.render.int_exact), `FP_CONTRACT OFF` keeps a*b+c two roundings,
bool memory is uchar, half needs cl_khr_fp16 and double cl_khr_fp64."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar

from devicekit.ir.dtypes import DType, dtypes
from devicekit.ir.ops import Ops
from devicekit.render.cstyle import CStyleRenderer, KernelParam
from devicekit.render.int_exact import exact_int_ops
from devicekit.render.prepare import hoist_locals

TYPE_MAP = {"bool": "bool", "int8": "char", "int16": "short", "int32": "int", "int64": "long", "uint8": "uchar",
            "uint16": "ushort", "uint32": "uint", "uint64": "ulong", "float16": "half", "bfloat16": "ushort",
            "float32": "float", "float64": "double"}
# OpenCL 1.2 made these core; drivers still list them (and define their macros)
_CORE_EXTENSIONS = ("cl_khr_byte_addressable_store", "cl_khr_global_int32_base_atomics",
                    "cl_khr_global_int32_extended_atomics", "cl_khr_local_int32_base_atomics",
                    "cl_khr_local_int32_extended_atomics")


def _as_signed(expr: str, s: DType) -> str:
    """as_int/as_long reinterpret an unsigned result's bits; narrower types convert modulo 2^n."""
    t = TYPE_MAP[s.name]
    if s.bits in (32, 64):
        return f"({expr})" if s.is_unsigned else f"as_{t}({expr})"
    return f"(({t})({expr}))"


_CODE = exact_int_ops(CStyleRenderer.code_for_op, TYPE_MAP, {8: "uint", 16: "uint", 32: "uint", 64: "ulong"},
                      _as_signed)
_CODE[Ops.RECIP] = lambda x, dtype: f"(({TYPE_MAP[dtype.scalar().name]})1/{x})"


class OpenCLRenderer(CStyleRenderer):
    """OpenCL C for one device's limits and extensions (`for_id`); the defaults are OpenCL's minimums."""

    device = "OPENCL"
    lang = "opencl"
    gpu_indexing = True
    has_local = True
    global_max = (2**31 - 1, 2**31 - 1, 2**31 - 1)  # work-groups per axis (OpenCL bounds global size by size_t)
    local_max = (256, 256, 64)
    local_total_max = 256
    shared_max = 16384  # bytes of __local memory (16 KiB is OpenCL 1.2's minimum)
    max_buffers = 128  # two kernel args per buffer, plus the vars (CL_DEVICE_MAX_PARAMETER_SIZE >= 1024 bytes)
    passes: ClassVar[tuple] = (hoist_locals,)  # __local arrays only at kernel function scope
    narrow: ClassVar[bool] = False  # int64 index arithmetic in int32 where proven exact (render_linear)

    kernel_prefix: ClassVar[str] = "__kernel "
    arg_int_prefix: ClassVar[str] = "long"
    smem_prefix: ClassVar[str] = "__local "
    smem_align: ClassVar[str] = "__attribute__((aligned(16))) "
    barrier: ClassVar[str] = "barrier(CLK_LOCAL_MEM_FENCE);"
    bool_memory: ClassVar[str] = "uchar"  # OpenCL C allows no bool in memory
    int_suffix: ClassVar[dict[str, str]] = {"int64": "L", "uint64": "UL", "uint32": "u", "int32": ""}
    type_map: ClassVar[dict[str, str]] = TYPE_MAP
    code_for_op = _CODE
    repeats_operands: ClassVar[frozenset[Ops]] = frozenset({Ops.MAX, Ops.IDIV, Ops.MOD})

    def __init__(self, fp16: bool = False, fp64: bool = True, local_max: tuple[int, ...] | None = None,
                 local_total_max: int | None = None, shared_max: int | None = None,
                 extensions: tuple[str, ...] | None = None, version: int = 120, image_support: bool = False,
                 narrow: bool = False):
        self._args = (fp16, fp64, local_max, local_total_max, shared_max, extensions, version, image_support, narrow)
        self.fp16, self.fp64, self.narrow = fp16, fp64, narrow or self.narrow
        if extensions is None:  # no device named: OpenCL 1.2's core extensions and the fp flags
            extensions = _CORE_EXTENSIONS + ("cl_khr_fp64",) * fp64 + ("cl_khr_fp16",) * fp16
        self.extensions, self.version, self.image_support = tuple(extensions), int(version), bool(image_support)
        self.supported_dtypes = frozenset(d for d in dtypes.all() if d != dtypes.bfloat16
                                          and (fp16 or d != dtypes.float16) and (fp64 or d != dtypes.float64))
        self.set_limits(local_max, local_total_max or None, shared_max)

    @classmethod
    def for_id(cls, index: int) -> OpenCLRenderer:
        """The renderer for OPENCL:index's device: its extensions, limits (work-group size, local memory) and
        OpenCL version."""
        from .context import get
        dev = get(index).device
        ext = tuple(dev.extensions.split())
        m = re.match(r"OpenCL (\d+)\.(\d+)", dev.version.strip())  # -> __OPENCL_VERSION__ (300 for 3.0)
        return cls(fp16="cl_khr_fp16" in ext, fp64="cl_khr_fp64" in ext or bool(getattr(dev, "double_fp_config", 0)),
                   local_max=tuple(int(x) for x in dev.max_work_item_sizes[:3]),
                   local_total_max=int(dev.max_work_group_size), shared_max=int(dev.local_mem_size), extensions=ext,
                   version=int(m[1]) * 100 + int(m[2]) * 10 if m else 120, image_support=bool(dev.image_support))

    def __reduce__(self):
        return (type(self), self._args)

    def parse_source(self, src: str, entry: str, **options):
        """A ProgramSpec for a hand-written OpenCL C kernel (`options`: sizes=, global_size=, local_size=,
        shared_bytes=), its signature read with libclang (.source) as this device's compiler would see it: the
        preprocessor gets the device's extension macros and switches (`double` needs cl_khr_fp64, as there),
        __OPENCL_VERSION__, __IMAGE_SUPPORT__, and the -D/-U/-I/-cl-std= words of DEVICEKIT_OPENCL_BUILD_OPTIONS."""
        from devicekit.compile.source_spec import preprocessor_flags, read_source

        from . import settings
        macros = ("-Xclang", "-cl-ext=-all" + "".join(f",+{e}" for e in self.extensions),
                  *(f"-D{e}=1" for e in self.extensions), f"-D__OPENCL_VERSION__={self.version}",
                  *(("-D__IMAGE_SUPPORT__=1",) if self.image_support else ()))
        build = preprocessor_flags(settings.get("DEVICEKIT_OPENCL_BUILD_OPTIONS"), ("-cl-std=", "-cl-fast-relaxed-math"))
        return read_source("devicekit_opencl.source:read_opencl", src, entry, (*macros, *build), device=self.device,
                           lang=self.lang, **options)

    def render_linear(self, lk, name: str) -> str:
        """With `narrow`, int64 index arithmetic in int32 where `ir.narrow.narrowed` proves it exact; off by default:
        on PoCL matmul ran 1.6-2.1x slower and elementwise no faster (bench/opencl_narrow.py)."""
        if self.narrow:
            from devicekit.ir.narrow import narrowed
            lk = narrowed(lk) or lk
        return super().render_linear(lk, name)

    def render_cast(self, x: str, src: DType, dst: DType) -> str:
        if src == dst:
            return x
        return f"(({x})!=0)" if dst.is_bool else f"(({self.render_dtype(dst)})({x}))"

    def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
        """as_T needs an operand of T's size: x is cast back to its own type first (C's promotions widen it)."""
        return f"as_{self.render_dtype(dst)}(({self.render_dtype(src)})({x}))"

    def render_math(self, fn: str, x: str, dt: DType) -> str:
        return f"{fn}({x})"  # OpenCL's built-ins are overloaded for half, float and double

    def render_special(self, name: str, axis: int, extent: str) -> str:
        return f"((long){'get_group_id' if name.startswith('g') else 'get_local_id'}({axis}))"

    def render_preamble(self, used: set[DType]) -> str:
        names = {d.scalar().name for d in used}
        ext = [e for e, dt in (("fp16", "float16"), ("fp64", "float64")) if dt in names]
        return "\n".join(["#pragma OPENCL FP_CONTRACT OFF",
                          *(f"#pragma OPENCL EXTENSION cl_khr_{e} : enable" for e in ext)])

    def render_kernel(self, name: str, params: list[KernelParam], body: list[str], used: set[DType]) -> str:
        """Buffers become (byte base, byte offset) pairs; the body starts by forming each typed pointer."""
        sig: list[KernelParam] = []
        head: list[str] = []
        for p in params:
            if p.kind == "buffer":
                i, t = p.index, f"__global {'' if p.writable else 'const '}{self.mem_type(p.dtype)} *"
                sig += [dataclasses.replace(p, decl=f"__global uchar *dk_base{i}"),
                        KernelParam(f"dk_off{i}", "offset", dtypes.uint64, False, p.user_name, i, f"ulong dk_off{i}")]
                head.append(f"  {t}restrict {p.name} = ({t})(dk_base{i} + dk_off{i});")
            else:
                sig.append(p)
        return super().render_kernel(name, sig, head + body, used)

    def meta(self, lk) -> tuple:
        return (("view_args", True),)
