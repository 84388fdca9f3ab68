/* int32 accumulators -> int8 activations, as int8 inference engines write the output stage of a
 * quantized convolution: scale, add the output zero point, optional ReLU, saturate. */
__kernel void requantize_s32_s8(__global const int *acc,
                                const float scale,
                                const char output_zero_point,
                                __global char *out,
                                const uchar apply_relu,
                                const ulong count)
{
    const size_t i = get_global_id(0);
    if (i >= count)
        return;
    int v = convert_int_sat_rte((float)acc[i] * scale) + output_zero_point;
    if (apply_relu)
        v = max(v, (int)output_zero_point);
    out[i] = convert_char_sat(v);
}
