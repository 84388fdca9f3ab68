#include <metal_stdlib>
using namespace metal;

// One compare-exchange step of a bitonic sort (j, k as in the classic loop)
kernel void bitonic_step(device float *values [[buffer(0)]],
                         constant uint &j     [[buffer(1)]],
                         constant uint &k     [[buffer(2)]],
                         uint i [[thread_position_in_grid]])
{
    uint ixj = i ^ j;
    if (ixj <= i) return;
    float a = values[i], b = values[ixj];
    bool ascending = (i & k) == 0;
    if ((a > b) == ascending) {
        values[i] = b;
        values[ixj] = a;
    }
}
