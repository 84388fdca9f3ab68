#include <metal_stdlib>
using namespace metal;

#define GELU_SCALING_FACTOR 0.7978845608f  // sqrt(2 / pi)

kernel void gelu_forward(device float *out       [[buffer(0)]],
                         device const float *inp [[buffer(1)]],
                         constant uint &N        [[buffer(2)]],
                         uint i [[thread_position_in_grid]])
{
    if (i >= N) return;
    float x = inp[i];
    float cube = 0.044715f * x * x * x;
    out[i] = 0.5f * x * (1.0f + precise::tanh(GELU_SCALING_FACTOR * (x + cube)));
}
