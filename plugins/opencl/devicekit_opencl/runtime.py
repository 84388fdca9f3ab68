"""OpenCLProgram: a program binary (checked: compiler.RECORD) loaded in one OPENCL id's context, launched on its
queue with per-thread kernel objects (clSetKernelArg is not thread-safe). Sizes are work-groups x work-items a group,
checked before anything is enqueued (the core's work_sizes.CheckedSizes); waiting polls the event (context.Ctx.wait),
so Ctrl-C interrupts a kernel that never ends. More in README.md ("How it works")."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import numpy as np
import pyopencl as cl
from devicekit import interrupt
from devicekit.kernel_args import set_changed
from devicekit.per_index import programs_in
from devicekit.render.signature import launch_args
from devicekit.runtime import EventLaunch, Program
from devicekit.spec import DeviceSpec
from devicekit.work_sizes import CheckedSizes, WorkSizes

from . import context
from .compiler import RECORD


class OpenCLProgram(WorkSizes, Program):
    def __init__(self, compiled, ctx: context.Ctx):
        super().__init__(compiled)
        self.ctx, spec = ctx, compiled.spec
        self.home = DeviceSpec.parse(ctx.name)  # the core refuses another id's Buffers (Program.check)
        try:
            self._prg = cl.Program(ctx.context, [ctx.device], [RECORD.unwrap(compiled.lib, ctx.binary_key, spec.name)])
            self._prg.build(devices=[ctx.device])
            kernel = cl.Kernel(self._prg, spec.entry)
        except cl.Error as e:
            raise RuntimeError(f"{ctx.name}: cannot load the program binary of {spec.name!r} (entry {spec.entry!r}): "
                               f"{type(e).__name__}: {e}") from None
        self._tls = threading.local()  # this thread's kernel object and what was last set on it (_kernel)
        self._view_args = bool(spec.get_meta("view_args", False))
        self._var_types = [np.int64 if v.dtype is None else np.uint8 if v.dtype.is_bool else v.dtype.np.type
                           for v in spec.vars]
        # a generated kernel's arguments (_args) as OpenCL takes them: each cl_mem as is, its byte offset a ulong
        self._arg_types = [(lambda mem: mem), np.uint64] * len(spec.params) + self._var_types
        self._align = max(1, int(ctx.device.mem_base_addr_align) // 8)  # reported in bits
        own = _group_info(kernel, ctx.device, "WORK_GROUP_SIZE")  # register use can make it below the device's
        limits = ctx.limits if not own else dataclasses.replace(
            ctx.limits, max_group_items=min(int(own), ctx.limits.max_group_items or int(own)))
        reqd = tuple(int(x) for x in _group_info(kernel, ctx.device, "COMPILE_WORK_GROUP_SIZE") or ())
        self.default_local = reqd if spec.get_meta("from_source") and len(reqd) == 3 and any(reqd) else None
        self._sizes = CheckedSizes(self.name, limits, self.default_local)

    def _kernel(self) -> tuple[Any, list]:
        """This thread's kernel object (clSetKernelArg is not thread-safe) and the arguments last set on it (the
        core's kernel_args.set_changed sets only those that changed)."""
        mine = getattr(self._tls, "mine", None)
        if mine is None:
            mine = self._tls.mine = (cl.Kernel(self._prg, self.spec.entry), [None] * len(self._arg_types))
        return mine

    def _mem(self, h, j: int) -> Any:
        """A hand-written kernel's buffer argument: the cl_mem, or for a view an aligned sub-buffer."""
        if h.offset == 0:
            return h.mem
        if h.offset % self._align:
            raise ValueError(f"{self.name}: param {self.spec.params[j].name!r} is a view {h.offset} bytes into its "
                             f"buffer; a hand-written OpenCL kernel gets views as sub-buffers, which need offsets "
                             f"aligned to {self._align} bytes on {self.ctx.device.name.strip()}: copy the data to its "
                             f"own buffer")
        return h.mem.get_sub_region(h.offset, max(h.nbytes, 1), cl.mem_flags.READ_WRITE)

    def _source_args(self, handles: list, vals: list, var_vals: dict) -> list:
        """A hand-written kernel's arguments in declaration order (`__local` params sized by `shared_bytes`)."""
        return launch_args(self.spec, var_vals, buffer=lambda i: self._mem(handles[i], i),
                           var=lambda j: self._var_types[j](vals[j]), local=lambda n: cl.LocalMemory(max(n, 1)))

    def _launch(self, handles: list, vals: list, var_vals: dict, global_size, local_size, wait: bool):
        args = None if self._view_args else self._source_args(handles, vals, var_vals)
        groups, local, items = self._sizes(global_size, local_size)
        if not all(groups):
            return 0.0 if wait else None  # an empty grid: OpenCL refuses a zero global size, nothing to run
        k, last = self._kernel()
        if args is None:  # a new set of Buffers mostly changes only the cl_mem arguments (~0.06 us each on PoCL)
            set_changed(k.set_arg, last, self._args(handles, vals), self._arg_types)
        else:
            k.set_args(*args)
        return _enqueue(self.ctx, k, items, local, wait, handles)

    def _args(self, handles: list, vals: list) -> list:
        """A generated kernel's arguments: each buffer's (cl_mem, byte offset), then the vars."""
        return [*(x for h in handles for x in (h.mem, h.offset)), *vals]

    def prepare_launch(self, handles: list, vals: list, var_vals: dict, global_size, local_size) -> Any:
        """The core's launch cache (Program.prepare_launch): a repeated launch gets a kernel object of its own, its
        arguments set and sizes checked once: one clEnqueueNDRangeKernel. Generated kernels only: a hand-written
        one's views are sub-buffers, which would keep their parent allocation alive in the cache."""
        if not self._view_args:
            return None
        groups, local, items = self._sizes(global_size, local_size)
        if not all(groups):
            return None
        kern = cl.Kernel(self._prg, self.spec.entry)  # its own: clSetKernelArg is never called on it again
        kern.set_args(*[as_arg(x) for as_arg, x in zip(self._arg_types, self._args(handles, vals))])
        ctx = self.ctx
        return lambda wait: _enqueue(ctx, kern, items, local, wait, handles)


