"""Hand-written CUDA kernels as their authors write them (tests/corpus/*.cu: the CUDA samples' vectorAdd, matrixMul,
reduction and transpose, llm.c's softmax/layernorm/gelu kernels, a shared-atomics histogram, warp-shuffle and
cooperative-groups reductions, a 1-D stencil, half/bfloat16/float4 kernels, cub and cuda::std, ...), unmodified: C++
linkage, templates named by their instantiation, host code and host headers left in the file.

- every kernel's signature is read (libclang, in the bounded reader process) and checked against what it declares;
- a sample compiles to a cubin here (NVRTC + nvJitLink, no GPU) that defines the lowered (mangled) name NVRTC
  reported; with DEVICEKIT_SLOW=1 every kernel does;
- nvcc (the CUDA toolkit, when installed) compiles the same unmodified file to a cubin for the same arch, and that
  cubin defines the same symbol: the name the runtime will load is the one nvcc gives the kernel (a sample here,
  every file with DEVICEKIT_SLOW=1);
- two of them run in the host emulation (g++) against numpy.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from devicekit import settings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from devicekit_cuda import toolchain
from devicekit_cuda.renderer import CUDARenderer

clang = pytest.importorskip("clang.cindex", reason="the libclang wheel reads hand-written kernels")

CORPUS = Path(__file__).parent / "corpus"
SLOW = settings.get("DEVICEKIT_SLOW")
ARCH = "sm_90"

# (file, entry, the signature as declared: buffers name:dtype[:ro], scalars name=dtype, in declaration order)
CASES = [
    ("vectorAdd.cu", "vectorAdd", "A:float32:ro B:float32:ro C:float32 numElements=int32"),
    ("matrixMul.cu", "MatrixMulCUDA<32>", "C:float32 A:float32 B:float32 wA=int32 wB=int32"),
    ("matrixMul.cu", "MatrixMulCUDA<16>", "C:float32 A:float32 B:float32 wA=int32 wB=int32"),
    ("reduction_kernel.cu", "reduce6<float, 256, true>", "g_idata:float32:ro g_odata:float32 n=uint32"),
    ("reduction_kernel.cu", "reduce0<int>", "g_idata:int32 g_odata:int32 n=uint32"),
    ("reduction_kernel.cu", "cg_reduce<float>", "g_idata:float32 g_odata:float32 n=uint32"),
    ("transpose.cu", "transposeNoBankConflicts", "odata:float32 idata:float32 width=int32 height=int32"),
    ("transpose.cu", "copySharedMem", "odata:float32 idata:float32 width=int32 height=int32"),
    ("histogram_atomics.cu", "histogram_smem_atomics", "in:uint8:ro n=int32 out:uint32"),
    ("warp_shuffle_reduce.cu", "deviceReduceKernel", "in:float32 out:float32 N=int32"),
    ("warp_shuffle_reduce.cu", "deviceReduceWarpAtomicKernel", "in:float32 out:float32 N=int32"),
    ("cg_grid_sync.cu", "gridSum", "in:float32:ro partial:float32 result:float32 n=uint64"),
    ("llmc_softmax_forward.cu", "softmax_forward_kernel4", "out:float32 inp:float32:ro N=int32 C=int32"),
    ("llmc_softmax_forward.cu", "softmax_forward_online_kernel8", "out:float32 inp:float32:ro N=int32 C=int32"),
    ("llmc_layernorm_forward.cu", "layernorm_forward_kernel3",
     "out:float32 mean:float32 rstd:float32 inp:float32:ro weight:float32:ro bias:float32:ro N=int32 C=int32"),
    ("llmc_gelu_forward.cu", "gelu_forward_kernel1", "out:float32 inp:float32:ro N=int32"),
    ("stencil_1d.cu", "stencil_1d", "in:int32 out:int32"),
    ("saxpy.cu", "saxpy", "n=int32 a=float32 x:float32 y:float32"),
    ("grid_stride_add.cu", "dot_atomic", "a:float64:ro b:float64:ro result:float64 n=uint64"),
    ("fp16ScalarProduct.cu", "scalarProductKernel_intrinsics",
     "a:float16x2:ro b:float16x2:ro results:float32 size=uint64"),
    ("fp16ScalarProduct.cu", "haxpy", "n=int32 a=float16 x:float16:ro y:float16"),
    ("bf16_scale.cu", "scale_bias_bf16",
     "out:bfloat16 in:bfloat16:ro bias:float32:ro scale=float32 rows=int64 cols=int32"),
    ("vectorized_copy.cu", "axpy_float4", "x:float32x4:ro y:float32x4 a=float32 n4=int32"),
    ("vectorized_copy.cu", "device_copy_vector4_kernel", "d_in:int32 d_out:int32 N=int32"),
    ("transpose_dynamic_smem.cu", "transpose_dyn", "out:float32 in:float32:ro rows=int32 cols=int32 tile=int32"),
    ("cub_block_reduce.cu", "BlockReduceKernel<128, 4, cub::BLOCK_REDUCE_RAKING>",
     "d_in:int32 d_out:int32 d_elapsed:int64"),
    ("cuda_std_clamp.cu", "saturate_to_int16", "in:float32:ro out:int16 n=uint64 scale=float32"),
    ("nbody.cu", "integrateBodies",
     "newPos:float32x4 vel:float32x4 oldPos:float32x4:ro deltaTime=float32 numBodies=int32"),
    ("prescan.cu", "prescan", "g_odata:float32 g_idata:float32 n=int32"),
    ("convolutionSeparable.cu", "convolutionRowsKernel",
     "d_Dst:float32 d_Src:float32 imageW=int32 imageH=int32 pitch=int32"),
    ("bitonic_sort.cu", "bitonic_sort_step", "dev_values:float32 j=int32 k=int32"),
]
SAMPLE = ("vectorAdd", "MatrixMulCUDA<32>", "reduce6<float, 256, true>", "haxpy")  # the normal run compiles these
NVCC_SAMPLE = ("saxpy.cu", "vectorAdd.cu", "bf16_scale.cu")  # bf16_scale: int64_t mangles as nvcc does


def _sig(spec) -> str:
    out = []
    for kind, i in spec.arg_order():
        if kind == "buffer":
            p = spec.params[i]
            lanes = f"x{p.dtype.count}" if p.dtype.count > 1 else ""
            out.append(f"{p.name}:{p.dtype.name}{lanes}{'' if p.writable else ':ro'}")
        elif kind == "var":
            out.append(f"{spec.vars[i].name}={spec.vars[i].dtype.name}")
    return " ".join(out)


def _src(fname: str) -> str:
    return (CORPUS / fname).read_text()


def test_corpus_is_big_enough():
    files = {p.name for p in CORPUS.glob("*.cu")}
    assert len(files) >= 20 and {c[0] for c in CASES} == files


@pytest.mark.parametrize("case", CASES, ids=[c[1] for c in CASES])
def test_signature_read_as_declared(case):
    fname, entry, want = case
    spec = CUDARenderer().parse_source(_src(fname), entry)
    assert _sig(spec) == want
    assert spec.get_meta("name_expr") == entry and spec.get_meta("extern_c") is False  # C++ linkage, as written


def _nvrtc_compile(fname: str, entry: str):
    from devicekit_cuda.compiler import CUDACompiler
    return CUDACompiler(ARCH).compile(CUDARenderer().parse_source(_src(fname), entry))


needs_nvrtc = pytest.mark.skipif(toolchain.nvrtc()[0] is None, reason="NVRTC not found")


@needs_nvrtc
@pytest.mark.parametrize("case", [c for c in CASES if SLOW or c[1] in SAMPLE], ids=lambda c: c[1])
def test_compiles_to_a_cubin_defining_the_lowered_name(case):
    from devicekit_cuda.cubin import inspect
    fname, entry, _ = case
    compiled = _nvrtc_compile(fname, entry)
    symbol = compiled.spec.get_meta("symbol")
    base = entry.split("<")[0]
    assert symbol.startswith("_Z") and base in symbol  # C++ linkage: the mangled name NVRTC reported
    info = inspect(compiled.lib)
    assert info.arch == ARCH and symbol in info.functions


def _nvcc() -> str | None:
    return shutil.which("nvcc") or next((p for r, _ in toolchain._toolkit_roots()
                                         if os.path.isfile(p := os.path.join(r, "bin", "nvcc"))), None)


@needs_nvrtc
@pytest.mark.skipif(_nvcc() is None, reason="nvcc (the CUDA toolkit) is not installed")
def test_nvcc_compiles_the_same_files_to_the_same_symbols(tmp_path):
    """nvcc -cubin on the unmodified file (host code and all): same arch, and every kernel we compiled from it is
    defined under the very name NVRTC lowered it to."""
    from devicekit_cuda.cubin import inspect
    files = sorted({c[0] for c in CASES}) if SLOW else list(NVCC_SAMPLE)

    def nvcc(fname: str) -> tuple[str, bytes | str]:
        out = tmp_path / (fname + ".cubin")
        p = subprocess.run([_nvcc(), "-cubin", f"-arch={ARCH}", "-o", str(out), str(CORPUS / fname)],
                           capture_output=True, text=True, timeout=600, check=False)
        return fname, out.read_bytes() if p.returncode == 0 else p.stderr
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        built = dict(pool.map(nvcc, files))
    for fname in files:
        assert isinstance(built[fname], bytes), f"nvcc failed on {fname}:\n{built[fname]}"
        theirs = inspect(built[fname])
        assert theirs.arch == ARCH
        for f, entry, _ in CASES:
            if f == fname:
                ours = _abi(_nvrtc_compile(f, entry).spec.get_meta("symbol"))
                assert ours in {_abi(t) for t in theirs.functions}, (fname, entry, theirs.functions)


# CUB puts its symbols in a namespace named after its version and arch (cub::CUB_300001_SM_900 in the toolkit's
# CCCL 3.0.1, cub::_V_300500_SM_900 in the wheel's 3.5): a kernel templated on a cub type mangles with it. The two
# compilers may use different CCCL releases, so the comparison is made with that namespace name left out.
_CUB_ABI = re.compile(r"\d+(?:CUB_\d+|_V_\d+)_SM_\d+")


def _abi(symbol: str) -> str:
    return _CUB_ABI.sub("<cub-abi>", symbol)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler for the emulation")
def test_two_corpus_kernels_run_in_host_emulation():
    from cuda_host_emu import host_compile_many
    saxpy = CUDARenderer().parse_source(_src("saxpy.cu"), "saxpy", sizes={"x": "n", "y": "n"},
                                        global_size=("(n + 255) // 256",), local_size=(256,))
    add = CUDARenderer().parse_source(_src("vectorAdd.cu"), "vectorAdd",
                                      sizes={"A": "numElements", "B": "numElements", "C": "numElements"},
                                      global_size=("(numElements + 255) // 256",), local_size=(256,))
    assert "cudaMalloc" not in saxpy.src and "cudaMalloc" not in add.src  # host code blanked, lines kept
    assert saxpy.src.count("\n") == _src("saxpy.cu").count("\n")
    ks = host_compile_many([saxpy, add])
    x, y = np.linspace(-3, 3, 1000).astype(np.float32), np.ones(1000, np.float32)
    np.testing.assert_allclose(ks["saxpy"](n=1000, a=2.5, x=x, y=y)["y"], np.float32(2.5) * x + y, rtol=1e-6)
    np.testing.assert_array_equal(ks["vectorAdd"](numElements=1000, A=x, B=y)["C"], x + y)
