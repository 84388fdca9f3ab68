"""WGSLCompiler: WGSL -> a shader module validated by wgpu's compiler (naga), on the id's own GPUDevice.

WebGPU has no binary format: the compiled bytes are the WGSL text itself, kept once naga accepted it (so a rejected
source is a CompileError at compile time, with naga's report and its `wgsl:LINE:COL` positions turned into a source
excerpt), and the runtime makes the module and pipeline from them. `identity()` names the adapter, its driver and
backend, and the wgpu and wgpu-native versions: a driver or naga upgrade never reuses a stale entry.
"""

from __future__ import annotations

import re

from devicekit.compile import Compiler
from devicekit.errors import CompileError

from . import adapters

_POS = re.compile(r"wgsl:(\d+):(\d+)")


def shader_module(ctx: adapters.Ctx, src: str, what: str):
    """The GPUShaderModule of src on ctx's device; a CompileError with naga's report where it is rejected."""
    try:
        return ctx.device.create_shader_module(code=src)
    except Exception as e:  # noqa: BLE001 - wgpu raises GPUValidationError (and GPUError kin) for a bad shader
        log = str(e).strip()
        log = _POS.sub(lambda m: f"line {m.group(1)}:{m.group(2)}", log)
        raise CompileError(f"WGSL shader{' ' + what if what else ''} rejected by wgpu on {ctx.adapter.info.get('device', '?')}", log,
                           src) from None


class WGSLCompiler(Compiler):
    name = "wgsl"
    reassociates = True  # WGSL lets the driver fold and reassociate float math and assume finite values (lavapipe does)

    def __init__(self, index: int = 0):
        import wgpu
        from wgpu.backends import wgpu_native
        self.index = index
        self.ctx = adapters.get(index)  # raises adapters.Unavailable without the adapter: the pair is skipped
        i = self.ctx.adapter.info
        self._identity = (f"wgsl|{i.get('vendor')}|{i.get('device')}|{i.get('description')}|{i.get('backend_type')}|"
                          f"{i.get('vendor_id')}:{i.get('device_id')}|wgpu {wgpu.__version__}|"
                          f"wgpu-native {wgpu_native.__version__}")

    def identity(self) -> str:
        return self._identity

    def compile_src(self, src: str) -> bytes:
        shader_module(self.ctx, src, "")
        return src.encode()

    def __reduce__(self):
        return (type(self), (self.index,))
