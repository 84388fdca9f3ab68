"""MetalProgram: a compiled kernel loaded as an MTLComputePipelineState and launched with dispatchThreadgroups.

Arguments: buffers at indices 0..P-1 (setBuffer:offset:atIndex: with the handle's offset), then each int var as 8
bytes (setBytes:length:atIndex:, read by the kernel as `constant long&`). One command buffer per launch; with
`wait` it returns the GPU time from the command buffer's GPUStartTime/GPUEndTime, else it is tracked as in flight.
Sizes are checked before encoding (devicekit.launch_sizes: global_size counts threadgroups, local_size threads per
threadgroup); waiting polls the command buffer's status (mtl.wait_checked), so Ctrl-C interrupts it. macOS only.
"""

from __future__ import annotations

import ctypes

from devicekit import launch_sizes
from devicekit.render.signature import launch_shared
from devicekit.runtime import Program

from .renderer import MAX_BUFFERS, MAX_THREADS_PER_GROUP


def _dims3(d: tuple[int, ...]) -> tuple[int, int, int]:
    return tuple(d) + (1,) * (3 - len(d))  # type: ignore[return-value]


MAX_GRID_THREADS = 2 ** 32 - 1  # thread_position_in_grid is a uint per axis


_PACK = {"bool": "?", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
         "int64": "q", "uint64": "Q", "float16": "e", "float32": "f"}


def scalar_bytes(value, dt) -> bytes:
    """A scalar param's bytes as the kernel's `constant T&` reads them (little-endian, T's size)."""
    import struct
    if dt.name == "bfloat16":
        bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
        return struct.pack("<H", (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)
    return struct.pack("<" + _PACK[dt.name], value)


class MetalProgram(Program):
    def __init__(self, compiled, ctx, device=None):
        super().__init__(compiled, device)
        from .mtl import load_library, pipeline_for
        self.ctx = ctx
        self.library = load_library(ctx.device, compiled.lib)
        self.pipeline = pipeline_for(ctx.device, self.library, compiled.spec.entry)
        self.max_threads = min(int(self.pipeline.maxTotalThreadsPerThreadgroup()), MAX_THREADS_PER_GROUP)
        self.limits = launch_sizes.Limits(
            device=f"METAL:{ctx.index} ({ctx.name})", max_local=(MAX_THREADS_PER_GROUP,) * 3,
            max_group_items=self.max_threads, max_global=(MAX_GRID_THREADS,) * 3, groups="grid (global_size)",
            items="threadgroup (local_size)")
        shared = int(compiled.spec.get_meta("shared_bytes", 0) or 0)
        if shared > ctx.max_threadgroup_memory:
            raise ValueError(f"{self.name}: needs {shared} bytes of threadgroup memory, {ctx.name} has "
                             f"{ctx.max_threadgroup_memory}")
        if len(compiled.spec.params) + len(compiled.spec.vars) > MAX_BUFFERS:
            raise ValueError(f"{self.name}: more than {MAX_BUFFERS} buffer slots (params + vars)")
        # a hand-written kernel binds at the indices its attributes name: [(kind, index, slot, dtype)]
        params = compiled.spec.get_meta("source_params")
        self.binding = None if params is None else [
            (kind, k, p.slot, p.dtype) for (kind, k), p in zip(compiled.spec.arg_order(), params) if kind != "builtin"]

    def _launch(self, handles, vals, var_vals, global_size, local_size, wait):
        Metal = self.ctx.Metal
        grid, group = launch_sizes.check(self.name, global_size, local_size, self.limits)
        grid, group = _dims3(grid), _dims3(group)
        if 0 in grid:
            return 0.0 if wait else None  # an empty grid: nothing to run
        cb = self.ctx.queue.commandBuffer()
        enc = cb.computeCommandEncoder()
        enc.setComputePipelineState_(self.pipeline)
        if self.binding is None:
            for i, h in enumerate(handles):
                enc.setBuffer_offset_atIndex_(h.buf, h.offset, i)
            for j, (v, spec_v) in enumerate(zip(vals, self.spec.vars), start=len(handles)):
                if spec_v.dtype is None:  # an int var: int64
                    arg = ctypes.c_int64(int(v))
                    enc.setBytes_length_atIndex_(arg, 8, j)
                else:  # a k.scalar: the bytes of its wire dtype
                    raw = scalar_bytes(v, spec_v.dtype)
                    enc.setBytes_length_atIndex_(raw, len(raw), j)
        else:
            tg = launch_shared(self.spec, var_vals)[1]
            if sum(tg) > self.ctx.max_threadgroup_memory:
                raise ValueError(f"{self.name}: threadgroup memory {tg} bytes is more than {self.ctx.name}'s "
                                 f"{self.ctx.max_threadgroup_memory}")
            for kind, k, slot, dt in self.binding:
                if kind == "buffer":
                    enc.setBuffer_offset_atIndex_(handles[k].buf, handles[k].offset, slot)
                elif kind == "var":
                    raw = scalar_bytes(vals[k], dt)
                    enc.setBytes_length_atIndex_(raw, len(raw), slot)
                else:  # threadgroup memory: lengths are multiples of 16 bytes
                    enc.setThreadgroupMemoryLength_atIndex_((tg[k] + 15) // 16 * 16, slot)
        enc.dispatchThreadgroups_threadsPerThreadgroup_(Metal.MTLSizeMake(*grid), Metal.MTLSizeMake(*group))
        enc.endEncoding()
        cb.commit()
        if not wait:
            self.ctx.track(cb)
            return None
        from .mtl import wait_checked
        wait_checked(cb, handles)
        return float(cb.GPUEndTime() - cb.GPUStartTime())
