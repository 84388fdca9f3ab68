"""The entry point devicekit loads: one declarative record (devicekit.backend), cheap to import. The registry
generates the four hooks from it; the renderer, compiler, allocator and runtime modules are named by strings and
imported when an ACME device (or target) is first built, never when devices are listed."""

from __future__ import annotations

from devicekit.backend import Backend, Pair

from . import settings  # noqa: F401 - declares ACME_DEVICE_COUNT and ACME_CC on load, so `devicekit info` lists them

DEVICEKIT_API = (1, 0)  # the plugin API this package was built against; another major is refused by the core

# priority 5: below CPU (10), so installing ACME does not change anyone's default device. example=True: devicekit
# lists it as the example it is (no ACME hardware exists) and `devicekit bench` runs it only when asked
DEVICEKIT_BACKEND = Backend(
    "ACME", "example vendor device (emulated on the host CPU: C via the host compiler)", priority=5, example=True,
    probe="devicekit_acme.toolchain:probe",  # cheap, never raising: can ACME run here?
    count="devicekit_acme.settings:device_count",  # ACME_DEVICE_COUNT; 0: "no devices of this kind were found"
    pairs=[Pair("acme-cc", "devicekit_acme.renderer:AcmeRenderer()", "devicekit_acme.compiler:AcmeCompiler()", 10)],
    allocator="devicekit_acme.allocator:AcmeAllocator(str(spec))",  # "ACME:1": the device its Buffers name
    runtime="devicekit_acme.runtime:factory",  # spec -> (CompiledSpec -> AcmeProgram) for that id
)
