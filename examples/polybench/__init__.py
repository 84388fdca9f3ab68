"""PolyBench/C 4.2 written with the kernel builder (issue 14's suite): one module per kernel, each with its
PolyBench sizes (SIZES: MINI, SMALL, MEDIUM), the benchmark's own initialisation (init_arrays), the kernel(s) built
with the IR, a numpy reference, `compute(device, arrays, sizes, **scalars)` and `run(device, size, **scalars)`.
alpha and beta are `k.scalar` params of DATA_TYPE, so one compile serves every value (docs/ir.md, Scalar params).
DATA_TYPE is PolyBench's double (float64) by default; float32 arrays (`_common.with_data_type`: PolyBench's
DATA_TYPE_IS_FLOAT build) build every kernel in float32 (`kernel(dt)`), for targets without float64 (WEBGPU;
tests/ir/test_polybench_float32.py).
A module whose kernel runs once takes compute and run from _common (launch, sized).
tests/ir/test_polybench.py checks each against its reference; the module docstrings say how each is written, and
WORKAROUND, where a module has it, why it is not written directly (NOTE: a choice worth knowing).
docs/polybench.md has the table at MEDIUM (bench/polybench.py).

    .venv/bin/python -m examples.polybench.gemm        # any module of KERNELS: runs MINI on the default device
"""

NAMES = {  # module -> PolyBench's name, in PolyBench's order (linear algebra, solvers, data mining, medley, stencils)
    "mm2": "2mm", "mm3": "3mm", "atax": "atax", "bicg": "bicg", "doitgen": "doitgen", "mvt": "mvt",
    "gemm": "gemm", "gemver": "gemver", "gesummv": "gesummv", "symm": "symm", "syr2k": "syr2k", "syrk": "syrk",
    "trmm": "trmm", "cholesky": "cholesky", "durbin": "durbin", "gramschmidt": "gramschmidt", "lu": "lu",
    "ludcmp": "ludcmp", "trisolv": "trisolv", "correlation": "correlation", "covariance": "covariance",
    "deriche": "deriche", "floyd_warshall": "floyd-warshall", "nussinov": "nussinov", "adi": "adi",
    "fdtd_2d": "fdtd-2d", "heat_3d": "heat-3d", "jacobi_1d": "jacobi-1d", "jacobi_2d": "jacobi-2d",
    "seidel_2d": "seidel-2d",
}
KERNELS = tuple(NAMES)
CATEGORIES = {  # PolyBench's directory of each kernel
    **dict.fromkeys(("mm2", "mm3", "atax", "bicg", "doitgen", "mvt"), "linear-algebra/kernels"),
    **dict.fromkeys(("gemm", "gemver", "gesummv", "symm", "syr2k", "syrk", "trmm"), "linear-algebra/blas"),
    **dict.fromkeys(("cholesky", "durbin", "gramschmidt", "lu", "ludcmp", "trisolv"), "linear-algebra/solvers"),
    **dict.fromkeys(("correlation", "covariance"), "datamining"),
    **dict.fromkeys(("deriche", "floyd_warshall", "nussinov"), "medley"),
    **dict.fromkeys(("adi", "fdtd_2d", "heat_3d", "jacobi_1d", "jacobi_2d", "seidel_2d"), "stencils"),
}
