"""OpenCLCompiler: OpenCL C -> the platform's program binary (clBuildProgram, then CL_PROGRAM_BINARIES), wrapped in
`RECORD` (devicekit.compile.envelope), which the runtime checks before the driver sees a byte.

The compiler lives in the driver, so it needs the device: without one the factory raises platform.Unavailable and
the registry skips the pair with that reason. `identity()` names the platform, device, driver, build options and
record format, so the compile cache never hands one driver's binary to another (nor PoCL 3.0's to PoCL 5)."""

from __future__ import annotations

import pyopencl as cl
from devicekit.compile import Compiler
from devicekit.compile.envelope import Envelope
from devicekit.errors import CompileError

from . import context, platform, settings

RECORD = Envelope(b"DKCLBIN1", "OPENCL", "devicekit-opencl")
# precise math, to match the PYTHON reference: never -cl-fast-relaxed-math, -cl-mad-enable or -cl-denorms-are-zero;
# correctly rounded float division and sqrt where the device offers them. -w: the build log holds errors only
BASE_OPTIONS = ("-cl-std=CL1.2", "-w")


class OpenCLCompiler(Compiler):
    name = "opencl"

    def __init__(self, index: int = 0):
        self.index, self.ctx = index, context.get(index)  # platform.Unavailable without the device: pair skipped
        exact = self.ctx.device.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT
        self.options = (*BASE_OPTIONS, *("-cl-fp32-correctly-rounded-divide-sqrt",) * bool(exact),
                        *settings.get("DEVICEKIT_OPENCL_BUILD_OPTIONS"))
        self._identity = f"opencl|{self.ctx.binary_key}|{' '.join(self.options)}|{RECORD.magic.decode()}"

    def identity(self) -> str:
        return self._identity

    def compile_src(self, src: str) -> bytes:
        return self._build_cl(src, list(self.options))

    def compile_tracked(self, src: str, ctx) -> tuple[bytes, None]:
        """Hand-written OpenCL C: the build options plus include_dirs= (-I) and defines= (-D); the files read are the
        signature reader's inclusion list (a driver does not say)."""
        return self._build_cl(src, [*self.options, *ctx.cc_args()]), None

    def _build_cl(self, src: str, options: list[str]) -> bytes:
        dev, prg = self.ctx.device, cl.Program(self.ctx.context, src)
        try:
            prg.build(options=options, devices=[dev])
        except cl.Error as e:
            raise CompileError(f"OpenCL build failed on {dev.name.strip()}", platform.build_log(prg, dev) or str(e),
                               src) from None
        binaries = prg.get_info(cl.program_info.BINARIES)
        if not binaries or not binaries[0]:
            raise CompileError(f"{dev.name.strip()}: the driver returned no program binary", "", src)
        return RECORD.wrap(bytes(binaries[0]), self.ctx.binary_key)

    def __reduce__(self):
        return (type(self), (self.index,))
