"""The devicekit entry point of devicekit-cpu: declarations only. llvmlite, ctypes loading and the C compiler
are touched when a CPU device (or its target) is built, never at import or when devices are listed."""

from __future__ import annotations

import importlib.util

from devicekit.backend import Backend, Pair
from devicekit.plugin import Availability

from . import settings as _settings  # noqa: F401 - declares DEVICEKIT_CPU_* (devicekit info shows them)

DEVICEKIT_API = (1, 0)


def _probe() -> Availability:
    if importlib.util.find_spec("llvmlite") is None:
        from .cc_compiler import find_cc
        if find_cc() is None:
            return Availability.no("neither llvmlite (pip install llvmlite) nor a C compiler (clang/cc) is available")
    return Availability.yes()


DEVICEKIT_BACKEND = Backend(
    "CPU", "host CPU: LLVM IR via llvmlite (in process) or C via clang/cc, run on a thread pool", priority=10,
    probe=_probe,
    pairs=[Pair("llvm", "devicekit_cpu.llvm_renderer:LLVMRenderer()", "devicekit_cpu.llvm_compiler:LLVMCompiler()", 10),
           Pair("c", "devicekit_cpu.c_renderer:CRenderer()", "devicekit_cpu.cc_compiler:CCompiler()", 5)],
    allocator="devicekit_cpu.allocator:CPUAllocator(str(spec))",
    runtime="devicekit_cpu.runtime:runtime_factory",
)
