/* Direct-form FIR filter: output[i] = sum_k coeff[k] * input[i + k].
 * The input holds numTaps - 1 extra samples at the end, so every work-item reads in range. */
#define MAX_TAPS 64

__kernel void fir(__global const float *input,
                  __global float *output,
                  __constant float *coeff,
                  const uint numTaps,
                  const ulong length)
{
    const size_t i = get_global_id(0);
    if (i >= length)
        return;

    float acc = 0.0f;
    for (uint k = 0; k < numTaps && k < MAX_TAPS; ++k)
        acc += coeff[k] * input[i + k];
    output[i] = acc;
}
