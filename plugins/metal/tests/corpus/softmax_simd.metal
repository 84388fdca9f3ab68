#include <metal_stdlib>
using namespace metal;

// One simdgroup (32 threads) per row: simd_max for stability, simd_sum for the normalizer
kernel void softmax_forward(device float *out       [[buffer(0)]],
                            device const float *inp [[buffer(1)]],
                            constant int &N         [[buffer(2)]],
                            constant int &C         [[buffer(3)]],
                            uint row  [[threadgroup_position_in_grid]],
                            uint lane [[thread_index_in_simdgroup]])
{
    if ((int)row >= N) return;
    device const float *x = inp + row * C;
    float maxval = -INFINITY;
    for (int i = lane; i < C; i += 32) {
        maxval = max(maxval, x[i]);
    }
    maxval = simd_max(maxval);
    float sum = 0.0f;
    for (int i = lane; i < C; i += 32) {
        sum += exp(x[i] - maxval);
    }
    sum = simd_sum(sum);
    for (int i = lane; i < C; i += 32) {
        out[row * C + i] = exp(x[i] - maxval) / sum;
    }
}
