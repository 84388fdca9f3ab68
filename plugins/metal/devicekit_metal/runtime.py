"""MetalProgram: a compiled kernel loaded as an MTLComputePipelineState and launched with dispatchThreadgroups.

Arguments: buffers at indices 0..P-1 (setBuffer:offset:atIndex: with the handle's offset), then each int var as 8
bytes (setBytes:length:atIndex:, read by the kernel as `constant long&`). One command buffer per launch; with
`wait` it returns the GPU time from the command buffer's GPUStartTime/GPUEndTime, else it is tracked as in flight.
macOS only.
"""

from __future__ import annotations

import ctypes

from devicekit.runtime import Program

from .renderer import MAX_BUFFERS, MAX_THREADS_PER_GROUP


def _dims3(dims, default: int = 1) -> tuple[int, int, int]:
    d = tuple(int(x) for x in (dims or ()))
    if len(d) > 3:
        raise ValueError(f"METAL launches have at most 3 dimensions, got {d}")
    return d + (default,) * (3 - len(d))  # type: ignore[return-value]


class MetalProgram(Program):
    def __init__(self, compiled, ctx, device=None):
        super().__init__(compiled, device)
        from .mtl import load_library, pipeline_for
        self.ctx = ctx
        self.library = load_library(ctx.device, compiled.lib)
        self.pipeline = pipeline_for(ctx.device, self.library, compiled.spec.name)
        self.max_threads = min(int(self.pipeline.maxTotalThreadsPerThreadgroup()), MAX_THREADS_PER_GROUP)
        shared = int(compiled.spec.get_meta("shared_bytes", 0) or 0)
        if shared > ctx.max_threadgroup_memory:
            raise ValueError(f"{self.name}: needs {shared} bytes of threadgroup memory, {ctx.name} has "
                             f"{ctx.max_threadgroup_memory}")
        if len(compiled.spec.params) + len(compiled.spec.vars) > MAX_BUFFERS:
            raise ValueError(f"{self.name}: more than {MAX_BUFFERS} buffer slots (params + vars)")

    def _launch(self, handles, vals, var_vals, global_size, local_size, wait):
        Metal = self.ctx.Metal
        grid, group = _dims3(global_size), _dims3(local_size)
        threads = group[0] * group[1] * group[2]
        if threads > self.max_threads:
            raise ValueError(f"{self.name}: {threads} threads per threadgroup {group}; this pipeline allows "
                             f"{self.max_threads} on {self.ctx.name}")
        if 0 in grid or 0 in group:
            return 0.0 if wait else None
        cb = self.ctx.queue.commandBuffer()
        enc = cb.computeCommandEncoder()
        enc.setComputePipelineState_(self.pipeline)
        for i, h in enumerate(handles):
            enc.setBuffer_offset_atIndex_(h.buf, h.offset, i)
        for j, v in enumerate(vals, start=len(handles)):
            arg = ctypes.c_int64(int(v))
            enc.setBytes_length_atIndex_(arg, 8, j)
        enc.dispatchThreadgroups_threadsPerThreadgroup_(Metal.MTLSizeMake(*grid), Metal.MTLSizeMake(*group))
        enc.endEncoding()
        cb.commit()
        if not wait:
            self.ctx.track(cb)
            return None
        from .mtl import wait_checked
        wait_checked(cb)
        return float(cb.GPUEndTime() - cb.GPUStartTime())
