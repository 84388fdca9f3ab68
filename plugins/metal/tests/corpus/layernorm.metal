#include <metal_stdlib>
using namespace metal;

// LayerNorm forward (llm.c's layernorm_forward), one threadgroup per row, tree reductions in threadgroup memory
kernel void layernorm_forward(device float *out          [[buffer(0)]],
                              device float *mean         [[buffer(1)]],
                              device float *rstd         [[buffer(2)]],
                              device const float *inp    [[buffer(3)]],
                              device const float *weight [[buffer(4)]],
                              device const float *bias   [[buffer(5)]],
                              constant int &C            [[buffer(6)]],
                              threadgroup float *scratch [[threadgroup(0)]],
                              uint row [[threadgroup_position_in_grid]],
                              uint tid [[thread_index_in_threadgroup]],
                              uint tgsize [[threads_per_threadgroup]])
{
    device const float *x = inp + row * C;
    float s = 0.0f;
    for (int i = tid; i < C; i += tgsize) s += x[i];
    scratch[tid] = s;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint stride = tgsize / 2; stride > 0; stride /= 2) {
        if (tid < stride) scratch[tid] += scratch[tid + stride];
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    float m = scratch[0] / C;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float v = 0.0f;
    for (int i = tid; i < C; i += tgsize) { float d = x[i] - m; v += d * d; }
    scratch[tid] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint stride = tgsize / 2; stride > 0; stride /= 2) {
        if (tid < stride) scratch[tid] += scratch[tid + stride];
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    float r = rsqrt(scratch[0] / C + 1e-5f);
    for (int i = tid; i < C; i += tgsize) {
        out[row * C + i] = (x[i] - m) * r * weight[i] + bias[i];
    }
    if (tid == 0) { mean[row] = m; rstd[row] = r; }
}
