#include <metal_stdlib>
using namespace metal;

// Clip to [lo, hi] and zero NaNs, with select
kernel void clip(device float *x     [[buffer(0)]],
                 constant float &lo  [[buffer(1)]],
                 constant float &hi  [[buffer(2)]],
                 uint i [[thread_position_in_grid]])
{
    float v = clamp(x[i], lo, hi);
    x[i] = select(v, 0.0f, isnan(x[i]));
}