def _group_info(kernel, device, what: str) -> Any:
    """clGetKernelWorkGroupInfo(`what`), None when the driver does not answer (the device's limits hold)."""
    try:
        return kernel.get_work_group_info(getattr(cl.kernel_work_group_info, what), device)
    except (cl.Error, TypeError, ValueError):
        return None


def _enqueue(ctx: context.Ctx, kernel, items: tuple, local: tuple, wait: bool, keep: list) -> Any:
    """Enqueue `kernel` over `items` work-items in groups of `local`: its seconds on the device when `wait`, else its
    EventLaunch."""
    try:
        ev = cl.enqueue_nd_range_kernel(ctx.queue, kernel, items, local)
        if not wait:
            return EventLaunch(_timed, ctx, ev)
        return _timed(ctx, ev, keep)
    except KeyboardInterrupt:
        # a Ctrl-C that landed during the enqueue (a lazy build can take seconds) is raised as the call returns,
        # before its event is ours: count what the queue holds as running, through a marker behind it
        mark = cl.enqueue_marker(ctx.queue)
        ctx.queue.flush()
        interrupt.abandoned(lambda: mark.command_execution_status <= cl.command_execution_status.COMPLETE, keep)
        raise


def _timed(ctx: context.Ctx, ev, keep: Any = None) -> float:
    """Wait for a kernel's event (Ctx.wait: Ctrl-C interrupts it) and return its time on the device, from the
    profile."""
    ctx.wait(ev, keep)
    return (ev.profile.end - ev.profile.start) * 1e-9


factory = programs_in(context.get, OpenCLProgram)  # RuntimeFactory: OpenCLPrograms in OPENCL:<spec.index>'s context
