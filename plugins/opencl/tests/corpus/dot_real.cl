/* Partial dot products in the widest floating-point type the device offers (the feature-test idiom for
 * double support): each work-group reduces its products in __local scratch and writes one partial sum. */
#if defined(cl_khr_fp64)  // Khronos extension available?
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define DOUBLE_SUPPORT_AVAILABLE
#elif defined(cl_amd_fp64)  // AMD extension available?
#pragma OPENCL EXTENSION cl_amd_fp64 : enable
#define DOUBLE_SUPPORT_AVAILABLE
#endif

#if defined(DOUBLE_SUPPORT_AVAILABLE)
// double
typedef double real_t;
#define ZERO 0.0
#else
// float
typedef float real_t;
#define ZERO 0.0f
#endif

__kernel void dot_partial(__global const real_t *x,
                          __global const real_t *y,
                          __global real_t *partial,
                          __local real_t *scratch,
                          const int n)
{
    const int gid = get_global_id(0);
    const int lid = get_local_id(0);

    real_t sum = ZERO;
    for (int i = gid; i < n; i += get_global_size(0))
        sum += x[i] * y[i];
    scratch[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int offset = get_local_size(0) / 2; offset > 0; offset >>= 1) {
        if (lid < offset)
            scratch[lid] += scratch[lid + offset];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        partial[get_group_id(0)] = scratch[0];
}
