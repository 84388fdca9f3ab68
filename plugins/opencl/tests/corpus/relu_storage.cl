/* In-place ReLU on activations stored as half where the device has cl_khr_fp16, else as float:
 * the storage type follows the extension the compiler reports. */
#ifdef cl_khr_fp16
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half DATA_T;
#else
typedef float DATA_T;
#endif

__kernel void relu_inplace(__global DATA_T *data, const int n)
{
    const int i = get_global_id(0);
    if (i < n)
        data[i] = data[i] > (DATA_T)0 ? data[i] : (DATA_T)0;
}
