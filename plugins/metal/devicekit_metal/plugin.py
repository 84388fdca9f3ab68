"""devicekit entry point of the METAL device (kept light: nothing from pyobjc/Metal is imported here).

On every OS the METAL kind is declared and its Metal Shading Language renderer is available, so kernels render
anywhere (`dk.target("METAL")`). Elsewhere than macOS the probe says why it cannot run and compiling raises a
CompileError saying what is needed. On macOS two compiler pairs are offered: "xcrun" (Xcode's metal + metallib,
preferred when its toolchain is installed) and "metal" (in process, MTLDevice.newLibraryWithSource).
"""

from __future__ import annotations

from devicekit.hookspecs import hookimpl
from devicekit.plugin import AllocatorFactory, Availability, CompilerPairFactory, DeviceKind, RuntimeFactoryDecl

from . import env

DEVICEKIT_API = (1, 0)
KIND = "METAL"


def _probe() -> Availability:
    reason = env.unavailable_reason()
    return Availability.no(reason) if reason else Availability.yes()


def _count() -> int:
    # listing devices must not import Metal: the system default GPU is METAL (every Apple-silicon Mac has one GPU).
    # METAL:N for N > 0 (Intel Macs with several GPUs) opens MTLCopyAllDevices()[N] when asked for explicitly.
    return 1


@hookimpl
def devicekit_device_kinds():
    return [DeviceKind(KIND, "Apple GPU through Metal (MSL renderer; Metal compiler and runtime via pyobjc)",
                       priority=50, probe=_probe, count=_count)]


def _renderer(spec):
    from .renderer import MetalRenderer
    return MetalRenderer()


def _inprocess_compiler(spec):
    from .compiler import MetalCompiler
    return MetalCompiler(spec.index)


def _xcrun_compiler(spec):
    from .compiler import MetalXcrunCompiler
    return MetalXcrunCompiler()


@hookimpl
def devicekit_compiler_pairs(spec):
    if spec.kind != KIND:
        return []
    pairs = [CompilerPairFactory("metal", _renderer, _inprocess_compiler, priority=0)]
    if env.is_macos():
        pairs.append(CompilerPairFactory("xcrun", _renderer, _xcrun_compiler, priority=10))
    return pairs


def _allocator(spec):
    from .allocator import MetalAllocator
    from .mtl import metal_context
    return MetalAllocator(metal_context(spec.index), str(spec))


def _runtime(spec):
    from .mtl import metal_context
    from .runtime import MetalProgram
    ctx = metal_context(spec.index)
    return lambda compiled: MetalProgram(compiled, ctx)


@hookimpl
def devicekit_allocator(spec):
    return AllocatorFactory(_allocator) if spec.kind == KIND else None


@hookimpl
def devicekit_runtime_factory(spec):
    return RuntimeFactoryDecl(_runtime) if spec.kind == KIND else None
