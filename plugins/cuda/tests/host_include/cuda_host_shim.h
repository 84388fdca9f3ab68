// Host shim: lets CUDA C rendered by devicekit_cuda compile as C++ on the host (g++), for the emulation tests.
// blockIdx/threadIdx/blockDim/gridDim are globals the launcher sets in loops (threadIdx is thread-local so
// kernels with __syncthreads() can run one std::thread per CUDA thread); __global__/__device__ are defined away.
#pragma once
#include <cmath>
#include <cstring>
#include <cstdint>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
struct dk_uint3 { unsigned int x, y, z; };
extern dk_uint3 blockIdx, blockDim, gridDim;
extern thread_local dk_uint3 threadIdx;
void dk_syncthreads();
#define __syncthreads() dk_syncthreads()
#define __shared__ static  // blocks run one after another, so one static copy serves every block
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
using std::exp2; using std::log2; using std::sin; using std::sqrt; using std::trunc;
// half: the compiler's IEEE binary16 type (same bits as numpy float16)
typedef _Float16 half;
// bfloat16: storage + round-to-nearest-even from float, as cuda_bf16.h and the reference do
struct __nv_bfloat16 {
  unsigned short x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) {
    unsigned int u; std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) x = (unsigned short)((u >> 16) | 0x40);
    else x = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  operator float() const { unsigned int u = (unsigned int)x << 16; float f; std::memcpy(&f, &u, 4); return f; }
};
// a few conversion intrinsics hand-written kernels use
static inline half __float2half(float f) { return (half)f; }
static inline float __half2float(half h) { return (float)h; }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline float __bfloat162float(__nv_bfloat16 b) { return (float)b; }
