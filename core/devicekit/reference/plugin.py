"""The built-in PYTHON device, registered through the same hooks as every plugin (lowest priority: the oracle, never
the default when anything else runs)."""

from __future__ import annotations

from ..hookspecs import hookimpl
from ..plugin import AllocatorFactory, CompilerPairFactory, DeviceKind, RuntimeFactoryDecl

DEVICEKIT_API = (1, 0)
KIND = "PYTHON"


@hookimpl
def devicekit_device_kinds():
    return [DeviceKind(KIND, "reference numpy interpreter of the IR (defines the semantics)", priority=-100)]


@hookimpl
def devicekit_allocator(spec):
    if spec.kind != KIND:
        return None
    from ..memory import HostAllocator
    return AllocatorFactory(lambda s: HostAllocator(str(s)), priority=0)


@hookimpl
def devicekit_compiler_pairs(spec):
    if spec.kind != KIND:
        return []

    def renderer(s):
        from .device import PythonRenderer
        return PythonRenderer()

    def compiler(s):
        from .device import PythonCompiler
        return PythonCompiler()

    return [CompilerPairFactory("python", renderer, compiler, priority=0)]


@hookimpl
def devicekit_runtime_factory(spec):
    if spec.kind != KIND:
        return None

    def factory(s):
        from .device import PythonProgram
        return lambda compiled: PythonProgram(compiled)

    return RuntimeFactoryDecl(factory, priority=0)
