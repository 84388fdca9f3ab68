// 256-bin histogram with shared-memory atomics, per-block partial histograms merged with global atomics
// (the pattern of "GPU Pro Tip: Fast Histograms Using Shared Atomics on Maxwell")
#include <cuda_runtime.h>

#define NUM_BINS 256

__global__ void histogram_smem_atomics(const unsigned char *in, int n, unsigned int *out)
{
  // pixel coordinates
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  int nt = blockDim.x * gridDim.x;

  // initialize temporary accumulation array in shared memory
  __shared__ unsigned int smem[NUM_BINS];
  for (int i = threadIdx.x; i < NUM_BINS; i += blockDim.x) smem[i] = 0;
  __syncthreads();

  // process pixels
  // updates our block's partial histogram in shared memory
  for (int i = tid; i < n; i += nt)
    atomicAdd(&smem[in[i]], 1);
  __syncthreads();

  // write partial histogram into the global memory
  for (int i = threadIdx.x; i < NUM_BINS; i += blockDim.x)
    atomicAdd(&out[i], smem[i]);
}
