"""Host emulation of CUDA-rendered kernels: the CUDA C that CUDARenderer emits is compiled as C++ with g++ (a small
shim header defines blockIdx/threadIdx/blockDim, __global__, half, bfloat16 and the math functions) and run on
the CPU, looping over blocks and threads. Kernels with __syncthreads() run one std::thread per CUDA thread of a
block, meeting at a std::barrier. This tests the renderer's semantics (indexing, guards, types, casts, math)
without a GPU.

`host_compile_many` builds many kernels into one shared library (one compiler run: g++ start-up and the standard
headers dominate the cost of a single small kernel); each kernel's source sits in its own namespace.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import math
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np
from devicekit.ir.dtypes import from_numpy_values, to_numpy_values
from devicekit.ir.uop import sym_eval

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.path.join(HERE, "host_include")
CXX = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")
_BUILD = tempfile.mkdtemp(prefix="devicekit-cuda-emu-")
atexit.register(shutil.rmtree, _BUILD, ignore_errors=True)
# Signed overflow is undefined in CUDA C++ as in C++, and NVRTC exploits it (`x < x + 1` folded to true on int64,
# found on an H200; g++ with -fwrapv had hidden it here). So the emulation compiles without -fwrapv and with GCC's
# signed-overflow check, whose handlers (defined in the prelude, before libubsan's) count what they see: a launch of
# a rendered kernel that overflowed fails its test.
UBSAN = ("-fsanitize=signed-integer-overflow",)
_UB_HANDLERS = "".join(f'extern "C" void __ubsan_handle_{h}(void*, void*{", void*" * n}) {{ dk_ub++; }}\n'
                       for h, n in (("add_overflow", 1), ("sub_overflow", 1), ("mul_overflow", 1),
                                    ("negate_overflow", 0), ("divrem_overflow", 1)))

_PRELUDE = r"""
#include <atomic>
static std::atomic<long> dk_ub{0};
extern "C" long dk_ub_count() { return dk_ub.exchange(0); }
#include <thread>
#include <vector>
#include <barrier>
dk_uint3 blockIdx, blockDim, gridDim;
thread_local dk_uint3 threadIdx;
static std::barrier<>* dk_bar = nullptr;
struct dk_ptr { void* p; template <class T> operator T*() const { return (T*)p; } };  // any buffer param type
template <class T> static T dk_bits(long long slot) { T t; __builtin_memcpy(&t, &slot, sizeof(T)); return t; }
void dk_syncthreads() { if (dk_bar) dk_bar->arrive_and_wait(); }
template <class F> static void dk_run(F call, const long long* g, const long long* l, int threaded) {
  gridDim = {(unsigned)g[0], (unsigned)g[1], (unsigned)g[2]};
  blockDim = {(unsigned)l[0], (unsigned)l[1], (unsigned)l[2]};
  long long nthreads = l[0] * l[1] * l[2];
  for (long long bz = 0; bz < g[2]; bz++) for (long long by = 0; by < g[1]; by++) for (long long bx = 0; bx < g[0]; bx++) {
    blockIdx = {(unsigned)bx, (unsigned)by, (unsigned)bz};
    auto body = [&](long long t) {
      threadIdx = {(unsigned)(t % l[0]), (unsigned)((t / l[0]) % l[1]), (unsigned)(t / (l[0] * l[1]))};
      call();
    };
    if (!threaded) { for (long long t = 0; t < nthreads; t++) body(t); continue; }
    std::barrier<> bar(nthreads);
    dk_bar = &bar;
    std::vector<std::thread> ts;
    for (long long t = 0; t < nthreads; t++) ts.emplace_back(body, t);
    for (auto& th : ts) th.join();
    dk_bar = nullptr;
  }
}
"""


class HostKernel:
    def __init__(self, spec, lib: ctypes.CDLL, symbol: str):
        self.spec = spec
        self.threaded = "__syncthreads" in spec.src
        self.fn = getattr(lib, symbol)
        self.fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_longlong),
                            ctypes.POINTER(ctypes.c_longlong), ctypes.POINTER(ctypes.c_longlong), ctypes.c_int]
        self._lib = lib
        lib.dk_ub_count.restype = ctypes.c_long

    def __call__(self, **kw) -> dict[str, np.ndarray]:
        """Run like dk.run: arrays by param name (writable ones come back; omitted ones start zeroed), ints by var."""
        spec = self.spec
        var_vals = spec.var_dict([kw[v.name] for v in spec.vars])  # a k.scalar checked and rounded to its dtype
        g, loc = spec.launch_dims(var_vals)
        g3 = (tuple(g or ()) + (1, 1, 1))[:3]
        l3 = (tuple(loc or ()) + (1, 1, 1))[:3]
        if self.threaded and math.prod(l3) > 1024:
            raise ValueError("too many threads a block to emulate")
        stores = []
        for p in spec.params:
            n = sym_eval(p.size, var_vals)
            given = kw[p.name] if p.name in kw else np.zeros(n, p.dtype.np_compute)
            arr = np.ascontiguousarray(from_numpy_values(given, p.dtype).reshape(-1)[:n]).copy()
            if arr.size < n:
                raise ValueError(f"{p.name}: {arr.size} < {n} elements")
            stores.append(arr)
        bufs = (ctypes.c_void_p * max(1, len(stores)))(*[a.ctypes.data for a in stores])
        vals = (ctypes.c_longlong * max(1, len(spec.vars)))(*[_slot(var_vals[v.name], v) for v in spec.vars])
        self._lib.dk_ub_count()
        if math.prod(g3) and math.prod(l3):
            self.fn(bufs, vals, (ctypes.c_longlong * 3)(*g3), (ctypes.c_longlong * 3)(*l3), int(self.threaded))
        ub = self._lib.dk_ub_count()
        if ub and not spec.get_meta("from_source"):  # a hand-written kernel's own overflow is its author's
            raise AssertionError(f"{spec.name}: the rendered CUDA overflowed a signed integer {ub} time(s) "
                                 f"(undefined in CUDA C++: NVRTC may fold it)")
        return {p.name: to_numpy_values(a, p.dtype) for p, a in zip(spec.params, stores) if p.writable}


_FLOAT_C = {"float16": "half", "float32": "float", "float64": "double"}
# `extern __shared__ T name[];` (sized by the launch) becomes a 48 KiB block-shared array in the emulation
_DYN_SHARED = re.compile(r"extern\s+__shared__\s+([^;\[]+?)\s*\b(\w+)\s*\[\s*\]\s*;")


def _slot(x, v) -> int:
    """A var's value in the 64-bit slot the harness passes: an int as it is, a float as the bits of its C type."""
    import struct
    if not v.is_float:
        return int(x)
    fmt = {"float16": "e", "float32": "f", "float64": "d"}[v.dtype.name]
    return struct.unpack("<q", struct.pack("<" + fmt, x).ljust(8, b"\0"))[0]


