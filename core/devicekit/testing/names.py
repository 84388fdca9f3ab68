"""Hostile user names, in one place: names that once shadowed a renderer's temporaries, became header macros or
broke a compile, for the conformance kit, the fuzzer and the tests. `hostile_kernel` builds a kernel whose kernel,
param, var (and local) names are any of them; every device must run it like PYTHON (see docs/ir.md, Names)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

_GROUPS = {
    # the issue's own examples
    "issue": "ridx0 alu0 acc1 INFINITY HUGE_VAL t1 entry loop0 int for sqrtf _Float16 local global",
    "c_keywords": """auto break case char const continue default do double else enum extern float goto if inline
        long register restrict return short signed sizeof static struct switch typedef union unsigned void volatile
        while _Bool _Complex _Imaginary _Alignas _Alignof _Atomic _Generic _Noreturn _Static_assert _Thread_local
        bool true false""",
    "cpp_keywords": """alignas alignof and asm catch class const_cast constexpr decltype delete dynamic_cast explicit
        export friend mutable namespace new noexcept not nullptr operator or private protected public
        reinterpret_cast static_assert static_cast template this throw try typeid typename using virtual xor
        char8_t wchar_t""",
    "cuda": """__global__ __device__ __shared__ __host__ __constant__ __restrict__ __launch_bounds__ threadIdx blockIdx
        blockDim gridDim warpSize dim3 half __half __nv_bfloat16 float4 int2 make_float4 __syncthreads atomicAdd
        __float2half""",
    "metal": """kernel device constant threadgroup thread metal precise fast vertex fragment bfloat uint ushort uchar
        uint3 select as_type threadgroup_barrier mem_flags packed_float4 simd_sum gid lid""",
    "opencl": "__kernel __global __local __private __constant private get_global_id read_only write_only",
    "builtins": """sqrt exp2 exp2f log2 log2f sin sinf trunc truncf fabs fmaxf max min abs memcpy memset malloc free
        printf main exit abort isnan isinf signbit""",
    "macros": """HUGE_VALF NAN M_PI MAXFLOAT FLT_MAX DBL_MAX INT_MAX INT64_MIN NULL EOF errno assert offsetof CHAR_BIT
        FP_NAN math_errhandling stdout""",
    # the C-style renderers' temporaries and helpers, the CUDA/Metal renderers' former renames
    "temporaries": """alu1 val0 val3 acc0 acc0_0 acc1_n0 cast0 ridx1 gidx0 lidx0 data0 data1 vec0 gep0 bc0 smem0
        dk_map dk_bitcast dk_float32x4 dk_v _l0 dkv_n var_n dku_x""",
    # the LLVM renderer's values and labels, and LLVM IR keywords
    "llvm": """t0 t2 arg0 var0 local1 loop0m body0 latch0 exit0 if0 endif0 ridx0m define declare ptr i32 i64 label
        phi br ret undef poison zeroinitializer llvm nsw""",
    # Python keywords (dk.run takes arguments by name: `**{"lambda": arr}`) and odd but valid spellings
    "python": "lambda None True def import pass yield",
    "odd": "_ __ ___x x__y _0 A Z9 " + "n" * 128,
}

HOSTILE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(n for g in _GROUPS.values() for n in g.split()))
# names the builder refuses with one clear error (ValueError; TypeError for a non-str)
INVALID_NAMES: tuple[Any, ...] = ("", "1x", "x-y", "a b", "x.y", "x\n", "é", "naïve", "核", "α_1", "n" * 129,
                                  "core_start", "core_end", None, 3, b"x")


# keywords, qualifiers and type names of the C-like target languages (C, CUDA, MSL, OpenCL C), as a kernel's own name
# and as every one of its names, in every position: the conformance kit runs all of them on every device
TARGET_KEYWORD_CASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("local", ("global", "half", "kernel", "private", "constant")),
    ("half", ("local", "global", "__global", "__local", "uchar")),
    ("global", ("half", "local", "device", "threadgroup", "__shared__")),
    ("kernel", ("int", "float", "double", "bool", "restrict")),
    ("__kernel", ("long", "ulong", "signed", "unsigned", "barrier")),
    ("get_group_id", ("get_local_id", "as_int", "size_t", "ushort", "CLK_LOCAL_MEM_FENCE")),
)


def hostile_kernel(names: Sequence[str], kernel_name: str = "kernel", local: bool = False):
    """(kernel, inputs): out = sqrt(a*a) + b + n + sum(a) + min(a, inf), on names [n, a, b, out] (and a local array
    named names[4] when `local`: a GPU kernel, 16 threads a group, sums its block through local memory). Uses a
    var, a reduction, a libm call and an infinity constant, so each kind of collision would show up."""
    from .. import ir
    from ..ir.dtypes import dtypes

    vn, an, bn, on = names[:4]
    k = ir.KernelBuilder(kernel_name)
    n = k.var(vn, 1, 4096)
    a = k.param(an, dtypes.float32, n * 16 if local else n)
    b = k.param(bn, dtypes.int32, n * 16 if local else n)
    out = k.param(on, dtypes.float32, n * 16 if local else n, writable=True)
    if local:
        g, t = k.range(n, "global"), k.range(16, "local")
        tile = k.local(names[4], dtypes.float32, 16)
        i = g * 16 + t
        tile[t] = a[i]
        k.barrier()
        r = k.range(16, "reduce")
        total = tile[r].sum(r)
    else:
        i = k.range(n, "global")
        r = k.range(n, "reduce")
        total = a[r].sum(r)
    x = a[i]
    out[i] = ir.sqrt(x * x) + b[i].cast(dtypes.float32) + n.cast(dtypes.float32) + total + \
        ir.minimum(x, float("inf"))
    count = 3 * (16 if local else 1)
    rng = np.random.default_rng(len(kernel_name) + sum(map(len, names)))
    inputs = {vn: 3, an: rng.standard_normal(count).astype(np.float32),
              bn: rng.integers(-50, 50, count).astype(np.int32), on: np.zeros(count, np.float32)}
    return k.build(), inputs


def hostile_expected(names: Sequence[str], inputs: dict[str, Any], local: bool = False) -> np.ndarray:
    """What `hostile_kernel(names, ..., local)` computes, in plain numpy (float64, then float32): an answer that does
    not go through `dk.run` or the reference, so a run that loses an input (passes zeros) fails on every device."""
    vn, an, bn = names[:3]
    n, a, b = int(inputs[vn]), np.asarray(inputs[an], np.float64), np.asarray(inputs[bn], np.float64)
    total = a.reshape(n, 16).sum(axis=1).repeat(16) if local else a[:n].sum()
    return (np.abs(a) + b + n + total + a).astype(np.float32)


def name_sets(width: int = 4, rotations: tuple[int, ...] | None = (0, 1, 2)) -> list[tuple[str, list[str]]]:
    """(kernel name, `width` distinct param/var names) cases. The names are cut into chunks of width + 1 (the last
    padded from the start); rotation r of a chunk makes its r-th name the kernel's, the next the var's, the rest
    params': rotations (0, 1, 2) use every name at least once (as a param or the var) and 3 in 5 of them as a
    kernel's name. `rotations=None`: every name as the kernel's name and in every argument position
    (len(HOSTILE_NAMES) cases; DEVICEKIT_SLOW runs)."""
    names = HOSTILE_NAMES
    if rotations is None:
        return [(names[i], [names[(i + 1 + j) % len(names)] for j in range(width)]) for i in range(len(names))]
    chunks = [list((names[i:i + width + 1] + names)[:width + 1]) for i in range(0, len(names), width + 1)]
    return [(c[r], c[r + 1:] + c[:r]) for c in chunks for r in rotations]
