/* 1-D stencil: out[i] = sum of in[i - RADIUS .. i + RADIUS] (zero outside), the window staged in a __local
 * buffer of get_local_size(0) + 2 * RADIUS floats that the host sizes at launch. */
#define RADIUS 3

__kernel void stencil_1d(__global const float *in,
                         __global float *out,
                         __local float *temp,
                         const int n)
{
    const int gindex = get_global_id(0);
    const int lindex = get_local_id(0) + RADIUS;
    const int lsize = get_local_size(0);

    // Read input elements into local memory
    temp[lindex] = (gindex < n) ? in[gindex] : 0.0f;
    if (get_local_id(0) < RADIUS) {
        temp[lindex - RADIUS] = (gindex - RADIUS >= 0 && gindex - RADIUS < n) ? in[gindex - RADIUS] : 0.0f;
        temp[lindex + lsize] = (gindex + lsize < n) ? in[gindex + lsize] : 0.0f;
    }

    // Synchronize (ensure all the data is available)
    barrier(CLK_LOCAL_MEM_FENCE);

    // Apply the stencil
    if (gindex < n) {
        float result = 0.0f;
        for (int offset = -RADIUS; offset <= RADIUS; offset++)
            result += temp[lindex + offset];

        // Store the result
        out[gindex] = result;
    }
}
