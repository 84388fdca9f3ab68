#include <metal_stdlib>
using namespace metal;

// Scalars before buffers and at higher indices than some buffers; two threadgroup arguments sized by the host
kernel void scale_shift(constant float &scale        [[buffer(3)]],
                        device const float *in       [[buffer(0)]],
                        constant float &shift        [[buffer(2)]],
                        device float *out            [[buffer(1)]],
                        threadgroup float *tmp_a     [[threadgroup(0)]],
                        threadgroup float *tmp_b     [[threadgroup(1)]],
                        uint gid [[thread_position_in_grid]],
                        uint lid [[thread_position_in_threadgroup]])
{
    tmp_a[lid] = in[gid] * scale;
    tmp_b[lid] = shift;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[gid] = tmp_a[lid] + tmp_b[lid];
}
