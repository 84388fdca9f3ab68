#include <metal_stdlib>
using namespace metal;

// float4 buffers: one thread adds four lanes
kernel void vec4_add(device const float4 *a [[buffer(0)]],
                     device const float4 *b [[buffer(1)]],
                     device float4 *c       [[buffer(2)]],
                     uint i [[thread_position_in_grid]])
{
    c[i] = a[i] + b[i];
}
