"""Hand-written sources of the conformance kit, one set per source language, with their numpy answers: what
`dev.program_from_source` must run as written (docs/handwritten.md). Each case names what it catches:

- `order`: scalars of every C type before, between and after buffers: a runtime that passes every buffer and then
  every scalar (instead of `spec.arg_order()`), or a scalar as the wrong ctypes type, gets wrong values or crashes;
- `vectors`: buffers of 4-lane vectors (element dtype `float32.vec(4)`);
- `split`, `split_wide`: the CPU's split arguments (`long long core_start, long long core_end`, `split=`): the
  runtime cuts the extent into chunks and passes each chunk's bounds, as 64-bit ints (an extent past 2**32);
- `scalars_only`: a kernel with no buffer at all (a runtime that assumes one crashes or refuses it).

A language the kit has no sources for is skipped with its name: add its sources here with the plugin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

N = 37  # odd and not a multiple of a vector width: tails show

# every scalar type of the language, each with a value only that type holds (the sign bit of the unsigned ones set)
SCALARS = {"s8": -7, "s16": -300, "u8": 200, "s32": -70000, "u32": 3_000_000_000, "s64": -(2**40) - 3,
           "u64": 2**63 + 5, "f32": 0.5, "f64": 1 / 3, "b": 1, "u16": 60000}


@dataclass
class SourceCase:
    name: str
    entry: str
    src: str
    options: dict[str, Any]
    inputs: dict[str, Any]
    want: dict[str, np.ndarray]  # output buffer -> numpy answer (empty: the kernel must run and return)
    exact: bool = True
    skip_if: str = ""  # a reason the case does not apply to this dialect
    notes: list[str] = field(default_factory=list)


def _order_want(x: np.ndarray) -> dict[str, np.ndarray]:
    s = SCALARS
    y = (x.astype(np.float64) * s["f32"] + s["f64"]).astype(np.float32)
    oi = np.array([s["s8"], s["s16"], s["u8"], s["s32"], s["u32"], s["s64"], s["b"], s["u16"]], np.int64)
    return {"y": y, "oi": oi, "ou": np.array([s["u64"]], np.uint64), "od": np.array([s["f32"], s["f64"]])}


def c_cases(prefix: str = "") -> list[SourceCase]:
    """C (the CPU plugin's dialect; a vendor's C with a kernel prefix passes `prefix`)."""
    x = np.linspace(-3, 3, N).astype(np.float32)
    order = f"""{prefix}void dk_kit_order(signed char s8, const float *x, short s16, unsigned char u8, float *y, int s32,
    unsigned int u32, long long *oi, long long s64, unsigned long long u64, unsigned long long *ou, float f32,
    double f64, double *od, _Bool b, unsigned short u16, int n) {{
  for (int i = 0; i < n; i++) y[i] = (float)((double)x[i] * f32 + f64);
  oi[0] = s8; oi[1] = s16; oi[2] = u8; oi[3] = s32; oi[4] = (long long)u32; oi[5] = s64; oi[6] = b; oi[7] = u16;
  ou[0] = u64; od[0] = f32; od[1] = f64;
}}
"""
    vec = f"""typedef float dk_v4f __attribute__((vector_size(16)));
{prefix}void dk_kit_vectors(const dk_v4f *x, float a, dk_v4f *y, int n) {{
  for (int i = 0; i < n; i++) y[i] = x[i] * a + x[i];
}}
"""
    split = f"""{prefix}void dk_kit_split(const double *x, long long n, double *y, long long core_start, long long core_end) {{
  for (long long i = core_start; i < core_end; i++) y[i] = x[i] * 3.0 + (double)i;
}}
"""
    wide = f"""{prefix}void dk_kit_split_wide(long long n, long long *y, long long core_start, long long core_end) {{
  if (core_end == n) y[0] = core_end;
  if (core_start == 0) y[1] = 1;
  if (core_start < 0 || core_end > n || core_start > core_end) y[2] = 1;
}}
"""
    only = f"""{prefix}void dk_kit_scalars_only(int a, double b, long long c) {{
  volatile double sink = a * b + (double)c;
  (void)sink;
}}
"""
    big = 1 << 16  # large enough for the CPU runtime to cut it into several chunks
    xs = np.arange(big, dtype=np.float64) * 0.25
    x4 = np.arange(4 * 9, dtype=np.float32).reshape(9, 4) - 10
    return [
        SourceCase("order", "dk_kit_order", order, {"sizes": {"x": "n", "y": "n", "oi": 8, "ou": 1, "od": 2}},
                   {"x": x, "n": N, **SCALARS}, _order_want(x)),
        SourceCase("vectors", "dk_kit_vectors", vec, {"sizes": {"x": "n", "y": "n"}},
                   {"x": x4, "a": 2.5, "n": 9}, {"y": (x4 * np.float32(2.5) + x4).reshape(-1)}),
        SourceCase("split", "dk_kit_split", split, {"sizes": {"x": "n", "y": "n"}, "split": "n"},
                   {"x": xs, "n": big}, {"y": xs * 3.0 + np.arange(big)}),
        # an extent past 2**32: split bounds passed as 32-bit ints lose it (no loop: the chunks only report bounds)
        SourceCase("split_wide", "dk_kit_split_wide", wide, {"sizes": {"y": 3}, "split": "n"}, {"n": 2**32 + 5},
                   {"y": np.array([2**32 + 5, 1, 0], np.int64)}),
        SourceCase("scalars_only", "dk_kit_scalars_only", only, {}, {"a": 3, "b": 0.5, "c": -4}, {}),
    ]


def opencl_cases() -> list[SourceCase]:
    """OpenCL C: no bool kernel args; double only where the device has cl_khr_fp64 (guarded)."""
    x = np.linspace(-3, 3, N).astype(np.float32)
    order = """__kernel void dk_kit_order(char s8, __global const float *x, short s16, uchar u8, __global float *y,
    int s32, uint u32, __global long *oi, long s64, ulong u64, __global ulong *ou, float f32, float f64,
    __global float *od, uchar b, ushort u16, int n) {
  int i = get_global_id(0);
  if (i < n) y[i] = x[i] * f32 + f64;
  if (i == 0) {
    oi[0] = s8; oi[1] = s16; oi[2] = u8; oi[3] = s32; oi[4] = (long)u32; oi[5] = s64; oi[6] = b; oi[7] = u16;
    ou[0] = u64; od[0] = f32; od[1] = f64;
  }
}
"""
    vec = """__kernel void dk_kit_vectors(__global const float4 *x, float a, __global float4 *y, int n) {
  int i = get_global_id(0);
  if (i < n) y[i] = x[i] * a + x[i];
}
"""
    only = """__kernel void dk_kit_scalars_only(int a, float b, long c) { }
