#include <metal_stdlib>
using namespace metal;

// y = a * x + y, the scalars passed with setBytes and read as constant references
kernel void saxpy(device const float *x     [[ buffer(0) ]],
                  device float       *y     [[ buffer(1) ]],
                  constant float     &a     [[ buffer(2) ]],
                  constant uint      &count [[ buffer(3) ]],
                  uint gid [[ thread_position_in_grid ]])
{
    if (gid >= count) return;
    y[gid] = fma(a, x[gid], y[gid]);
}
