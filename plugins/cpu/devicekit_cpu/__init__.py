"""devicekit-cpu: the CPU device for devicekit.

Pairs: "llvm" (LLVM IR -> llvmlite, in process; the default) and "c" (C -> clang or cc, a shared object).
Programs run natively through ctypes; the outermost global range is split across a thread pool of
DEVICEKIT_CPU_THREADS threads (default: the CPUs this process may run on). Nothing heavy is imported here.
"""

__version__ = "0.1.0"
