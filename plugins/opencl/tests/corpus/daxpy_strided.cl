/* BLAS-1 DAXPY with offsets and increments, as BLAS libraries for OpenCL write it:
 *   Y[offy + i*incy] += alpha * X[offx + i*incx],  i < N  (negative increments walk backwards). */
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#elif defined(cl_amd_fp64)
#pragma OPENCL EXTENSION cl_amd_fp64 : enable
#endif

__kernel void
Daxpy_kernel(
    uint N,
    double alpha,
    __global const double * restrict _X,
    ulong offx,
    int incx,
    __global double * _Y,
    ulong offy,
    int incy)
{
    __global const double *X = _X + offx;
    __global double *Y = _Y + offy;
    uint i = get_global_id(0);
    if (i >= N)
        return;
    long ix = (incx >= 0) ? (long)i * incx : (long)(N - 1 - i) * -incx;
    long iy = (incy >= 0) ? (long)i * incy : (long)(N - 1 - i) * -incy;
    Y[iy] += alpha * X[ix];
}
