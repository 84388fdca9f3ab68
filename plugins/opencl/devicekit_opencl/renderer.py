"""OpenCLRenderer: the linear form -> OpenCL C 1.2 (and later), on the core's C-style base.

Language choices (all through hooks of devicekit.render.cstyle.CStyleRenderer):
  * `__kernel void dku_<name>(...)`; every buffer is passed as a byte base pointer and a byte offset,
    `__global uchar *dk_base<i>, ulong dk_off<i>`, and the body starts with `__global T *restrict dku_<p> =
    (__global T *)(dk_base<i> + dk_off<i>);`. A view (Buffer.view) is then its base allocation plus an offset at
    any byte: OpenCL sub-buffers need origins aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN (128 bytes on PoCL), so a
    view cannot always be a cl_mem of its own. Int vars are `long`.
  * SPECIAL gidxN / lidxN -> get_group_id(N) / get_local_id(N): launch dims are groups x local, and the runtime
    passes global work size = groups * local. DEFINE_LOCAL -> `__local` arrays at kernel function scope (OpenCL
    allows them nowhere else), BARRIER -> barrier(CLK_LOCAL_MEM_FENCE).
  * integers wrap as the IR says: add/sub/mul/neg/shl/mulacc of every width run in unsigned arithmetic
    (`as_int((uint)a + (uint)b)`), since signed overflow is undefined in OpenCL C as in C99 and the compiler folds
    `x < x + 1` to true; 8/16-bit results are truncated after every op. Division and modulo give the reference's
    answers where C has none (x / 0 = x % 0 = 0, MIN / -1 = MIN, MIN % -1 = 0): on a CPU device a division by zero
    would trap.
  * precise math: `#pragma OPENCL FP_CONTRACT OFF` (OpenCL C contracts a*b+c to fma by default), exp2/log2/sin/
    sqrt/trunc are the built-ins (OpenCL's ulp bounds are inside docs/ir.md's tolerances; the compiler adds
    -cl-fp32-correctly-rounded-divide-sqrt where the device supports it), never -cl-fast-relaxed-math.
  * types: long/ulong for 64-bit ints (OpenCL has no `long long`), bool values are `bool` but bool memory is uchar
    (bool is not allowed in global memory); half needs cl_khr_fp16 (the pragma is emitted when half is used, and
    float16 is left out of `supported_dtypes` on a device without it: PoCL), double needs cl_khr_fp64; bfloat16
    is emulated by the core as uint16 bits. Vector values are scalarized by the base (the compiler vectorizes
    across work-items).
  * user names (kernel, params, vars, local arrays) are `dku_<name>` (the base's mangling): OpenCL's keywords and
    qualifiers (`local`, `global`, `kernel`, `half`, `private`) and built-ins (`get_global_id`) cannot clash.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import ClassVar

from devicekit.ir.dtypes import DType, dtypes
from devicekit.ir.ops import Ops
from devicekit.ir.uop import KernelError
from devicekit.render.cstyle import CStyleRenderer, KernelParam
from devicekit.render.prepare import hoist_locals

_WRAPPING = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.SHL, Ops.MULACC})
_UNSIGNED = {8: "uint", 16: "uint", 32: "uint", 64: "ulong"}
_SIGNED_OF = {32: "int", 64: "long"}
_INT_LITERAL = re.compile(r"^\(*\(?(?:\([a-z ]+\))?\(?(-?\d+)(?:u|L|UL)?\)*$")

TYPE_MAP = {"bool": "bool", "int8": "char", "int16": "short", "int32": "int", "int64": "long", "uint8": "uchar",
            "uint16": "ushort", "uint32": "uint", "uint64": "ulong", "float16": "half", "bfloat16": "ushort",
            "float32": "float", "float64": "double"}


# OpenCL 1.2 made these core; drivers still list them (and define their macros)
_CORE_EXTENSIONS = ("cl_khr_byte_addressable_store", "cl_khr_global_int32_base_atomics",
                    "cl_khr_global_int32_extended_atomics", "cl_khr_local_int32_base_atomics",
                    "cl_khr_local_int32_extended_atomics")


def _version(text: str) -> int:
    """CL_DEVICE_VERSION ("OpenCL 3.0 PoCL ...") -> __OPENCL_VERSION__ (300); 120 when it does not say."""
    m = re.match(r"OpenCL (\d+)\.(\d+)", text.strip())
    return int(m.group(1)) * 100 + int(m.group(2)) * 10 if m else 120


def _literal(x: str) -> int | None:
    m = _INT_LITERAL.match(x)
    return int(m.group(1)) if m else None


def _as_signed(expr: str, s: DType) -> str:
    """An unsigned expression of s's width read back as s: as_int/as_long reinterpret the bits (defined), narrower
    types truncate by conversion (OpenCL converts integers modulo 2^n)."""
    t = TYPE_MAP[s.name]
    if s.bits in (32, 64):
        return f"({expr})" if s.is_unsigned else f"as_{t}({expr})"
    return f"(({t})({expr}))"


def _safe_div(a: str, b: str, op: Ops, s: DType) -> str:
    c = "/" if op is Ops.IDIV else "%"
    t = TYPE_MAP[s.name]
    lit = _literal(b)
    if lit is not None and lit not in (0, -1):
        return f"(({t})({a}{c}{b}))" if s.bits < 32 else f"({a}{c}{b})"
    if not s.is_unsigned:
        u = _UNSIGNED[s.bits]
        minus1 = _as_signed(f"(({u})0)-(({u})({a}))", s) if op is Ops.IDIV else f"(({t})0)"
        return f"((({b})==0)?(({t})0):((({b})==-1)?{minus1}:(({t})({a}{c}{b}))))"
    return f"((({b})==0)?(({t})0):(({t})({a}{c}{b})))"


def _int_wrap(fn, op: Ops):
    """Integer results wrap as the reference's fixed-width ints do (see the module docstring)."""
    def render(*xs, dtype: DType) -> str:
        s = dtype.scalar()
        if dtype.count != 1 or not s.is_int:
            return fn(*xs, dtype=dtype)
        t = TYPE_MAP[s.name]
        if op in (Ops.IDIV, Ops.MOD):
            return _safe_div(*xs, op, s)
        if op in _WRAPPING:
            u = _UNSIGNED[s.bits]
            if op is Ops.SHL:
                return _as_signed(f"(({u})({xs[0]}))<<(({xs[1]})&{s.bits - 1})", s)
            return _as_signed(fn(*[f"(({u})({x}))" for x in xs], dtype=dtype), s)
        if s.bits < 32:
            return f"(({t})({fn(*xs, dtype=dtype)}))"
        return fn(*xs, dtype=dtype)
    return render


