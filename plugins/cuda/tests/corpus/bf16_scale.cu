// bfloat16 storage, float math: the mixed-precision pattern of training kernels
#include <cuda_bf16.h>
#include <cstdint>

__global__ void scale_bias_bf16(__nv_bfloat16 *out, const __nv_bfloat16 *in, const float *bias,
                                float scale, int64_t rows, int32_t cols) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  float v = __bfloat162float(in[i]) * scale + bias[i % cols];
  out[i] = __float2bfloat16(v);
}
