// libcu++ in device code: cuda::std::numeric_limits, cuda::std::fmin/fmax and the fixed-width ints
#include <cuda/std/limits>
#include <cuda/std/cmath>
#include <cuda/std/cstdint>

__global__ void saturate_to_int16(const float *in, cuda::std::int16_t *out, cuda::std::size_t n, float scale) {
  using lim = cuda::std::numeric_limits<cuda::std::int16_t>;
  cuda::std::size_t i = blockIdx.x * (cuda::std::size_t)blockDim.x + threadIdx.x;
  if (i < n) {
    float v = cuda::std::fmin(cuda::std::fmax(in[i] * scale, (float)lim::min()), (float)lim::max());
    out[i] = static_cast<cuda::std::int16_t>(__float2int_rn(v));
  }
}