_BASE = CStyleRenderer.code_for_op
_CODE = {op: _int_wrap(fn, op) for op, fn in _BASE.items()}
_CODE[Ops.RECIP] = lambda x, dtype: f"(({TYPE_MAP[dtype.scalar().name]})1/{x})"
_CODE[Ops.MULACC] = _int_wrap(lambda a, b, c, dtype: f"(({a}*{b})+{c})", Ops.MULACC)
for _op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.WHERE):
    _CODE[_op] = _BASE[_op]


class OpenCLRenderer(CStyleRenderer):
    """OpenCL C for one device's limits and extensions (`from_device`); the defaults are OpenCL's minimums."""

    device = "OPENCL"
    lang = "opencl"
    gpu_indexing = True
    has_local = True
    core_split = False
    vectors = True
    global_max = (2**31 - 1, 2**31 - 1, 2**31 - 1)  # work-groups per axis (OpenCL bounds global size by size_t)
    local_max = (256, 256, 64)
    local_total_max = 256
    shared_max = 16384  # bytes of __local memory (CL_DEVICE_LOCAL_MEM_SIZE; 16 KiB is OpenCL 1.2's minimum)
    max_buffers = 128  # two kernel args per buffer, plus the vars (CL_DEVICE_MAX_PARAMETER_SIZE >= 1024 bytes)
    passes: ClassVar[tuple] = (hoist_locals,)  # __local arrays only at kernel function scope
    narrow: ClassVar[bool] = False  # int64 index arithmetic in int32 where proven exact (render_linear)

    kernel_prefix: ClassVar[str] = "__kernel "
    buffer_prefix: ClassVar[str] = "__global "
    buffer_restrict: ClassVar[str] = "restrict "
    arg_int_prefix: ClassVar[str] = "long"
    smem_prefix: ClassVar[str] = "__local "
    smem_align: ClassVar[str] = "__attribute__((aligned(16))) "
    barrier: ClassVar[str] = "barrier(CLK_LOCAL_MEM_FENCE);"
    float_suffix: ClassVar[dict[str, str]] = {"float32": "f", "float64": "", "float16": "f", "bfloat16": "f"}
    int_suffix: ClassVar[dict[str, str]] = {"int64": "L", "uint64": "UL", "uint32": "u", "int32": ""}
    type_map: ClassVar[dict[str, str]] = TYPE_MAP
    code_for_op = _CODE
    math_fns: ClassVar[dict[Ops, str]] = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt",
                                          Ops.TRUNC: "trunc"}
    repeats_operands: ClassVar[frozenset[Ops]] = frozenset({Ops.MAX, Ops.IDIV, Ops.MOD})

    def __init__(self, fp16: bool = False, fp64: bool = True, local_max: tuple[int, ...] | None = None,
                 local_total_max: int | None = None, shared_max: int | None = None,
                 extensions: tuple[str, ...] | None = None, version: int = 120, image_support: bool = False,
                 narrow: bool = False):
        self.fp16, self.fp64 = fp16, fp64
        if narrow:
            self.narrow = True
        if extensions is None:  # no device named: OpenCL 1.2's core extensions and the fp flags
            extensions = _CORE_EXTENSIONS + ("cl_khr_fp64",) * fp64 + ("cl_khr_fp16",) * fp16
        self.extensions, self.version, self.image_support = tuple(extensions), int(version), bool(image_support)
        self.supported_dtypes = frozenset(d for d in dtypes.all() if d != dtypes.bfloat16
                                          and (fp16 or d != dtypes.float16) and (fp64 or d != dtypes.float64))
        if local_total_max is not None:
            self.local_total_max = local_total_max
        if local_max is not None:
            self.local_max = tuple(min(x, self.local_total_max) for x in local_max)
        if shared_max is not None:
            self.shared_max = shared_max

    @classmethod
    def from_device(cls, dev) -> OpenCLRenderer:
        """The renderer for a pyopencl.Device: its extensions and limits."""
        ext = set(dev.extensions.split())
        fp64 = "cl_khr_fp64" in ext or bool(getattr(dev, "double_fp_config", 0))
        total = int(dev.max_work_group_size)
        return cls(fp16="cl_khr_fp16" in ext, fp64=fp64, local_max=tuple(int(x) for x in dev.max_work_item_sizes[:3]),
                   local_total_max=total, shared_max=int(dev.local_mem_size), extensions=tuple(dev.extensions.split()),
                   version=_version(dev.version), image_support=bool(dev.image_support))

    def __reduce__(self):
        return (type(self), (self.fp16, self.fp64, self.local_max, self.local_total_max, self.shared_max,
                             self.extensions, self.version, self.image_support, self.narrow))

    def source_macros(self) -> tuple[str, ...]:
        """What the device's compiler predefines, as libclang flags for the signature reader: the extension macros
        (and clang's own extension switches, `-cl-ext=-all,+...`, so `double` needs cl_khr_fp64 as it does there),
        __OPENCL_VERSION__ and __IMAGE_SUPPORT__. A kernel whose types depend on them (`#ifdef cl_khr_fp16 typedef
        half T; #else typedef float T;`) is then read with the types the driver compiles."""
        out = ["-Xclang", "-cl-ext=-all" + "".join(f",+{e}" for e in self.extensions)]
        out += [f"-D{e}=1" for e in self.extensions]
        out.append(f"-D__OPENCL_VERSION__={self.version}")
        if self.image_support:
            out.append("-D__IMAGE_SUPPORT__=1")
        return tuple(out)

    def parse_source(self, src: str, entry: str, sizes: dict | None = None, global_size=None, local_size=None,
                     shared_bytes=None):
        """A ProgramSpec for a hand-written OpenCL C kernel: its signature read with libclang (.source)."""
        from .source import parse_opencl_source
        return parse_opencl_source(src, entry, sizes=sizes, global_size=global_size, local_size=local_size,
                                   shared_bytes=shared_bytes, device=self.device, macros=self.source_macros())

    def render_linear(self, lk, name: str) -> str:
        """With `narrow`, int64 index arithmetic computed in int32 where `ir.narrow.narrowed` proves it exact for
        every launch the var bounds allow (no launch guards); off by default: on PoCL (a CPU) matmul ran 1.6-2.1x
        slower and elementwise no faster (bench/opencl_narrow.py; docs/decisions.md, WebGPU plugin)."""
        if self.narrow:
            from devicekit.ir.narrow import narrowed
            lk = narrowed(lk) or lk
        return super().render_linear(lk, name)

    # ---- types and literals
    def render_const(self, value, dt: DType) -> str:
        if dt.is_float and dt.name == "float16" and math.isfinite(value):
            return f"((half)({self.render_float(value, dtypes.float32)}))"
        return super().render_const(value, dt)

    def render_cast(self, x: str, src: DType, dst: DType) -> str:
        if src == dst:
            return x
        if dst.is_bool:
            return f"(({x})!=0)"
        return f"(({self.render_dtype(dst)})({x}))"

    def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
        """as_T needs an operand of T's size: x is cast back to its own type first, since C's promotions widen a
        narrow expression (`c ? (short)0 : (short)0` is an int, and PoCL refuses as_ushort of it)."""
        return f"as_{self.render_dtype(dst)}(({self.render_dtype(src)})({x}))"

    def render_math(self, fn: str, x: str, dt: DType) -> str:
        return f"{fn}({x})"  # OpenCL's built-ins are overloaded for half, float and double

    def render_special(self, name: str, axis: int, extent: str) -> str:
        if not 0 <= axis < 3:
            raise KernelError(f"OpenCL has 3 work-item dimensions; {name} asks for axis {axis}")
        fn = "get_group_id" if name.startswith("g") else "get_local_id"
        return f"((long){fn}({axis}))"

    # ---- memory: bool memory is uchar
    def _mem_type(self, dt: DType) -> str:
        return "uchar" if dt.is_bool else self.render_dtype(dt)

    def render_param(self, name: str, dt: DType, writable: bool) -> str:
        const = "" if writable else "const "
        return f"__global {const}{self._mem_type(dt)} *restrict {name}"

    def render_local(self, name: str, dt: DType, size: int) -> str:
        return f"{self.smem_prefix}{self.smem_align}{self._mem_type(dt)} {name}[{size}];"

    def render_load(self, buf: str, idx: str, dt: DType) -> str:
        return f"({buf}[{idx}]!=0)" if dt.is_bool else f"{buf}[{idx}]"

    def render_store(self, buf: str, idx: str, value: str, dt: DType) -> str:
        return f"{buf}[{idx}] = (uchar)({value})" if dt.is_bool else f"{buf}[{idx}] = {value}"

    # ---- file
    def render_preamble(self, used: set[DType]) -> str:
        names = {d.scalar().name for d in used}
        out = ["#pragma OPENCL FP_CONTRACT OFF"]
        if "float16" in names:
            out.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
        if "float64" in names:
            out.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        return "\n".join(out)

    def render_kernel(self, name: str, params: list[KernelParam], body: list[str], used: set[DType]) -> str:
        """Buffers become (byte base, byte offset) pairs; the body starts by forming each typed pointer."""
        sig: list[KernelParam] = []
        head: list[str] = []
        nbuf = sum(p.kind == "buffer" for p in params)
        if nbuf > self.max_buffers:
            raise KernelError(f"kernel {name} has {nbuf} buffers; devicekit-opencl passes at most {self.max_buffers}")
        for p in params:
            if p.kind != "buffer":
                sig.append(p)
                continue
            i = p.index
            const = "" if p.writable else "const "
            sig.append(dataclasses.replace(p, decl=f"__global uchar *dk_base{i}"))
            sig.append(KernelParam(f"dk_off{i}", "offset", dtypes.uint64, False, p.user_name, i, f"ulong dk_off{i}"))
            head.append(f"  {p.decl} = (__global {const}{self._mem_type(p.dtype)} *)(dk_base{i} + dk_off{i});")
        return super().render_kernel(name, sig, head + body, used)

    def meta(self, lk) -> tuple:
        return (("view_args", True),)
