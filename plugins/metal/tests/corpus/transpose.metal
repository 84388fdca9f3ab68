#include <metal_stdlib>
using namespace metal;

constant constexpr uint TILE = 16;

// Transpose through a padded threadgroup tile
kernel void transpose(device const float *src [[buffer(0)]],
                      device float *dst       [[buffer(1)]],
                      constant uint &rows     [[buffer(2)]],
                      constant uint &cols     [[buffer(3)]],
                      uint2 tg  [[threadgroup_position_in_grid]],
                      uint2 tid [[thread_position_in_threadgroup]])
{
    threadgroup float tile[TILE][TILE + 1];
    uint x = tg.x * TILE + tid.x, y = tg.y * TILE + tid.y;
    if (x < cols && y < rows) tile[tid.y][tid.x] = src[y * cols + x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    x = tg.y * TILE + tid.x;
    y = tg.x * TILE + tid.y;
    if (x < rows && y < cols) dst[y * rows + x] = tile[tid.x][tid.y];
}
