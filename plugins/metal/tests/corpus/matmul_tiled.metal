#include <metal_stdlib>
using namespace metal;

#define TILE 8

// Tiled C = A * B with threadgroup tiles and barriers
kernel void matmul_tiled(device const float *A [[buffer(0)]],
                         device const float *B [[buffer(1)]],
                         device float *C       [[buffer(2)]],
                         constant uint &M      [[buffer(3)]],
                         constant uint &N      [[buffer(4)]],
                         constant uint &K      [[buffer(5)]],
                         uint2 tgid [[threadgroup_position_in_grid]],
                         uint2 tid  [[thread_position_in_threadgroup]])
{
    threadgroup float As[TILE][TILE];
    threadgroup float Bs[TILE][TILE];
    uint row = tgid.y * TILE + tid.y;
    uint col = tgid.x * TILE + tid.x;
    float acc = 0.0f;
    for (uint t = 0; t < (K + TILE - 1) / TILE; t++) {
        uint ka = t * TILE + tid.x, kb = t * TILE + tid.y;
        As[tid.y][tid.x] = (row < M && ka < K) ? A[row * K + ka] : 0.0f;
        Bs[tid.y][tid.x] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint k = 0; k < TILE; k++) {
            acc += As[tid.y][k] * Bs[k][tid.x];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (row < M && col < N) {
        C[row * N + col] = acc;
    }
}
