"""CUDARenderer: the linear form -> CUDA C++ for NVRTC, on the core's C-style base.

Language choices (all in hooks of devicekit.render.cstyle.CStyleRenderer):
  * `extern "C" __global__ void name(...)` with `__launch_bounds__(threads)` when the block size is a constant
    (the base's `kernel_attributes` hook); buffers are `T *__restrict__`, int vars `long long`. The thread and
    shared-memory limits (`local_total_max`, `shared_max`) are checked by the core (devicekit.render.prepare).
  * SPECIAL gidxN / lidxN -> blockIdx / threadIdx (.x .y .z); launch dims stay in the ProgramSpec.
  * DEFINE_LOCAL -> `__shared__`, BARRIER -> `__syncthreads()`.
  * half (cuda_fp16.h) and __nv_bfloat16 (cuda_bf16.h): every arithmetic op and math function on them is computed
    in float and rounded once, as the reference interpreter does (numpy computes float16 the same way); casts
    between them and non-float types go through float.
  * vectors of 2/4/8/16 bytes (others are scalarized by the base): one struct per vector type used,
    `dk_float32x4 { float v[4]; }`, aligned to its size (so vector loads become ld.v2/ld.v4); lanes are `.v[i]`;
    vector ALU ops, math and casts apply the scalar code lane by lane through `dk_map<R>(lambda, operands...)`
    (operands evaluated once).
  * user names (kernel, params, vars, shared arrays) are spelled `dku_<name>` by the base (devicekit.ir.names), so
    no C++ keyword, CUDA built-in (threadIdx, __global__, ...), math function or helper of ours can be hit.
  * small ints (8/16 bit) are truncated after every arithmetic op so inlined expressions wrap like the
    reference; add/sub/mul/neg/shl/mulacc of every width are done in unsigned arithmetic (defined wrap-around:
    NVRTC folds a plain int64 `x < x + 1` to true).
  * integer division and modulo follow the reference where C leaves them undefined (x / 0 = 0, x % 0 = 0,
    MIN / -1 = MIN); a literal divisor (the usual case in index arithmetic) compiles to a plain `/`. Both rules are
    the core's devicekit.render.int_exact, which OpenCL uses too.
  * INFINITY / NAN from their bit patterns (NVRTC has no math.h); bitcast through memcpy.
"""

from __future__ import annotations

import math
from typing import ClassVar

from devicekit.ir.dtypes import DType, dtypes
from devicekit.ir.ops import Ops
from devicekit.render.cstyle import CStyleRenderer, const_threads
from devicekit.render.int_exact import exact_int_ops

_LOW = ("float16", "bfloat16")
_AXES = "xyz"


def _is_low(dt: DType) -> bool:
    return dt.scalar().name in _LOW


def _float_via(fn):
    """Wrap an ALU renderer so half/bfloat16 results are computed in float and rounded once."""
    def render(*xs, dtype: DType) -> str:
        if _is_low(dtype) and dtype.count == 1:
            t = "half" if dtype.name == "float16" else "__nv_bfloat16"
            return f"(({t})({fn(*[f'((float)({x}))' for x in xs], dtype=dtypes.float32)}))"
        return fn(*xs, dtype=dtype)
    return render


TYPE_MAP = {**CStyleRenderer.type_map, "float16": "half", "bfloat16": "__nv_bfloat16", "int8": "signed char"}
_UNSIGNED = {8: "unsigned int", 16: "unsigned int", 32: "unsigned int", 64: "unsigned long long"}


def _lanes(fn):
    """Wrap an ALU renderer so a vector op runs lane by lane: dk_map<R>(lambda over scalars, operands...).
    Each operand is evaluated once (it is a function argument); the lambda holds the scalar code."""
    def render(*xs, dtype: DType) -> str:
        if dtype.count == 1:
            return fn(*xs, dtype=dtype)
        names = [f"_l{i}" for i in range(len(xs))]
        body = fn(*names, dtype=dtype.scalar())
        params = ", ".join(f"auto {n}" for n in names)
        return f"dk_map<{CUDARenderer().render_dtype(dtype)}>([&]({params}) {{ return {body}; }}, {', '.join(xs)})"
    return render


# integers wrap and divide as the IR says (the core's int_exact: int64 too, NVRTC folds a plain `x < x + 1` to true,
# found on an H200), half/bfloat16 computed in float and rounded once; comparisons and where keep their operands'
# types; then vectors lane by lane
_INT = exact_int_ops(CStyleRenderer.code_for_op, TYPE_MAP, _UNSIGNED)
_CODE = {op: fn if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.WHERE) else _float_via(fn) for op, fn in _INT.items()}
_CODE[Ops.RECIP] = _float_via(lambda x, dtype: f"(1.0{'f' if dtype.scalar() != dtypes.float64 else ''}/{x})")
_CODE = {op: _lanes(fn) for op, fn in _CODE.items()}


