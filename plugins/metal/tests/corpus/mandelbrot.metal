#include <metal_stdlib>
using namespace metal;

kernel void mandelbrot(device uint *iters       [[buffer(0)]],
                       constant float &x0       [[buffer(1)]],
                       constant float &y0       [[buffer(2)]],
                       constant float &step     [[buffer(3)]],
                       constant uint &width     [[buffer(4)]],
                       constant uint &max_iter  [[buffer(5)]],
                       uint2 gid [[thread_position_in_grid]])
{
    float cr = x0 + gid.x * step, ci = y0 + gid.y * step;
    float zr = 0.0f, zi = 0.0f;
    uint it = 0;
    while (zr * zr + zi * zi <= 4.0f && it < max_iter) {
        float t = zr * zr - zi * zi + cr;
        zi = 2.0f * zr * zi + ci;
        zr = t;
        it++;
    }
    iters[gid.y * width + gid.x] = it;
}
