"""Hand-written OpenCL C kernels as their authors write them (tests/corpus/*.cl, unmodified): the styles of the
Khronos, AMD, NVIDIA and Intel SDK samples and of the books and tutorials everyone copies from: vector add and
saxpy, matrix multiply with __local tiles passed as arguments or declared in the kernel (and
reqd_work_group_size), reductions with __local scratch and barriers (uint4, float, double), transpose with a padded
local tile, Blelloch scan, histograms with atomic_add / atomic_inc, a bitonic sort network launched pass by pass,
separable and 2-D convolution with the filter in __constant memory, a 1-D stencil, N-body with float4, mandelbrot
with float2, Black-Scholes with helper functions, uchar4 image kernels (Sobel, grayscale), vload4/vstore4,
#define'd tile sizes, preprocessor conditionals on the device's extensions, scalars of every OpenCL type in any
order, __local pointer arguments sized at launch, and Caffe-style kernels whose names a macro makes.

- every kernel's signature is read (libclang, in the bounded reader process) and checked against its declaration;
- a sample is built by the platform's OpenCL driver (PoCL here) and run with `dk.run` against numpy in the normal
  run; with DEVICEKIT_SLOW=1 every kernel is (a PoCL build costs ~0.3-1 s of CPU each). Measured with PoCL 3.1 on 2
  shared cores, its kernel cache cold: default 38 tests, 8-9 s of CPU; DEVICEKIT_SLOW=1 65 tests (32 kernels built
  and run), 17-20 s of CPU, 30-50 s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import devicekit as dk
import numpy as np
import pytest
from devicekit import settings

pytest.importorskip("clang.cindex", reason="the libclang wheel reads hand-written kernels")

CORPUS = Path(__file__).parent / "corpus"
SLOW = settings.get("DEVICEKIT_SLOW")
RNG = np.random.default_rng(0)
# the normal run builds and runs these (chosen to cover __local args, atomics, float4/uchar4, __constant, double)
SAMPLE = ("sum", "matrixMul", "histogram256", "nbody_sim", "dot_partial")


@dataclass
class Case:
    """One kernel of the corpus: its file and entry, the signature as declared (buffers name:dtype[:ro], scalars
    name=dtype, local memory name:local:dtype, in declaration order), the parse_source options, the named
    arguments, what numpy says the outputs are, and the tolerance ((rtol, atol); (0, 0) is exact)."""

    file: str
    entry: str
    sig: str
    options: dict
    named: dict
    want: dict
    tol: tuple[float, float] = (0, 0)
    steps: list[dict] = field(default_factory=list)  # several launches: each step's scalar values, outputs fed back

    @property
    def id(self) -> str:
        return f"{self.file}:{self.entry}"


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _groups_of(n_items: int, groups: int, local: int) -> np.ndarray:
    """The work-group each index of a grid-stride loop over n_items lands in (global size groups * local)."""
    return (np.arange(n_items) % (groups * local)) // local


def _mandel(q, maxiter):
    """pyopencl's mandelbrot kernel in float32 numpy: the last iteration at which |z|^2 > 4 held (it goes on
    iterating after the escape; once z overflows to nan the test stays false). OpenCL C contracts a*b+c to fma by
    default, which moves that overflow by one iteration: the check allows 1."""
    real = np.zeros(len(q), np.float32)
    imag = np.zeros(len(q), np.float32)
    out = np.zeros(len(q), np.uint16)
    with np.errstate(all="ignore"):
        for it in range(maxiter):
            nreal = real * real - imag * imag + q[:, 0]
            imag = np.float32(2) * real * imag + q[:, 1]
            real = nreal
            out[real * real + imag * imag > 4] = it
    return out


def _cnd(d):
    a1, a2, a3, a4, a5 = 0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429
    k = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    cnd = 0.39894228040143267793994605993438 * np.exp(-0.5 * d * d) * (k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5)))))
    return np.where(d > 0, 1 - cnd, cnd)


def _black_scholes(s, x, t, r, v):
    s, x, t = (a.astype(np.float64) for a in (s, x, t))
    d1 = (np.log(s / x) + (r + 0.5 * v * v) * t) / (v * np.sqrt(t))
    d2 = d1 - v * np.sqrt(t)
    e = np.exp(-r * t)
    return s * _cnd(d1) - x * e * _cnd(d2), x * e * (1 - _cnd(d2)) - s * (1 - _cnd(d1))


def _nbody(pos, vel, dt, eps2):
    r = pos[None, :, :].astype(np.float64) - pos[:, None, :]  # r[i, j] = pos[j] - pos[i], all four lanes
    dist2 = (r[..., :3] ** 2).sum(-1)
    inv = 1 / np.sqrt(dist2 + eps2)
    acc = ((pos[None, :, 3] * inv ** 3)[..., None] * r).sum(1)
    new_pos = pos + vel * dt + acc * 0.5 * dt * dt
    new_pos[:, 3] = pos[:, 3]
    return new_pos, vel + acc * dt


def _bitonic_steps(n):
    stages = n.bit_length() - 1
    return [{"stage": s, "passOfStage": p, "direction": 1} for s in range(stages) for p in range(s + 1)]


def _cases() -> list[Case]:
    c = []
    a, b = _f32(256), _f32(256)
    c.append(Case("pyopencl_sum.cl", "sum", "a_g:float32:ro b_g:float32:ro res_g:float32",
                  {"global_size": (4,), "local_size": (64,)}, {"a_g": a, "b_g": b, "res_g": np.empty_like(a)},
                  {"res_g": a + b}))
    a, b = RNG.standard_normal(1000), RNG.standard_normal(1000)
    c.append(Case("vector_add.cl", "vecAdd", "a:float64 b:float64 c:float64 n=uint32",
                  {"sizes": {"a": "n", "b": "n", "c": "n"}, "global_size": ("(n + 63) // 64",), "local_size": (64,)},
                  {"a": a, "b": b, "n": 1000}, {"c": a + b}))
    a, b = _f32(128), _f32(128)
    c.append(Case("saxpy.cl", "saxpy_kernel", "alpha=float32 A:float32 B:float32 C:float32",
                  {"global_size": (2,), "local_size": (64,)}, {"alpha": 1.5, "A": a, "B": b, "C": np.zeros(128, np.float32)},
                  {"C": np.float32(1.5) * a + b}, (1e-6, 1e-6)))
    A, B = _f32(32, 48), _f32(48, 32)
    c.append(Case("matrixMul.cl", "matrixMul",
                  "C:float32 A:float32 B:float32 As:local:float32 Bs:local:float32 uiWA=int32 uiWB=int32 "
                  "trueLocalSize1=int32",
                  {"shared_bytes": {"As": 16 * 16 * 4, "Bs": "16 * 16 * 4"}, "global_size": ("uiWB // 16", "trueLocalSize1 // 16"),
                   "local_size": (16, 16), "sizes": {"A": "trueLocalSize1 * uiWA", "B": "uiWA * uiWB",
                                                     "C": "trueLocalSize1 * uiWB"}},
                  {"A": A, "B": B, "uiWA": 48, "uiWB": 32, "trueLocalSize1": 32}, {"C": A @ B}, (1e-5, 1e-5)))
    A, B = _f32(32, 32), _f32(32, 48)  # column-major: A is M x K, B is K x N
    c.append(Case("myGEMM2.cl", "myGEMM2", "M=int32 N=int32 K=int32 A:float32:ro B:float32:ro C:float32",
                  {"sizes": {"A": "M * K", "B": "K * N", "C": "M * N"}, "global_size": ("M // 16", "N // 16"),
                   "local_size": (16, 16)},
                  {"M": 32, "N": 48, "K": 32, "A": A.T.copy(), "B": B.T.copy()}, {"C": (A @ B).T}, (1e-5, 1e-5)))
    x = RNG.integers(0, 1 << 20, (512, 4)).astype(np.uint32)
    c.append(Case("reduction_uint4.cl", "reduce", "input:uint32x4 output:uint32x4 sdata:local:uint32x4",
                  {"shared_bytes": 64 * 16, "global_size": (4,), "local_size": (64,)},
                  {"input": x, "output": np.zeros((4, 4), np.uint32)}, {"output": x.reshape(4, 128, 4).sum(1, dtype=np.uint32)}))
    x = _f32(1000)
    g = _groups_of(1000, 4, 64)
    c.append(Case("reduce_min.cl", "reduce", "buffer:float32 scratch:local:float32 length=int32 result:float32",
                  {"sizes": {"buffer": "length", "result": 4}, "shared_bytes": "64 * 4", "global_size": (4,),
                   "local_size": (64,)},
                  {"buffer": x, "length": 1000}, {"result": np.array([x[g == k].min() for k in range(4)])}))
    x = _f32(32, 48)
    c.append(Case("transpose.cl", "transpose",
                  "odata:float32 idata:float32 offset=int32 width=int32 height=int32 block:local:float32",
                  {"sizes": {"odata": "width * height", "idata": "width * height"}, "shared_bytes": "(16 + 1) * 16 * 4",
                   "global_size": ("width // 16", "height // 16"), "local_size": (16, 16)},
                  {"idata": x, "offset": 0, "width": 48, "height": 32}, {"odata": x.T}))
    x = _f32(20, 37)
    c.append(Case("transpose.cl", "transpose_naive", "odata:float32 idata:float32 offset=int32 width=int32 height=int32",
                  {"sizes": {"odata": "width * height", "idata": "width * height"}, "global_size": (3, 2),
                   "local_size": (16, 16)},
                  {"idata": x, "offset": 0, "width": 37, "height": 20}, {"odata": x.T}))
    x = RNG.integers(-20, 20, 128).astype(np.float32)
    c.append(Case("prefix_sum.cl", "prefixSum", "output:float32 input:float32 block:local:float32 length=uint32",
                  {"sizes": {"output": "length", "input": "length"}, "shared_bytes": "length * 4", "global_size": (1,),
                   "local_size": ("length // 2",)},
                  {"input": x, "length": 128}, {"output": np.cumsum(x) - x}))
    data = RNG.integers(0, 256, 3000).astype(np.int32)
    c.append(Case("histogram.cl", "histogram", "data:int32 numData=int32 histogram:int32",
                  {"sizes": {"data": "numData", "histogram": 256}, "global_size": (4,), "local_size": (64,)},
                  {"data": data, "numData": 3000}, {"histogram": np.bincount(data, minlength=256)}))
    data = RNG.integers(0, 256, 5000).astype(np.uint8)
    g = _groups_of(5000, 4, 64)
    c.append(Case("histogram256.cl", "histogram256", "data:uint8:ro sharedArray:local:uint32 binResult:uint32 n=uint32",
                  {"sizes": {"data": "n", "binResult": 4 * 256}, "shared_bytes": 256 * 4, "global_size": (4,),
                   "local_size": (64,)},
                  {"data": data, "n": 5000},
                  {"binResult": np.concatenate([np.bincount(data[g == k], minlength=256) for k in range(4)])}))
    bins = RNG.integers(0, 1000, (4, 256)).astype(np.uint32)
    c.append(Case("histogram256.cl", "reduceBins", "binResult:uint32:ro histogram:uint32 subHistgCnt=uint32",
                  {"sizes": {"binResult": "subHistgCnt * 256", "histogram": 256}, "global_size": (4,), "local_size": (64,)},
                  {"binResult": bins, "subHistgCnt": 4}, {"histogram": bins.sum(0)}))
    vals = RNG.integers(0, 1 << 31, 256).astype(np.uint32)
    c.append(Case("bitonic_sort.cl", "bitonicSort", "theArray:uint32 stage=uint32 passOfStage=uint32 direction=uint32",
                  {"sizes": {"theArray": 256}, "global_size": (2,), "local_size": (64,)},
                  {"theArray": vals}, {"theArray": np.sort(vals)}, steps=_bitonic_steps(256)))
    k = _f32(17)
    img = _f32(8, 64)
    c.append(Case("convolutionSeparable.cl", "convolutionRows",
                  "d_Dst:float32 d_Src:float32 c_Kernel:float32:ro imageW=int32 imageH=int32 pitch=int32",
                  {"sizes": {"d_Dst": "imageH * pitch", "d_Src": "imageH * pitch", "c_Kernel": 17},
                   "global_size": ("imageW // 64", "imageH // 4")},  # local: its reqd_work_group_size
                  {"d_Src": img, "c_Kernel": k, "imageW": 64, "imageH": 8, "pitch": 64},
                  {"d_Dst": np.stack([np.convolve(r, k, "same") for r in img])}, (1e-5, 1e-5)))
    img = _f32(64, 32)
    c.append(Case("convolutionSeparable.cl", "convolutionColumns",
                  "d_Dst:float32 d_Src:float32 c_Kernel:float32:ro imageW=int32 imageH=int32 pitch=int32",
                  {"sizes": {"d_Dst": "imageH * pitch", "d_Src": "imageH * pitch", "c_Kernel": 17},
                   "global_size": ("imageW // 16", "imageH // 32"), "local_size": (16, 8)},
                  {"d_Src": img, "c_Kernel": k, "imageW": 32, "imageH": 64, "pitch": 32},
                  {"d_Dst": np.stack([np.convolve(col, k, "same") for col in img.T], 1)}, (1e-5, 1e-5)))
    img, filt = _f32(20, 24), _f32(5, 5)
    pad = np.pad(img.astype(np.float64), 2, mode="edge")
    want = sum(filt[i, j] * pad[i:i + 20, j:j + 24] for i in range(5) for j in range(5))
    c.append(Case("convolution2d.cl", "convolution",
                  "imageIn:float32 imageOut:float32 filter:float32:ro rows=int32 cols=int32 filterWidth=int32",
                  {"sizes": {"imageIn": "rows * cols", "imageOut": "rows * cols", "filter": "filterWidth * filterWidth"},
                   "global_size": ("(cols + 15) // 16", "(rows + 15) // 16"), "local_size": (16, 16)},
                  {"imageIn": img, "filter": filt, "rows": 20, "cols": 24, "filterWidth": 5}, {"imageOut": want},
                  (1e-5, 1e-5)))
    pos = np.concatenate([_f32(128, 3) * 4, RNG.uniform(0.5, 2.0, (128, 1)).astype(np.float32)], 1)
    vel = _f32(128, 4) * 0.1
    new_pos, new_vel = _nbody(pos, vel, 0.005, 0.5)
    c.append(Case("nbody.cl", "nbody_sim",
                  "pos:float32x4 vel:float32x4 numBodies=int32 deltaTime=float32 epsSqr=float32 "
                  "localPos:local:float32x4 newPosition:float32x4 newVelocity:float32x4",
                  {"sizes": {"pos": "numBodies", "vel": "numBodies", "newPosition": "numBodies",
                             "newVelocity": "numBodies"}, "shared_bytes": {"localPos": "64 * 16"},
                   "global_size": ("numBodies // 64",), "local_size": (64,)},
                  {"pos": pos, "vel": vel, "numBodies": 128, "deltaTime": 0.005, "epsSqr": 0.5},
                  {"newPosition": new_pos, "newVelocity": new_vel}, (1e-4, 1e-4)))
    xs, ys = np.meshgrid(np.linspace(-2.2, 0.8, 32, dtype=np.float32), np.linspace(-1.2, 1.2, 16, dtype=np.float32))
    q = np.stack([xs.ravel(), ys.ravel()], 1)
    c.append(Case("mandelbrot.cl", "mandelbrot", "q:float32x2 output:uint16 maxiter=uint16",
                  {"sizes": {"q": 512, "output": 512}, "global_size": (8,), "local_size": (64,)},
                  {"q": q, "maxiter": 30}, {"output": _mandel(q, 30)}, (0, 1)))
    s, x, t = (RNG.uniform(lo, hi, 1000).astype(np.float32) for lo, hi in ((5, 30), (1, 100), (0.25, 10)))
    call, put = _black_scholes(s, x, t, 0.02, 0.30)
    c.append(Case("BlackScholes.cl", "BlackScholes",
                  "d_Call:float32 d_Put:float32 d_S:float32 d_X:float32 d_T:float32 R=float32 V=float32 optN=uint32",
                  {"sizes": {n: "optN" for n in ("d_Call", "d_Put", "d_S", "d_X", "d_T")}, "global_size": (4,),
                   "local_size": (64,)},
                  {"d_S": s, "d_X": x, "d_T": t, "R": 0.02, "V": 0.30, "optN": 1000}, {"d_Call": call, "d_Put": put},
                  (1e-4, 2e-4)))
    px = RNG.integers(0, 64, (16, 24, 4)).astype(np.uint8)  # |G| / 2 < 256: convert_uchar4 stays in range
    f = px.astype(np.float64)
    sh = {(dx, dy): f[1 + dy:15 + dy, 1 + dx:23 + dx] for dx in (-1, 0, 1) for dy in (-1, 0, 1)}
    gx = sh[-1, -1] + 2 * sh[0, -1] + sh[1, -1] - sh[-1, 1] - 2 * sh[0, 1] - sh[1, 1]
    gy = sh[-1, -1] - sh[1, -1] + 2 * sh[-1, 0] - 2 * sh[1, 0] + sh[-1, 1] - sh[1, 1]
    sobel = np.zeros_like(px)
    sobel[1:15, 1:23] = np.floor(np.hypot(gx, gy) / 2)
    c.append(Case("SobelFilter.cl", "sobel_filter", "inputImage:uint8x4 outputImage:uint8x4",
                  {"sizes": {"inputImage": 16 * 24, "outputImage": 16 * 24}, "global_size": (3, 2), "local_size": (8, 8)},
                  {"inputImage": px, "outputImage": np.zeros_like(px)}, {"outputImage": sobel}, (0, 1)))
    px = RNG.integers(0, 256, (6, 10, 4)).astype(np.uint8)
    luma = px[..., :3].astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)
    c.append(Case("grayscale.cl", "rgba_to_gray", "src:uint8x4:ro dst:uint8 width=int32 height=int32",
                  {"sizes": {"src": "width * height", "dst": "width * height"}, "global_size": (2, 1),
                   "local_size": (8, 8)},
                  {"src": px, "width": 10, "height": 6}, {"dst": np.rint(luma)}, (0, 1)))
    x, y = _f32(103), _f32(103)
    c.append(Case("vload_add.cl", "axpy_vec4", "a=float32 x:float32:ro y:float32 n=int32",
                  {"sizes": {"x": "n", "y": "n"}, "global_size": ("(n + 255) // 256",), "local_size": (64,)},
                  {"a": -0.75, "x": x, "y": y, "n": 103}, {"y": np.float32(-0.75) * x + y}, (1e-6, 1e-6)))
    sig_in, taps = _f32(215), _f32(16)
    c.append(Case("fir.cl", "fir", "input:float32:ro output:float32 coeff:float32:ro numTaps=uint32 length=uint64",
                  {"sizes": {"input": "length + numTaps - 1", "output": "length", "coeff": "numTaps"},
                   "global_size": ("(length + 63) // 64",), "local_size": (64,)},
                  {"input": sig_in, "coeff": taps, "numTaps": 16, "length": 200},
                  {"output": np.correlate(sig_in.astype(np.float64), taps, "valid")}, (1e-5, 1e-5)))
    X, Y = RNG.standard_normal(101), RNG.standard_normal(53)
    Yw = Y.copy()
    Yw[3 + 49 - np.arange(50)] += 1.5 * X[1 + 2 * np.arange(50)]  # incy = -1 walks Y backwards
    c.append(Case("daxpy_strided.cl", "Daxpy_kernel",
                  "N=uint32 alpha=float64 _X:float64:ro offx=uint64 incx=int32 _Y:float64 offy=uint64 incy=int32",
                  {"global_size": ("(N + 63) // 64",), "local_size": (64,)},
                  {"N": 50, "alpha": 1.5, "_X": X, "offx": 1, "incx": 2, "_Y": Y, "offy": 3, "incy": -1}, {"_Y": Yw},
                  (1e-14, 1e-14)))
    acc = RNG.integers(-9000, 9000, 300).astype(np.int32)
    v = np.rint(acc.astype(np.float32) * np.float32(0.02)).astype(np.int32) - 3
    c.append(Case("requantize.cl", "requantize_s32_s8",
                  "acc:int32:ro scale=float32 output_zero_point=int8 out:int8 apply_relu=uint8 count=uint64",
                  {"sizes": {"acc": "count", "out": "count"}, "global_size": ("(count + 63) // 64",), "local_size": (64,)},
                  {"acc": acc, "scale": 0.02, "output_zero_point": -3, "apply_relu": 1, "count": 300},
                  {"out": np.clip(np.maximum(v, -3), -128, 127)}))
    src16 = RNG.integers(0, 65536, 500).astype(np.uint16)
    lv = np.clip((src16.astype(np.float32) - np.float32(1000)) / np.float32(59000), 0, 1) * np.float32(65535) - 200
    c.append(Case("levels16.cl", "levels16", "src:uint16:ro dst:uint16 black=uint16 white=uint16 offset=int16 count=int64",
                  {"sizes": {"src": "count", "dst": "count"}, "global_size": ("(count + 63) // 64",), "local_size": (64,)},
                  {"src": src16, "black": 1000, "white": 60000, "offset": -200, "count": 500},
                  {"dst": np.clip(np.rint(lv), 0, 65535)}, (0, 1)))
    a, b = RNG.standard_normal(1000), RNG.standard_normal(1000)
    g = _groups_of(1000, 4, 64)
    c.append(Case("dot_real.cl", "dot_partial",  # PoCL has cl_khr_fp64: real_t is double, as the driver compiles it
                  "x:float64:ro y:float64:ro partial:float64 scratch:local:float64 n=int32",
                  {"sizes": {"x": "n", "y": "n", "partial": 4}, "shared_bytes": "64 * 8", "global_size": (4,),
                   "local_size": (64,)},
                  {"x": a, "y": b, "n": 1000}, {"partial": np.array([(a * b)[g == k].sum() for k in range(4)])},
                  (1e-12, 1e-12)))
    x = _f32(100)
    c.append(Case("relu_storage.cl", "relu_inplace", "data:{fp16_or_float} n=int32",
                  {"sizes": {"data": "n"}, "global_size": (2,), "local_size": (64,)},
                  {"data": x, "n": 100}, {"data": np.maximum(x, 0)}))
    x, d = _f32(300), _f32(300)
    c.append(Case("caffe_relu.cl", "relu_forward_float",  # the name TEMPLATE(relu_forward, Dtype) makes
                  "n=int32 in:float32:ro out:float32 negative_slope=float32",
                  {"sizes": {"in": "n", "out": "n"}, "global_size": (2,), "local_size": (64,)},
                  {"n": 300, "in": x, "negative_slope": 0.1}, {"out": np.where(x > 0, x, x * np.float32(0.1))},
                  (1e-6, 1e-6)))
    c.append(Case("caffe_relu.cl", "relu_backward_float",
                  "n=int32 in_diff:float32:ro in_data:float32:ro out_diff:float32 negative_slope=float32",
                  {"sizes": {"in_diff": "n", "in_data": "n", "out_diff": "n"}, "global_size": (2,), "local_size": (64,)},
                  {"n": 300, "in_diff": d, "in_data": x, "negative_slope": 0.1},
                  {"out_diff": d * np.where(x > 0, 1.0, 0.1)}, (1e-6, 1e-6)))
    x = _f32(200)
    c.append(Case("stencil_1d.cl", "stencil_1d", "in:float32:ro out:float32 temp:local:float32 n=int32",
                  {"sizes": {"in": "n", "out": "n"}, "shared_bytes": "(64 + 2 * 3) * 4",
                   "global_size": ("(n + 63) // 64",), "local_size": (64,)},
                  {"in": x, "n": 200}, {"out": np.convolve(x.astype(np.float64), np.ones(7), "same")}, (1e-5, 1e-5)))
    return c


CASES = _cases()


def _sig(spec) -> str:
    out = []
    for p in spec.get_meta("source_params"):
        lanes = f"x{p.dtype.count}" if p.dtype.count > 1 else ""
        dt = f"{p.dtype.scalar().name}{lanes}"
        if p.kind == "buffer":
            out.append(f"{p.name}:{dt}{'' if p.writable else ':ro'}")
        elif p.kind == "local":
            out.append(f"{p.name}:local:{dt}")
        else:
            out.append(f"{p.name}={dt}")
    return " ".join(out)


@pytest.fixture(scope="module")
def renderer():
    """The renderer of the OPENCL device when there is one (its extensions decide #ifdef cl_khr_fp16), else the
    default one: reading signatures needs libclang only."""
    rows = [d for d in dk.devices() if d.kind == "OPENCL"]
    if rows and rows[0].available:
        return dk.device("OPENCL").renderer
    from devicekit_opencl.renderer import OpenCLRenderer
    return OpenCLRenderer()


def test_corpus_is_big_enough():
    files = {p.name for p in CORPUS.glob("*.cl")}
    assert len(files) >= 20 and {c.file for c in CASES} == files and len(CASES) >= 25


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_signature_read_as_declared(case, renderer):
    spec = renderer.parse_source((CORPUS / case.file).read_text(), case.entry, **case.options)
    fp16 = "cl_khr_fp16" in renderer.extensions
    assert _sig(spec) == case.sig.format(fp16_or_float="float16" if fp16 else "float32")
    assert spec.get_meta("from_source") and spec.name == case.entry


def _run(dev, case: Case) -> dict[str, np.ndarray]:
    prog = dev.program_from_source((CORPUS / case.file).read_text(), case.entry, **case.options)
    named: dict[str, Any] = dict(case.named)
    if not case.steps:
        return dk.run(prog, **named)
    for step in case.steps:  # the host loop of a multi-pass kernel: each launch sees the last one's outputs
        named.update(step)
        named.update(dk.run(prog, **named))
    return named


@pytest.mark.parametrize("case", [c for c in CASES if SLOW or c.entry in SAMPLE], ids=lambda c: c.id)
def test_corpus_kernel_runs_on_the_device(case, cl_device):
    got = _run(cl_device, case)
    rtol, atol = case.tol
    for name, expected in case.want.items():
        expected = np.asarray(expected)
        out = np.asarray(got[name]).reshape(expected.shape)
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(out, expected.astype(out.dtype), err_msg=f"{case.id}: {name}")
        else:
            np.testing.assert_allclose(out.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=f"{case.id}: {name}")