class CUDARenderer(CStyleRenderer):
    device = "CUDA"
    lang = "cuda"
    gpu_indexing = True
    has_local = True
    core_split = False
    vectors = True
    global_max = (2**31 - 1, 65535, 65535)  # grid dims (blocks)
    local_max = (1024, 1024, 64)  # block dims (threads); at most 1024 threads a block in total
    local_total_max = 1024
    shared_max = 49152  # static __shared__ bytes a block may declare
    max_buffers = 1024  # kernel params: 32 KiB of param space on CUDA 12.1+ / Volta+, 8 bytes each + vars

    kernel_prefix: ClassVar[str] = 'extern "C" __global__ '
    buffer_restrict: ClassVar[str] = "__restrict__ "
    buffer_const: ClassVar[str] = "const "
    arg_int_prefix: ClassVar[str] = "long long"
    smem_prefix: ClassVar[str] = "__shared__ "
    smem_align: ClassVar[str] = "__align__(16) "
    barrier: ClassVar[str] = "__syncthreads();"
    type_map: ClassVar[dict[str, str]] = TYPE_MAP
    code_for_op = _CODE
    math_fns: ClassVar[dict[Ops, str]] = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt",
                                          Ops.TRUNC: "trunc"}
    # ops whose code repeats an operand (MAX; IDIV/MOD guard their divisor): operands are not inlined into them
    repeats_operands: ClassVar[frozenset[Ops]] = frozenset({Ops.MAX, Ops.IDIV, Ops.MOD})

    def __init__(self, arch: str | None = None):
        self.arch = arch  # informational only; the compiler targets the arch

    def __reduce__(self):
        return (type(self), (self.arch,))

    def parse_source(self, src: str, entry: str, sizes: dict | None = None, global_size=None, local_size=None,
                     shared_bytes=None):
        """A ProgramSpec for a hand-written CUDA kernel: its signature read with libclang (devicekit_cuda.source)."""
        from .source import parse_cuda_source
        return parse_cuda_source(src, entry, sizes=sizes, global_size=global_size, local_size=local_size,
                                 shared_bytes=shared_bytes, device=self.device)

    # ---- types
    def vector_type(self, dt: DType) -> str:
        return f"dk_{dt.name}x{dt.count}"

    def native_vector(self, dt: DType) -> bool:
        """Vectors of 2, 4, 8 or 16 bytes stay vectors (one aligned ld/st.v2/.v4 instead of one per lane); others
        are scalarized by the base renderer."""
        return dt.count > 1 and dt.nbytes in (2, 4, 8, 16)

    def render_cast(self, x: str, src: DType, dst: DType) -> str:
        if src == dst:
            return x
        if dst.count > 1:
            body = self.render_cast("_l0", src.scalar(), dst.scalar())
            return f"dk_map<{self.render_dtype(dst)}>([&](auto _l0) {{ return {body}; }}, {x})"
        t = self.render_dtype(dst)
        if dst.is_bool:
            return f"((bool)({x}))" if not _is_low(src) else f"((bool)((float)({x})))"
        if (_is_low(dst) and src != dtypes.float32) or (_is_low(src) and dst != dtypes.float32):
            if _is_low(src) and dst == dtypes.float64:
                return f"((double)((float)({x})))"
            return f"(({t})((float)({x})))"
        return f"(({t})({x}))"

    def render_bitcast(self, x: str, src: DType, dst: DType) -> str:
        return f"dk_bitcast<{self.render_dtype(dst)}>({x})"

    def render_vectorize(self, lanes: list[str], dt: DType) -> str:
        return f"{self.render_dtype(dt)}{{{{{','.join(lanes)}}}}}"

    def render_gep(self, x: str, lane: int, dt: DType) -> str:
        return f"({x}).v[{lane}]"

    def render_math(self, fn: str, x: str, dt: DType) -> str:
        if dt.count > 1:
            body = self.render_math(fn, "_l0", dt.scalar())
            return f"dk_map<{self.render_dtype(dt)}>([&](auto _l0) {{ return {body}; }}, {x})"
        if _is_low(dt):
            return self.render_cast(f"{fn}f((float)({x}))", dtypes.float32, dt)
        return f"{fn}{'f' if dt.scalar() == dtypes.float32 else ''}({x})"

    def render_special(self, name: str, axis: int, extent: str) -> str:
        base = "blockIdx" if name.startswith("g") else "threadIdx"
        return f"((long long){base}.{_AXES[axis]})"

    def render_const(self, value, dt: DType) -> str:
        if dt.is_float and _is_low(dt) and math.isfinite(value):
            return f"(({self.render_dtype(dt)})({self.render_float(value, dtypes.float32)}))"
        return super().render_const(value, dt)

    # ---- file
    def render_preamble(self, used: set[DType]) -> str:
        names = {d.scalar().name for d in used}
        out = []
        if "float16" in names:
            out.append("#include <cuda_fp16.h>")
        if "bfloat16" in names:
            out.append("#include <cuda_bf16.h>")
        out += ["#ifndef INFINITY", "#define INFINITY (__int_as_float(0x7f800000))", "#endif",
                "#ifndef NAN", "#define NAN (__int_as_float(0x7fffffff))", "#endif",
                ("template <class D, class S> __device__ __forceinline__ D dk_bitcast(S s) "
                 "{ D d; memcpy(&d, &s, sizeof(D)); return d; }")]
        vecs = sorted((d for d in used if d.count > 1), key=lambda d: (d.name, d.count))
        for d in vecs:
            nb = d.nbytes
            align = nb if nb <= 16 and nb & (nb - 1) == 0 else d.itemsize
            out.append(f"struct __align__({align}) {self.vector_type(d)} {{ {self.type_map[d.name]} v[{d.count}]; }};")
        if vecs:  # lane-wise application of scalar code to vector operands (vector ALU ops and math)
            out.append("template <class R, class F, class... V> __device__ __forceinline__ R dk_map(F f, V... v) "
                       "{ R r; for (int i = 0; i < (int)(sizeof(r.v) / sizeof(r.v[0])); i++) r.v[i] = f(v.v[i]...); "
                       "return r; }")
        return "\n".join(out)

    def kernel_attributes(self, lk) -> str:
        """`__launch_bounds__(threads) ` when the block size is a constant (the core checked it against
        local_total_max): NVRTC then budgets registers for that many threads."""
        threads = const_threads(lk.local_size)
        return "" if threads is None else f"__launch_bounds__({threads}) "

    def meta(self, lk) -> tuple:
        return (("arch", self.arch),)
