#include <metal_stdlib>
using namespace metal;

// half storage, float arithmetic
kernel void half_axpy(device const half *x [[buffer(0)]],
                      device half *y       [[buffer(1)]],
                      constant half &a     [[buffer(2)]],
                      uint i [[thread_position_in_grid]])
{
    y[i] = half(float(a) * float(x[i]) + float(y[i]));
}
