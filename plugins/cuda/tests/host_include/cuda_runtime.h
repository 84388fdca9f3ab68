// host emulation: the CUDA runtime API is host code; what kernels use comes from cuda_host_shim.h (force-included)
#pragma once