def host_compile_many(kernels, renderer=None) -> dict[str, HostKernel]:
    """Render every kernel with the CUDA renderer (ProgramSpecs, e.g. hand-written CUDA, are taken as they are) and build
    them all into one host library: {kernel name: HostKernel}."""
    from devicekit.render.program_spec import ProgramSpec
    from devicekit_cuda.renderer import CUDARenderer
    renderer = renderer or CUDARenderer()
    specs = [k if isinstance(k, ProgramSpec) else renderer.render(k) for k in kernels]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"kernel names must be unique in one host library: {sorted(n for n in names if names.count(n) > 1)}")
    parts = [_PRELUDE, _UB_HANDLERS]
    for n, spec in enumerate(specs):
        args = []
        for kind, i in spec.arg_order():  # hand-written kernels interleave buffers and scalars of any C type
            if kind == "buffer":
                args.append(f"dk_ptr{{bufs[{i}]}}" if spec.get_meta("from_source") else
                            f"({renderer.render_dtype(spec.params[i].dtype)}*)bufs[{i}]")
            else:
                dt = spec.vars[i].dtype
                args.append(f"dk_bits<{_FLOAT_C[dt.name]}>(vars[{i}])" if dt is not None and dt.is_float else
                            f"vars[{i}]")
        src = _DYN_SHARED.sub(r"alignas(16) __shared__ \1 \2[49152 / sizeof(\1)];", spec.src)
        parts.append(f"namespace dk_k{n} {{\n{src}\n}}\n"
                     f'extern "C" void dk_launch_{n}(void** bufs, const long long* vars, const long long* g, '
                     f"const long long* l, int threaded) {{\n"
                     f"  dk_run([&]() {{ dk_k{n}::{spec.entry}({', '.join(args)}); }}, g, l, threaded);\n}}\n")
    src = "\n".join(parts)
    h = hashlib.sha256(src.encode()).hexdigest()[:16]
    cpp, so = os.path.join(_BUILD, f"{h}.cpp"), os.path.join(_BUILD, f"{h}.so")
    if not os.path.exists(so):
        with open(cpp, "w") as f:
            f.write(src)
        cmd = [CXX, "-std=c++20", "-O0",  # -O0: a third of -O1's compile time; same IEEE semantics (SSE, no contraction)
               "-shared", "-fPIC", *UBSAN, "-ffp-contract=off", "-w", "-pthread",
               "-I", INCLUDE, "-include", os.path.join(INCLUDE, "cuda_host_shim.h"), cpp, "-o", so + ".tmp"]
        r = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"host compile failed ({cpp}):\n{r.stderr[:20000]}")
        os.replace(so + ".tmp", so)
    lib = ctypes.CDLL(so)
    return {spec.name: HostKernel(spec, lib, f"dk_launch_{n}") for n, spec in enumerate(specs)}


def host_compile(kernel, renderer=None) -> HostKernel:
    return next(iter(host_compile_many([kernel], renderer).values()))
