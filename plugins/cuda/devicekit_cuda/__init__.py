"""devicekit-cuda: the CUDA device for devicekit.

Compile anywhere (NVRTC + nvJitLink pip wheels, ptxas as a fallback); run where there is an NVIDIA driver and
pycuda (`pip install 'devicekit-cuda[runtime]'`). The entry point is `devicekit_cuda.plugin`; importing this
package imports nothing heavy.
"""

__version__ = "0.1.0"
