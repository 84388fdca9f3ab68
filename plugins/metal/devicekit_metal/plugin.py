"""devicekit entry point of the METAL device (kept light: nothing from pyobjc/Metal is imported here).

On every OS the METAL kind is declared and its Metal Shading Language renderer is available, so kernels render
anywhere (`dk.target("METAL")`). Elsewhere than macOS the probe says why it cannot run and compiling raises a
CompileError saying what is needed. On macOS two compiler pairs are offered: "xcrun" (Xcode's metal + metallib,
preferred when its toolchain is installed) and "metal" (in process, MTLDevice.newLibraryWithSource).
"""

from __future__ import annotations

from devicekit.backend import Backend, LazyRef, Pair
from devicekit.hookspecs import hookimpl
from devicekit.plugin import Availability, CompilerPairFactory

from . import env

DEVICEKIT_API = (1, 0)
KIND = "METAL"
RENDERER = "devicekit_metal.renderer:MetalRenderer()"


def _probe() -> Availability:
    reason = env.unavailable_reason()
    return Availability.no(reason) if reason else Availability.yes()


def _allocator(spec):
    from .allocator import MetalAllocator
    from .mtl import metal_context
    return MetalAllocator(metal_context(spec.index), str(spec))


def _runtime(spec):
    from .mtl import metal_context
    from .runtime import MetalProgram
    ctx = metal_context(spec.index)
    return lambda compiled: MetalProgram(compiled, ctx)


# no count: listing devices must not import Metal, and the system default GPU is METAL (every Apple-silicon Mac has
# one GPU); METAL:N for N > 0 (Intel Macs with several GPUs) opens MTLCopyAllDevices()[N] when asked for explicitly
DEVICEKIT_BACKEND = Backend(
    KIND, "Apple GPU through Metal (MSL renderer; Metal compiler and runtime via pyobjc)", priority=50, probe=_probe,
    pairs=[Pair("metal", RENDERER, "devicekit_metal.compiler:MetalCompiler(spec.index)", 0)],
    allocator=_allocator, runtime=_runtime)


@hookimpl
def devicekit_compiler_pairs(spec):
    """Xcode's metal + metallib, preferred where installed: offered on macOS only, which a record cannot say."""
    if spec.kind != KIND or not env.is_macos():
        return []
    return [CompilerPairFactory("xcrun", LazyRef(RENDERER, "METAL pair 'xcrun' renderer", factory=True),
                                LazyRef("devicekit_metal.compiler:MetalXcrunCompiler()", "METAL pair 'xcrun' compiler",
                                        factory=True), priority=10)]
