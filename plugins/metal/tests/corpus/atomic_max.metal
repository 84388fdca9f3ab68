#include <metal_stdlib>
using namespace metal;

// Global maximum of ints with atomic_fetch_max_explicit
kernel void global_max(device const int *values [[buffer(0)]],
                       device atomic_int *result [[buffer(1)]],
                       constant uint &n          [[buffer(2)]],
                       uint i [[thread_position_in_grid]])
{
    if (i < n) atomic_fetch_max_explicit(result, values[i], memory_order_relaxed);
}
