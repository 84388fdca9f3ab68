/* Levels adjustment of a 16-bit grayscale image: black and white points, then an offset, saturated. */
__kernel void levels16(__global const ushort *src,
                       __global ushort *dst,
                       const ushort black,
                       const ushort white,
                       const short offset,
                       const long count)
{
    const long i = get_global_id(0);
    if (i >= count)
        return;
    const float range = (float)(white - black);
    float v = ((float)src[i] - (float)black) / range;
    v = clamp(v, 0.0f, 1.0f) * 65535.0f + (float)offset;
    dst[i] = convert_ushort_sat_rte(v);
}
