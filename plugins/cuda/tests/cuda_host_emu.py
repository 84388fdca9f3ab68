"""Host emulation of CUDA-rendered kernels: the CUDA C that CUDARenderer emits is compiled as C++ with g++ (a small
shim header defines blockIdx/threadIdx/blockDim, __global__, half, bfloat16 and the math functions) and run on
the CPU, looping over blocks and threads. Kernels with __syncthreads() run one std::thread per CUDA thread of a
block with a barrier. This tests the renderer's semantics (indexing, guards, types, casts, math) without a GPU.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
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

_LAUNCHER = r"""
#include <thread>
#include <vector>
#include <barrier>
dk_uint3 blockIdx, blockDim, gridDim;
thread_local dk_uint3 threadIdx;
static std::barrier<>* dk_bar = nullptr;
void dk_syncthreads() { if (dk_bar) dk_bar->arrive_and_wait(); }
extern "C" void dk_launch(void** bufs, const long long* vars, const long long* g, const long long* l, int threaded) {
  gridDim = {(unsigned)g[0], (unsigned)g[1], (unsigned)g[2]};
  blockDim = {(unsigned)l[0], (unsigned)l[1], (unsigned)l[2]};
  long long nthreads = l[0] * l[1] * l[2];
  for (long long bz = 0; bz < g[2]; bz++) for (long long by = 0; by < g[1]; by++) for (long long bx = 0; bx < g[0]; bx++) {
    blockIdx = {(unsigned)bx, (unsigned)by, (unsigned)bz};
    auto body = [&](long long t) {
      threadIdx = {(unsigned)(t % l[0]), (unsigned)((t / l[0]) % l[1]), (unsigned)(t / (l[0] * l[1]))};
      CALL;
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
    def __init__(self, spec, renderer):
        self.spec = spec
        args = [f"({renderer.render_dtype(p.dtype)}*)bufs[{i}]" for i, p in enumerate(spec.params)]
        args += [f"vars[{i}]" for i in range(len(spec.vars))]
        src = spec.src + _LAUNCHER.replace("CALL", f"{spec.name}({', '.join(args)})")
        self.threaded = "__syncthreads" in spec.src
        h = hashlib.sha256(src.encode()).hexdigest()[:16]
        cpp, so = os.path.join(_BUILD, f"{h}.cpp"), os.path.join(_BUILD, f"{h}.so")
        if not os.path.exists(so):
            with open(cpp, "w") as f:
                f.write(src)
            cmd = [CXX, "-std=c++20", "-O1", "-shared", "-fPIC", "-fwrapv", "-ffp-contract=off", "-w", "-pthread",
                   "-I", INCLUDE, "-include", os.path.join(INCLUDE, "cuda_host_shim.h"), cpp, "-o", so]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"host compile failed:\n{r.stderr}\n--- source ---\n{src}")
        self.lib = ctypes.CDLL(so)
        self.lib.dk_launch.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_longlong),
                                       ctypes.POINTER(ctypes.c_longlong), ctypes.POINTER(ctypes.c_longlong),
                                       ctypes.c_int]

    def __call__(self, **kw) -> dict[str, np.ndarray]:
        """Run like dk.run: arrays by param name (writable ones come back), ints by var name."""
        spec = self.spec
        var_vals = {v.name: int(kw[v.name]) for v in spec.vars}
        g, loc = spec.launch_dims(var_vals)
        g3 = (tuple(g or ()) + (1, 1, 1))[:3]
        l3 = (tuple(loc or ()) + (1, 1, 1))[:3]
        if self.threaded and math.prod(l3) > 1024:
            raise ValueError("too many threads to emulate")
        stores = []
        for p in spec.params:
            n = sym_eval(p.size, var_vals)
            arr = np.ascontiguousarray(from_numpy_values(kw[p.name], p.dtype).reshape(-1)[:n]).copy()
            if arr.size < n:
                raise ValueError(f"{p.name}: {arr.size} < {n} elements")
            stores.append(arr)
        bufs = (ctypes.c_void_p * max(1, len(stores)))(*[a.ctypes.data for a in stores])
        vals = (ctypes.c_longlong * max(1, len(spec.vars)))(*[var_vals[v.name] for v in spec.vars])
        if math.prod(g3) and math.prod(l3):
            self.lib.dk_launch(bufs, vals, (ctypes.c_longlong * 3)(*g3), (ctypes.c_longlong * 3)(*l3),
                               int(self.threaded))
        return {p.name: to_numpy_values(a, p.dtype) for p, a in zip(spec.params, stores) if p.writable}


def host_compile(kernel, renderer=None) -> HostKernel:
    from devicekit_cuda.renderer import CUDARenderer
    renderer = renderer or CUDARenderer()
    return HostKernel(renderer.render(kernel), renderer)
