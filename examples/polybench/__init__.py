"""PolyBench/C 4.2 kernels written with the kernel builder (issue 14's suite): one module per kernel, each with its
PolyBench sizes, the benchmark's own initialisation, the kernel(s), a numpy reference and `run(device, size)`.
alpha and beta are `k.scalar` float64 params, so one compile serves every value (docs/ir.md, Scalar params).

    .venv/bin/python -m examples.polybench.gemm        # or gemver, gesummv, syrk: runs MINI on the default device
"""

KERNELS = ("gemm", "gemver", "gesummv", "syrk")
