// Element-wise a * x + y over float arrays, four elements per work-item through vload4 / vstore4;
// the tail that does not fill a float4 is handled by the last work-item.
__kernel __attribute__((vec_type_hint(float4)))
void axpy_vec4(const float a,
               __global const float *x,
               __global float *y,
               const int n)
{
    const int i = get_global_id(0);
    if (4 * i + 3 < n) {
        float4 xv = vload4(i, x);
        float4 yv = vload4(i, y);
        vstore4(a * xv + yv, i, y);
    } else if (4 * i < n) {
        for (int k = 4 * i; k < n; ++k)
            y[k] = a * x[k] + y[k];
    }
}
