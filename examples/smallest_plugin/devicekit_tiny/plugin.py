import os
import shutil

from devicekit.backend import Backend, Pair
from devicekit.plugin import Availability

DEVICEKIT_API = (1, 0)


def probe() -> Availability:
    """Cheap, never raising: TINY runs where the CPU plugin's C compiler finds a compiler."""
    if any(shutil.which(cc) for cc in (os.environ.get("CC"), "clang", "cc", "gcc") if cc):
        return Availability.yes()
    return Availability.no("no C compiler: install clang or gcc, or set CC")


DEVICEKIT_BACKEND = Backend(
    "TINY", "the smallest plugin: the CPU plugin's C pair, runtime and allocator", priority=1, probe=probe,
    pairs=[Pair("c", "devicekit_tiny.renderer:TinyRenderer()", "devicekit_cpu.cc_compiler:CCompiler()")],
    allocator="devicekit_cpu.allocator:CPUAllocator(str(spec))",
    runtime="devicekit_cpu.runtime:runtime_factory",
)
