#include <metal_stdlib>
using namespace metal;

// 256-bin histogram: per-threadgroup bins with threadgroup atomics, merged into device atomics
kernel void histogram256(device const uchar *data        [[buffer(0)]],
                         device atomic_uint *bins        [[buffer(1)]],
                         constant uint &length           [[buffer(2)]],
                         uint tid     [[thread_position_in_grid]],
                         uint lid     [[thread_position_in_threadgroup]],
                         uint tgsize  [[threads_per_threadgroup]],
                         uint gsize   [[threads_per_grid]])
{
    threadgroup atomic_uint local_bins[256];
    for (uint i = lid; i < 256; i += tgsize) {
        atomic_store_explicit(&local_bins[i], 0u, memory_order_relaxed);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < length; i += gsize) {
        atomic_fetch_add_explicit(&local_bins[data[i]], 1u, memory_order_relaxed);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = lid; i < 256; i += tgsize) {
        uint c = atomic_load_explicit(&local_bins[i], memory_order_relaxed);
        if (c) {
            atomic_fetch_add_explicit(&bins[i], c, memory_order_relaxed);
        }
    }
}
