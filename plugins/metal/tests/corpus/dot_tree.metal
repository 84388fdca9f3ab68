#include <metal_stdlib>
using namespace metal;

// Dot product: a tree reduction in a fixed threadgroup array, one partial per threadgroup
kernel void dot_partial(device const float *a   [[buffer(0)]],
                        device const float *b   [[buffer(1)]],
                        device float *partial   [[buffer(2)]],
                        constant uint &n        [[buffer(3)]],
                        uint gid  [[thread_position_in_grid]],
                        uint lid  [[thread_index_in_threadgroup]],
                        uint tgid [[threadgroup_position_in_grid]])
{
    threadgroup float acc[64];
    acc[lid] = gid < n ? a[gid] * b[gid] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint s = 32; s > 0; s >>= 1) {
        if (lid < s) acc[lid] += acc[lid + s];
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (lid == 0) partial[tgid] = acc[0];
}
