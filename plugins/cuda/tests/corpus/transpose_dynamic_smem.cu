// Tiled transpose with the tile in dynamic shared memory (extern __shared__): the launch sizes it
#include <cuda_runtime.h>

__global__ void transpose_dyn(float *out, const float *in, int rows, int cols, int tile) {
  extern __shared__ float buf[];
  int x = blockIdx.x * tile + threadIdx.x;
  int y = blockIdx.y * tile + threadIdx.y;
  if (x < cols && y < rows) buf[threadIdx.y * (tile + 1) + threadIdx.x] = in[y * cols + x];
  __syncthreads();
  x = blockIdx.y * tile + threadIdx.x;
  y = blockIdx.x * tile + threadIdx.y;
  if (x < rows && y < cols) out[y * rows + x] = buf[threadIdx.x * (tile + 1) + threadIdx.y];
}
