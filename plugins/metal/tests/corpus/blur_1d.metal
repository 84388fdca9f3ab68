#include <metal_stdlib>
using namespace metal;

// Box blur of radius R with the block and its halo staged in threadgroup memory the host sizes
kernel void blur_1d(device const float *in     [[buffer(0)]],
                    device float *out          [[buffer(1)]],
                    constant int &n            [[buffer(2)]],
                    constant int &R            [[buffer(3)]],
                    threadgroup float *stage   [[threadgroup(0)]],
                    uint gid [[thread_position_in_grid]],
                    uint lid [[thread_position_in_threadgroup]],
                    uint tgsize [[threads_per_threadgroup]])
{
    int g = (int)gid;
    int base = g - (int)lid - R;
    for (int i = lid; i < (int)tgsize + 2 * R; i += tgsize) {
        int j = clamp(base + i, 0, n - 1);
        stage[i] = in[j];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (g >= n) return;
    float s = 0.0f;
    for (int k = 0; k <= 2 * R; k++) s += stage[lid + k];
    out[g] = s / float(2 * R + 1);
}
