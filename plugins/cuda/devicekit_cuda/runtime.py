"""CUDAProgram: a cubin loaded as a module on one device (pycuda), launched with grid = global_size (blocks) and
block = local_size (threads). With wait=True the launch is timed with CUDA events and the seconds returned.

Sizes are checked before the launch by the core's work_sizes.CheckedSizes (devicekit.launch_sizes' checks: ints,
blocks of at least one thread, the device's grid and block limits, the kernel's threads per block), remembered for
the last sizes asked. Waiting polls the end event on the main thread
(CUDAContext.wait_event), so Ctrl-C interrupts a kernel that never ends.
"""

from __future__ import annotations

import math

from devicekit.render.signature import launch_shared
from devicekit.runtime import Program
from devicekit.work_sizes import CheckedSizes

from . import context


def _dims3(d: tuple[int, ...]) -> tuple[int, int, int]:
    return (tuple(d) + (1, 1, 1))[:3]  # type: ignore[return-value]


class CUDAProgram(Program):
    def __init__(self, compiled, device=None, index: int = 0):
        super().__init__(compiled, device)
        self.ctx = context.get(index)
        cuda = self.ctx.cuda
        spec = compiled.spec
        with self.ctx:
            try:
                self.module = cuda.module_from_buffer(compiled.lib)
            except cuda.Error as e:
                raise RuntimeError(f"CUDA:{index} ({self.ctx.name}, {self.ctx.arch}) cannot load {spec.name}: {e}; "
                                   f"it was compiled by {compiled.compiler_id}") from e
            self.function = self.module.get_function(spec.get_meta("symbol") or spec.entry)
            self.max_threads = self.function.get_attribute(cuda.function_attribute.MAX_THREADS_PER_BLOCK)
        # generated kernels take int64 vars and scalars of their wire dtype; a hand-written one states its C types
        # (devicekit_cuda.source)
        from .source import _ARG_FORMAT
        self.function.prepare(spec.get_meta("arg_format") or "P" * len(spec.params)
                              + "".join("q" if v.dtype is None else _ARG_FORMAT[v.dtype.name] for v in spec.vars))
        self.order = spec.get_meta("args")
        self.dynamic_shared = spec.get_meta("dynamic_shared") is not None
        self.shared_limit = 48 * 1024  # dynamic shared memory a launch gets without opting in
        self._sizes = CheckedSizes(self.name, self.ctx.limits(int(self.max_threads)))

    def _allow_shared(self, nbytes: int) -> None:
        """Opt in to more than 48 KiB of dynamic shared memory (Volta and later), or say why it cannot be had."""
        cuda = self.ctx.cuda
        attr = getattr(cuda.function_attribute, "MAX_DYNAMIC_SHARED_SIZE_BYTES", None)
        try:
            self.function.set_attribute(attr, nbytes)
        except (AttributeError, TypeError, cuda.Error) as e:
            raise ValueError(f"{self.name}: shared_bytes={nbytes} is more than the 48 KiB a launch gets by default, "
                             f"and {self.ctx.name} refused more: {e}") from None
        self.shared_limit = nbytes

    def _dims(self, global_size, local_size) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(grid, block), 3 axes each, checked by the core's CheckedSizes (the check costs ~3 us; it is remembered
        for the last sizes asked, as a program's launches mostly repeat their sizes)."""
        groups, block, _ = self._sizes(global_size, local_size)
        return _dims3(groups), _dims3(block)

    def _args(self, handles, vals) -> list:
        if self.order is None:
            # int vars as ints; a k.scalar as the launch checked it (a float scalar a float, rounded to its dtype)
            return [int(h) for h in handles] + [int(v) if sv.dtype is None else v for v, sv in zip(vals, self.spec.vars)]
        # a hand-written kernel: its params in declaration order, scalars as their C types
        return [int(handles[j]) if kind == "buffer" else vals[j] for kind, j in self.order]

    def prepare_launch(self, handles, vals, var_vals, global_size, local_size):
        """The core's launch cache (Program.prepare_launch): a repeated launch's grid, block, arguments and shared
        bytes made once; the call is the driver's launch in this device's context. None (repeat through `_launch`)
        for an empty grid or one that needs more shared memory than the kernel was allowed so far."""
        grid, block = self._dims(global_size, local_size)
        shared = launch_shared(self.spec, var_vals)[0] if self.dynamic_shared else 0
        if math.prod(grid) == 0 or shared > self.shared_limit:
            return None
        args, ctx, call = tuple(self._args(handles, vals)), self.ctx, self.function.prepared_async_call

        def go(wait: bool):  # holds no Program (nor Buffer): the cache entry must not keep either alive
            with ctx:
                stream = ctx.stream
                if wait:
                    start, end = ctx.cuda.Event(), ctx.cuda.Event()
                    start.record(stream)
                call(grid, block, stream, *args, shared_size=shared)
                if not wait:
                    return None
                end.record(stream)
            ctx.wait_event(end, handles)
            with ctx:
                return start.time_till(end) * 1e-3
        return go

    def _launch(self, handles, vals, var_vals, global_size, local_size, wait):
        grid, block = self._dims(global_size, local_size)
        if math.prod(grid) == 0:
            return 0.0 if wait else None  # an empty grid: nothing to run
        args = self._args(handles, vals)
        shared = launch_shared(self.spec, var_vals)[0] if self.dynamic_shared else 0
        cuda = self.ctx.cuda
        with self.ctx:
            if shared > self.shared_limit:
                self._allow_shared(shared)
            stream = self.ctx.stream
            if wait:
                start, end = cuda.Event(), cuda.Event()
                start.record(stream)
            self.function.prepared_async_call(grid, block, stream, *args, shared_size=shared)
            if not wait:
                return None
            end.record(stream)
        self.ctx.wait_event(end, handles)  # outside the context's lock; Ctrl-C interrupts it
        with self.ctx:
            return start.time_till(end) * 1e-3


def factory(spec):
    """RuntimeFactory for one device: CompiledSpec -> CUDAProgram on CUDA:<index>."""
    index = spec.index
    context.get(index)  # fail here, with the reason, rather than at the first program

    def make(compiled) -> CUDAProgram:
        return CUDAProgram(compiled, index=index)
    return make
