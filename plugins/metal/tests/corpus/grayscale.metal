#include <metal_stdlib>
using namespace metal;

// Rec. 709 luma of RGBA8 pixels kept in a buffer (uchar4), written as floats in [0, 1]
kernel void grayscale(device const uchar4 *pixels [[buffer(0)]],
                      device float *luma          [[buffer(1)]],
                      constant uint &width        [[buffer(2)]],
                      constant uint &height       [[buffer(3)]],
                      uint2 gid [[thread_position_in_grid]])
{
    if (gid.x >= width || gid.y >= height) return;
    uint i = gid.y * width + gid.x;
    uchar4 p = pixels[i];
    float y = 0.2126f * p.x + 0.7152f * p.y + 0.0722f * p.z;
    luma[i] = y / 255.0f;
}
