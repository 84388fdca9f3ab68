#include <metal_stdlib>
using namespace metal;

// ReLU backward with a bool mask saved by the forward pass
kernel void relu_backward(device const float *dout [[buffer(0)]],
                          device const bool *mask  [[buffer(1)]],
                          device float *din        [[buffer(2)]],
                          uint i [[thread_position_in_grid]])
{
    din[i] = mask[i] ? dout[i] : 0.0f;
}
