#include <metal_stdlib>
using namespace metal;

// Exclusive scan of each 32-element chunk with simd_prefix_exclusive_sum; chunk totals written separately
kernel void chunk_scan(device const int *in      [[buffer(0)]],
                       device int *out           [[buffer(1)]],
                       device int *chunk_totals  [[buffer(2)]],
                       uint gid  [[thread_position_in_grid]],
                       uint lane [[thread_index_in_simdgroup]])
{
    int v = in[gid];
    int s = simd_prefix_exclusive_sum(v);
    out[gid] = s;
    if (lane == 31) chunk_totals[gid / 32] = s + v;
}
