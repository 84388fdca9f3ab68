"""Host code and host headers around a hand-written CUDA kernel, as published suites write them (issue 33, class 4):
NVRTC compiles device code only, so (1) every host-header stand-in reaches it whoever includes the header (the
wheel's cuda.h includes <stdint.h>; a header of the file's own includes <stdio.h>), (2) host libraries' headers
(cuBLAS, POSIX) get stand-ins, and (3) the host code of the file's own headers is blanked as the .cu file's is (a
utilities .c file included at the end, a common.h with cuBLAS helpers). These sources reproduce the structure of
PolyBench/ACC's CUDA files and llm.c's dev/cuda/common.h; NVRTC runs here without a GPU."""

from __future__ import annotations

import devicekit as dk
import pytest
from devicekit.errors import CompileError

# PolyBench/ACC's shape: <cuda.h>, a .cuh beside the file for DATA_TYPE, <util.h> and, last, <util.c> from a
# utilities dir given as include_dirs=, the .c holding host code over POSIX headers
UTIL_H = """#ifndef UTIL_H
#define UTIL_H
#include <stdlib.h>
#define POLY_2D(x, n1, n2) x[n1][n2]
extern double timer_start_value;
void timer_start();
#endif
"""
UTIL_C = """#include <stdio.h>
#include <unistd.h>
#include <sys/time.h>
#include <sys/resource.h>
#include <sched.h>

double timer_start_value = 0;
static struct rusage usage_at_start;

static double rtclock() {
    struct timeval tp;
    gettimeofday(&tp, NULL);
    return tp.tv_sec + tp.tv_usec * 1.0e-6;
}

void timer_start() {
    getrusage(RUSAGE_SELF, &usage_at_start);
    timer_start_value = rtclock();
}

void *alloc_data(unsigned long long n, int elt_size) {
    void *p = NULL;
    if (posix_memalign(&p, 32, n * elt_size)) { fprintf(stderr, "no memory\\n"); exit(1); }
    return p;
}
"""
SCALE_CUH = "typedef float DATA_TYPE;\n#define DIM_X 32\n"
SCALE_CU = """#include <stdio.h>
#include <stdlib.h>
#include <cuda.h>

#include "scale.cuh"
#include <util.h>

__global__ void scale_kernel(int n, DATA_TYPE alpha, DATA_TYPE *a, DATA_TYPE *b)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = alpha * a[i];
}

void scaleCuda(int n, DATA_TYPE alpha, DATA_TYPE *a, DATA_TYPE *b)
{
    DATA_TYPE *a_gpu;
    cudaMalloc((void **)&a_gpu, sizeof(DATA_TYPE) * n);
    timer_start();
}

int main(int argc, char *argv[])
{
    DATA_TYPE *a = (DATA_TYPE *)alloc_data(64, sizeof(DATA_TYPE));
    return 0;
}

#include <util.c>
"""

# llm.c's dev/cuda/common.h shape: host library headers, host helpers and globals over cuBLAS types beside device
# helpers, floatX chosen by a define of the .cu file (bf16 from cublas_api.h's includes)
COMMON_H = """#include <stdlib.h>
#include <stdio.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <float.h>

extern cudaDeviceProp deviceProp;

template<class T>
__host__ __device__ T ceil_div(T dividend, T divisor) { return (dividend + divisor - 1) / divisor; }

__device__ float warpReduceSum(float val);

void cublas_check(cublasStatus_t status, const char *file, int line)
{
    if (status != CUBLAS_STATUS_SUCCESS) { printf("[cuBLAS ERROR] %d\\n", status); exit(EXIT_FAILURE); }
}
void setup_lt(cublasLtHandle_t h,
              cublasComputeType_t t);

static size_t workspace_size = 32 * 1024 * 1024;
static cublasComputeType_t compute_type;
cublasHandle_t cublas_handle;
int num_SMs = 0;

const int kConstLanes = 4;
constexpr int kUnroll = 2;
__constant__ float coef[4];
__device__ int counter;

#if defined(ENABLE_BF16)
typedef __nv_bfloat16 floatX;
#else
typedef float floatX;
#endif

template<class D, class T>
void validate_result(D *device_result, const T *cpu_reference, std::size_t num_elements) {
    D *out = (D *)malloc(num_elements * sizeof(D));
    cudaMemcpy(out, device_result, num_elements * sizeof(D), cudaMemcpyDeviceToHost);
    free(out);
}

__device__ float warpReduceSum(float val) {
    for (int offset = 16; offset > 0; offset /= 2) val += __shfl_xor_sync(0xFFFFFFFF, val, offset);
    return val;
}
"""
SUM_CU = """#include <stdio.h>
#include <cuda_runtime.h>
#define ENABLE_BF16
#include "common.h"

__global__ void sum_kernel(floatX *out, const floatX *inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < N ? (float)inp[i] * coef[i % kConstLanes] * kUnroll : 0.0f;
    v = warpReduceSum(v);
    if (threadIdx.x % 32 == 0) { out[i / 32] = (floatX)v; atomicAdd(&counter, 1); }
}

void sum_forward(floatX *out, const floatX *inp, int N) {
    sum_kernel<<<ceil_div(N, 256), 256>>>(out, inp, N);
    cublas_check(cublasCreate(&cublas_handle), __FILE__, __LINE__);
}

int main() { validate_result((floatX *)0, (float *)0, 0); return 0; }
"""

