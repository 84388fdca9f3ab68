// ReLU forward and backward in the style of Caffe's OpenCL branch: each kernel file starts with the guard below
// (for editors and offline tools, which do not define __OPENCL_VERSION__), and the build puts header.cl's
// definitions in front of it, which this file carries itself. Kernel names are made by TEMPLATE(name, Dtype).
#define CONCAT(A,B) A##_##B
#define TEMPLATE(name,type) CONCAT(name,type)
#define Dtype float
#define int_tp int

#ifndef __OPENCL_VERSION__
#include "header.cl"
#endif

__kernel void TEMPLATE(relu_forward,Dtype)(const int_tp n,
                                          __global const Dtype* in,
                                          __global Dtype* out,
                                          Dtype negative_slope) {
  for (int_tp index = get_global_id(0); index < n;
      index += get_global_size(0)) {
    out[index] = in[index] > 0 ? in[index] : in[index] * negative_slope;
  }
}

__kernel void TEMPLATE(relu_backward,Dtype)(const int_tp n,
                                           __global const Dtype* in_diff,
                                           __global const Dtype* in_data,
                                           __global Dtype* out_diff,
                                           Dtype negative_slope) {
  for (int_tp index = get_global_id(0); index < n;
      index += get_global_size(0)) {
    out_diff[index] = in_diff[index]
        * ((in_data[index] > 0?1.0:0.0) + (in_data[index] <= 0?1.0:0.0) * negative_slope);
  }
}
