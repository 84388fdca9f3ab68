"""The devicekit entry point of devicekit-cpu: declarations only. llvmlite, ctypes loading and the C compiler
are touched when a CPU device (or its target) is built, never at import or when devices are listed."""

from __future__ import annotations

import importlib.util

from devicekit.hookspecs import hookimpl
from devicekit.plugin import AllocatorFactory, Availability, CompilerPairFactory, DeviceKind, RuntimeFactoryDecl

from . import settings as _settings  # noqa: F401 - declares DEVICEKIT_CPU_* (devicekit info shows them)

DEVICEKIT_API = (1, 0)
KIND = "CPU"


def _probe() -> Availability:
    if importlib.util.find_spec("llvmlite") is None:
        from .cc_compiler import find_cc
        if find_cc() is None:
            return Availability.no("neither llvmlite (pip install llvmlite) nor a C compiler (clang/cc) is available")
    return Availability.yes()


def _llvm_renderer(spec):
    from .llvm_renderer import LLVMRenderer
    return LLVMRenderer()


def _llvm_compiler(spec):
    from .llvm_compiler import LLVMCompiler
    return LLVMCompiler()


def _c_renderer(spec):
    from .c_renderer import CRenderer
    return CRenderer()


def _c_compiler(spec):
    from .cc_compiler import CCompiler
    return CCompiler()


def _allocator(spec):
    from .allocator import CPUAllocator
    return CPUAllocator(str(spec))


def _runtime(spec):
    from .runtime import runtime_factory
    return runtime_factory(spec)


@hookimpl
def devicekit_device_kinds() -> list[DeviceKind]:
    return [DeviceKind(KIND, "host CPU: LLVM IR via llvmlite (in process) or C via clang/cc, run on a thread pool",
                       priority=10, probe=_probe)]


@hookimpl
def devicekit_allocator(spec) -> AllocatorFactory | None:
    return AllocatorFactory(_allocator, priority=0) if spec.kind == KIND else None


@hookimpl
def devicekit_compiler_pairs(spec) -> list[CompilerPairFactory]:
    if spec.kind != KIND:
        return []
    return [CompilerPairFactory("llvm", _llvm_renderer, _llvm_compiler, priority=10),
            CompilerPairFactory("c", _c_renderer, _c_compiler, priority=5)]


@hookimpl
def devicekit_runtime_factory(spec) -> RuntimeFactoryDecl | None:
    return RuntimeFactoryDecl(_runtime, priority=0) if spec.kind == KIND else None