# COMMON_H's device part, written without host code or host headers
DEVICE_ONLY_H = """#include <cuda_bf16.h>
template<class T>
__host__ __device__ T ceil_div(T dividend, T divisor) { return (dividend + divisor - 1) / divisor; }
__device__ float warpReduceSum(float val);
const int kConstLanes = 4;
constexpr int kUnroll = 2;
__constant__ float coef[4];
__device__ int counter;
#if defined(ENABLE_BF16)
typedef __nv_bfloat16 floatX;
#else
typedef float floatX;
#endif
__device__ float warpReduceSum(float val) {
    for (int offset = 16; offset > 0; offset /= 2) val += __shfl_xor_sync(0xFFFFFFFF, val, offset);
    return val;
}
"""


@pytest.fixture
def cuda():
    try:
        return dk.target("CUDA")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no CUDA target (NVRTC) here: {e}")


@pytest.fixture
def acc_tree(tmp_path, monkeypatch):
    """kernels/scale/{scale.cu, scale.cuh} and utilities/{util.h, util.c}; the cwd is the kernel's dir."""
    kdir, udir = tmp_path / "kernels" / "scale", tmp_path / "utilities"
    kdir.mkdir(parents=True)
    udir.mkdir()
    (kdir / "scale.cuh").write_text(SCALE_CUH)
    (udir / "util.h").write_text(UTIL_H)
    (udir / "util.c").write_text(UTIL_C)
    monkeypatch.chdir(kdir)
    return kdir


def test_nested_host_headers_and_an_included_c_file_compile(cuda, acc_tree):
    """<cuda.h> includes <stdint.h> (the stand-ins were given for the .cu file's own #include names only); util.c
    at the end brings host code over <sys/resource.h> (the blanking reached the .cu file's own text only)."""
    got = cuda.program_from_source(SCALE_CU, "scale_kernel", include_dirs=["../../utilities"])
    assert got.lib
    assert [p.name for p in got.spec.params] == ["a", "b"] and [v.name for v in got.spec.vars] == ["n", "alpha"]
    assert got.spec.params[0].dtype.name == "float32"


def test_host_library_headers_and_host_code_in_a_common_header(cuda, tmp_path, monkeypatch):
    """cuBLAS headers get stand-ins (with cuda_bf16.h, which cublas_api.h brings); the header's host functions,
    prototypes, templates and host globals over cuBLAS types are blanked; its __device__/__constant__/const/
    constexpr names and device helpers stay, and the kernel uses them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "common.h").write_text(COMMON_H)
    got = cuda.program_from_source(SUM_CU, "sum_kernel")
    assert got.lib
    assert [p.dtype.name for p in got.spec.params] == ["bfloat16", "bfloat16"]
    headers = dict(got.spec.get_meta("cuda_headers"))
    kept = headers["common.h"]
    assert kept.count("\n") == COMMON_H.count("\n")  # lines kept: NVRTC's line numbers are the file's
    for gone in ("cublas_check", "setup_lt", "compute_type", "cublas_handle", "validate_result", "num_SMs",
                 "workspace_size", "cudaDeviceProp"):
        assert gone not in kept, gone
    for stays in ("ceil_div", "__device__ float warpReduceSum(float val);", "kConstLanes", "kUnroll", "coef",
                  "counter", "floatX"):
        assert stays in kept, stays


def test_the_device_code_is_the_same_as_without_the_host_code(cuda, tmp_path, monkeypatch):
    """The blanking changes nothing NVRTC compiles for the device: the cubin equals that of the kernel written
    without host code or host headers."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "common.h").write_text(COMMON_H)
    full = cuda.program_from_source(SUM_CU, "sum_kernel")
    device_only = tmp_path / "device"
    device_only.mkdir()
    (device_only / "common.h").write_text(DEVICE_ONLY_H)
    monkeypatch.chdir(device_only)
    src = SUM_CU[:SUM_CU.index("void sum_forward")].replace("#include <stdio.h>\n#include <cuda_runtime.h>\n", "")
    alone = cuda.program_from_source(src, "sum_kernel")
    assert alone.lib == full.lib


def test_an_unknown_header_is_still_nvrtcs_error_naming_it(cuda, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = '#include <nowhere_to_be_found.h>\n__global__ void k(float *x) { x[0] = 1; }\n'
    with pytest.raises(CompileError, match="nowhere_to_be_found.h"):
        cuda.program_from_source(src, "k")


def test_a_header_of_the_files_own_is_not_shadowed_by_a_stand_in(cuda, tmp_path, monkeypatch):
    """A header of the file's own named like a host header (here "sched.h", which has a stand-in) is the file's."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sched.h").write_text("#define SCHED_SCALE 3.0f\n")
    src = '#include "sched.h"\n__global__ void k(float *x) { x[0] = SCHED_SCALE; }\n'
    assert cuda.program_from_source(src, "k").lib
