// Cooperative groups: a grid-wide sum in one launch (grid.sync), with tiled partitions and cg::reduce
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

__device__ float reduce_block(cg::thread_block block, float v, float *scratch) {
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  float w = cg::reduce(warp, v, cg::plus<float>());
  if (warp.thread_rank() == 0) scratch[warp.meta_group_rank()] = w;
  block.sync();
  float s = 0.0f;
  if (warp.meta_group_rank() == 0) {
    s = warp.thread_rank() < warp.meta_group_size() ? scratch[warp.thread_rank()] : 0.0f;
    s = cg::reduce(warp, s, cg::plus<float>());
  }
  return s;
}

__global__ void gridSum(const float *in, float *partial, float *result, size_t n) {
  cg::grid_group grid = cg::this_grid();
  cg::thread_block block = cg::this_thread_block();
  __shared__ float scratch[32];

  float v = 0.0f;
  for (size_t i = grid.thread_rank(); i < n; i += grid.size()) v += in[i];
  float s = reduce_block(block, v, scratch);
  if (block.thread_rank() == 0) partial[blockIdx.x] = s;

  grid.sync();

  if (grid.thread_rank() == 0) {
    float total = 0.0f;
    for (unsigned int b = 0; b < gridDim.x; b++) total += partial[b];
    *result = total;
  }
}
