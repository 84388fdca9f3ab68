// RGBA8 -> 8-bit luma (ITU-R BT.601 weights), one work-item per pixel of a 2-D NDRange.
__kernel void rgba_to_gray(__global const uchar4 *src,
                           __global uchar *dst,
                           const int width,
                           const int height)
{
    const int x = get_global_id(0);
    const int y = get_global_id(1);
    if (x >= width || y >= height)
        return;

    const int idx = y * width + x;
    const float4 px = convert_float4(src[idx]);
    const float luma = dot(px.xyz, (float3)(0.299f, 0.587f, 0.114f));
    dst[idx] = convert_uchar_sat_rte(luma);
}