"""
    x4 = np.arange(4 * 9, dtype=np.float32).reshape(9, 4) - 10
    want = _order_want(x)
    f64 = np.float32(SCALARS["f64"])
    want["y"] = x * np.float32(SCALARS["f32"]) + f64
    want["od"] = np.array([SCALARS["f32"], f64], np.float32)
    dims = {"global_size": ("(n + 63) // 64",), "local_size": (64,)}
    return [
        SourceCase("order", "dk_kit_order", order,
                   {"sizes": {"x": "n", "y": "n", "oi": 8, "ou": 1, "od": 2}, **dims},
                   {"x": x, "n": N, **SCALARS}, want, exact=False),
        SourceCase("vectors", "dk_kit_vectors", vec, {"sizes": {"x": "n", "y": "n"}, **dims},
                   {"x": x4, "a": 2.5, "n": 9}, {"y": (x4 * np.float32(2.5) + x4).reshape(-1)}, exact=False),
        SourceCase("split", "", "", {}, {}, {}, skip_if="OpenCL has no split arguments (a grid of work-items)"),
        SourceCase("split_wide", "", "", {}, {}, {}, skip_if="OpenCL has no split arguments (a grid of work-items)"),
        SourceCase("scalars_only", "dk_kit_scalars_only", only, {"global_size": (1,), "local_size": (1,)},
                   {"a": 3, "b": 0.5, "c": -4}, {}),
    ]


def cases_for(lang: str) -> list[SourceCase] | None:
    """The kit's sources for a renderer's `lang`; None for a language it has none for."""
    if lang == "opencl":
        return opencl_cases()
    if lang == "c" or lang.endswith("-c"):  # C and a vendor's C dialect ("acme-c")
        return c_cases()
    return None


CASE_NAMES = ("order", "vectors", "split", "split_wide", "scalars_only")
