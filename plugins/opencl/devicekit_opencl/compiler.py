"""OpenCLCompiler: OpenCL C -> the platform's program binary (clBuildProgram, then CL_PROGRAM_BINARIES).

An OpenCL compiler lives in the driver, so it needs the device present: the factory raises (platform.Unavailable)
where there is none, the registry skips the pair with that reason, and `dk.target("OPENCL")` says why. The bytes are
the binary the driver made for this device, inside binary.py's record (length, device key, sha256), which the runtime
checks before the driver sees them (PoCL crashes on a truncated binary); `identity()` names the platform, the device,
the driver version, the build options and the record's format, so the compile cache never hands one driver's binary
to another (nor PoCL 3.0's to PoCL 5).
"""

from __future__ import annotations

from devicekit.compile import Compiler
from devicekit.errors import CompileError

from . import binary, context, settings

# precise math: results must match the PYTHON reference, so never -cl-fast-relaxed-math, -cl-mad-enable or
# -cl-denorms-are-zero; correctly rounded float division and sqrt where the device offers them
BASE_OPTIONS = ("-cl-std=CL1.2", "-w")  # -w: the build log holds errors only
CORRECT_DIV_SQRT = "-cl-fp32-correctly-rounded-divide-sqrt"


def build_options(dev) -> tuple[str, ...]:
    import pyopencl as cl
    opts = list(BASE_OPTIONS)
    if dev.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT:
        opts.append(CORRECT_DIV_SQRT)
    return (*opts, *settings.get("DEVICEKIT_OPENCL_BUILD_OPTIONS"))


class OpenCLCompiler(Compiler):
    name = "opencl"

    def __init__(self, index: int = 0):
        self.index = index
        self.ctx = context.get(index)  # raises platform.Unavailable without the device: the pair is skipped
        dev = self.ctx.device
        self.options = build_options(dev)
        self._identity = (f"opencl|{dev.platform.name}|{dev.platform.version}|{dev.name}|{dev.version}|"
                          f"driver {dev.driver_version}|{' '.join(self.options)}|{binary.MAGIC.decode()}")
        self._binary_key = self.ctx.binary_key

    def identity(self) -> str:
        return self._identity

    def compile_src(self, src: str) -> bytes:
        return self._build_cl(src, list(self.options))

    def compile_tracked(self, src: str, ctx) -> tuple[bytes, None]:
        """Hand-written OpenCL C: the build options plus include_dirs= (-I) and defines= (-D), as the signature
        reader was given them; the files it read are the reader's inclusion list (a driver does not say)."""
        return self._build_cl(src, [*self.options, *ctx.cc_args()]), None

    def _build_cl(self, src: str, options: list[str]) -> bytes:
        import pyopencl as cl
        prg = cl.Program(self.ctx.context, src)
        try:
            prg.build(options=options, devices=[self.ctx.device])
        except cl.Error as e:
            log = _build_log(prg, self.ctx.device) or str(e)
            raise CompileError(f"OpenCL build failed on {self.ctx.device.name.strip()}", log, src) from None
        binaries = prg.get_info(cl.program_info.BINARIES)
        if not binaries or not binaries[0]:
            raise CompileError(f"{self.ctx.device.name.strip()}: the driver returned no program binary", "", src)
        return binary.wrap(bytes(binaries[0]), self._binary_key)

    def __reduce__(self):
        return (type(self), (self.index,))


def _build_log(prg, dev) -> str:
    import pyopencl as cl
    try:
        return str(prg.get_build_info(dev, cl.program_build_info.LOG)).strip()
    except Exception:  # noqa: BLE001 - the log is a courtesy; the error is raised either way
        return ""
