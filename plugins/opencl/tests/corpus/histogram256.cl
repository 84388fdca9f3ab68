/*
 * 256-bin histogram of a byte image, in the style of the AMD APP SDK's Histogram sample:
 * per-work-group sub-histograms in local memory (atomic_inc), written out per group;
 * a second kernel adds the sub-histograms up.
 */
#pragma OPENCL EXTENSION cl_khr_local_int32_base_atomics : enable
#pragma OPENCL EXTENSION cl_khr_global_int32_base_atomics : enable

#define BIN_SIZE 256

__kernel
void histogram256(__global const uchar* data,
                  __local uint* sharedArray,
                  __global uint* binResult,
                  const uint n)
{
    size_t localId = get_local_id(0);
    size_t globalId = get_global_id(0);
    size_t groupId = get_group_id(0);
    size_t groupSize = get_local_size(0);

    /* initialize shared array to zero */
    for(int i = localId; i < BIN_SIZE; i += groupSize)
        sharedArray[i] = 0;

    barrier(CLK_LOCAL_MEM_FENCE);

    /* calculate thread-histograms */
    for(size_t i = globalId; i < n; i += get_global_size(0))
        atomic_inc(&sharedArray[data[i]]);

    barrier(CLK_LOCAL_MEM_FENCE);

    /* write the group's histogram out */
    for(int i = localId; i < BIN_SIZE; i += groupSize)
        binResult[groupId * BIN_SIZE + i] = sharedArray[i];
}

__kernel
void reduceBins(__global const uint* binResult,
                __global uint* histogram,
                const uint subHistgCnt)
{
    uint bin = get_global_id(0);
    uint sum = 0;
    for(uint i = 0; i < subHistgCnt; ++i)
        sum += binResult[i * BIN_SIZE + bin];
    atomic_add(&histogram[bin], sum);
}
