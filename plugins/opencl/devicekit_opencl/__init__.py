"""devicekit-opencl: the OPENCL device kind (OpenCL C -> the platform's compiler -> program binaries, via pyopencl).

Nothing heavy here: devicekit imports `devicekit_opencl.plugin` to list devices; pyopencl is imported by the probe
and by the factories, never by this package."""
