#include <metal_stdlib>
using namespace metal;

kernel void sigmoid(device const float *x [[buffer(0)]],
                    device float *y       [[buffer(1)]],
                    uint i [[thread_position_in_grid]])
{
    y[i] = 1.0f / (1.0f + fast::exp(-x[i]));
}
