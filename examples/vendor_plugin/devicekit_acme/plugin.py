"""The entry point devicekit loads: cheap declarations only. The renderer, compiler, allocator and runtime modules
are imported inside the factories, when an ACME device (or target) is first built, never when devices are listed."""

from __future__ import annotations

from devicekit.hookspecs import hookimpl
from devicekit.plugin import AllocatorFactory, Availability, CompilerPairFactory, DeviceKind, RuntimeFactoryDecl

from . import settings  # ACME_DEVICE_COUNT, ACME_CC: declared on load, so `devicekit info` lists them

DEVICEKIT_API = (1, 0)  # the plugin API this package was built against; another major is refused by the core
KIND = "ACME"


def _probe() -> Availability:
    """Cheap and never raising: can ACME run here? It needs a host C compiler (its 'toolchain')."""
    from .toolchain import find_cc
    if find_cc() is None:
        return Availability.no("no host C compiler for ACME (set ACME_CC or CC, or install clang/gcc)")
    return Availability.yes()


def _count() -> int:
    return settings.get("ACME_DEVICE_COUNT")  # 0: the registry reports "no devices of this kind were found"


def _renderer(spec):
    from .renderer import AcmeRenderer
    return AcmeRenderer()


def _compiler(spec):
    from .compiler import AcmeCompiler
    return AcmeCompiler()


def _allocator(spec):
    from .allocator import AcmeAllocator
    return AcmeAllocator(str(spec))


def _runtime(spec):
    """The runtime of one device: the spec (kind and index) is bound, so ACME:1's Programs know they serve ACME:1."""
    from .runtime import AcmeProgram
    return lambda compiled: AcmeProgram(compiled, home=spec)


@hookimpl
def devicekit_device_kinds() -> list[DeviceKind]:
    # priority 5: below CPU (10), so installing ACME does not change anyone's default device
    # example=True: devicekit lists it as the example it is (no ACME hardware exists), and `devicekit bench` runs
    # it only when asked (--device ACME)
    return [DeviceKind(KIND, "example vendor device (emulated on the host CPU: C via the host compiler)", priority=5,
                       probe=_probe, count=_count, example=True)]


@hookimpl
def devicekit_allocator(spec) -> AllocatorFactory | None:
    return AllocatorFactory(_allocator, priority=0) if spec.kind == KIND else None


@hookimpl
def devicekit_compiler_pairs(spec) -> list[CompilerPairFactory]:
    if spec.kind != KIND:
        return []
    return [CompilerPairFactory("acme-cc", _renderer, _compiler, priority=10)]


@hookimpl
def devicekit_runtime_factory(spec) -> RuntimeFactoryDecl | None:
    return RuntimeFactoryDecl(_runtime, priority=0) if spec.kind == KIND else None
