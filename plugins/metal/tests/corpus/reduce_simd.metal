#include <metal_stdlib>
using namespace metal;

// Two-level sum: simd_sum inside each simdgroup, partial sums in threadgroup memory, one atomic add per threadgroup
kernel void reduce_sum(device const float *input      [[buffer(0)]],
                       device atomic_float *total     [[buffer(1)]],
                       constant uint &n               [[buffer(2)]],
                       threadgroup float *partials    [[threadgroup(0)]],
                       uint gid   [[thread_position_in_grid]],
                       uint sgid  [[simdgroup_index_in_threadgroup]],
                       uint lane  [[thread_index_in_simdgroup]],
                       uint nsg   [[simdgroups_per_threadgroup]])
{
    float v = gid < n ? input[gid] : 0.0f;
    v = simd_sum(v);
    if (lane == 0) {
        partials[sgid] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (sgid == 0) {
        float p = lane < nsg ? partials[lane] : 0.0f;
        p = simd_sum(p);
        if (lane == 0) {
            atomic_fetch_add_explicit(total, p, memory_order_relaxed);
        }
    }
}
