"""OpenCLProgram: a program binary (checked: compiler.RECORD) loaded in one OPENCL id's context, launched on its
queue with per-thread kernel objects (clSetKernelArg is not thread-safe). Sizes are work-groups x work-items a group,
checked before anything is enqueued; waiting polls the event, so Ctrl-C interrupts a kernel that never ends. More
in README.md ("How it works")."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import numpy as np
from devicekit import interrupt, launch_sizes
from devicekit.render.signature import launch_shared
from devicekit.runtime import Launch, Program
from devicekit.work_sizes import WorkSizes, with_required

from . import context
from .compiler import RECORD


class OpenCLProgram(WorkSizes, Program):
    def __init__(self, compiled, ctx: context.Ctx):
        super().__init__(compiled)
        import pyopencl as cl
        self.ctx, spec = ctx, compiled.spec
        try:
            self._prg = cl.Program(ctx.context, [ctx.device], [RECORD.unwrap(compiled.lib, ctx.binary_key, spec.name)])
            self._prg.build(devices=[ctx.device])
            kernel = cl.Kernel(self._prg, spec.entry)
        except cl.Error as e:
            raise RuntimeError(f"{ctx.name}: cannot load the program binary of {spec.name!r} (entry {spec.entry!r}): "
                               f"{type(e).__name__}: {e}") from None
        self._tls = threading.local()
        self._tls.kernel = kernel
        self._view_args = bool(spec.get_meta("view_args", False))
        self._order = spec.arg_order()
        self._var_types = [np.int64 if v.dtype is None else np.uint8 if v.dtype.is_bool else v.dtype.np.type
                           for v in spec.vars]
        self._align = max(1, int(ctx.device.mem_base_addr_align) // 8)  # reported in bits
        own = _group_info(kernel, ctx.device, "WORK_GROUP_SIZE")  # register use can make it below the device's
        self._limits = ctx.limits if not own else dataclasses.replace(
            ctx.limits, max_group_items=min(int(own), ctx.limits.max_group_items or int(own)))
        reqd = tuple(int(x) for x in _group_info(kernel, ctx.device, "COMPILE_WORK_GROUP_SIZE") or ())
        self.default_local = reqd if spec.get_meta("from_source") and len(reqd) == 3 and any(reqd) else None

    def _kernel(self) -> Any:
        k = getattr(self._tls, "kernel", None)
        if k is None:
            import pyopencl as cl
            k = self._tls.kernel = cl.Kernel(self._prg, self.spec.entry)
        return k

    def _own(self, handles: list) -> None:
        for j, h in enumerate(handles):
            if h.index != self.ctx.index:
                raise ValueError(f"{self.name}: buffer {j} lives on OPENCL:{h.index}, the program on {self.ctx.name}")

    def _mem(self, h, j: int) -> Any:
        """A hand-written kernel's buffer argument: the cl_mem, or for a view an aligned sub-buffer."""
        if h.offset == 0:
            return h.mem
        if h.offset % self._align:
            raise ValueError(f"{self.name}: param {self.spec.params[j].name!r} is a view {h.offset} bytes into its "
                             f"buffer; a hand-written OpenCL kernel gets views as sub-buffers, which need offsets "
                             f"aligned to {self._align} bytes on {self.ctx.device.name.strip()}: copy the data to its "
                             f"own buffer")
        import pyopencl as cl
        return h.mem.get_sub_region(h.offset, max(h.nbytes, 1), cl.mem_flags.READ_WRITE)

    def _source_args(self, handles: list, vals: list, var_vals: dict) -> list:
        """A hand-written kernel's arguments in declaration order (`__local` params sized by `shared_bytes`)."""
        import pyopencl as cl
        locs = launch_shared(self.spec, var_vals)[1] if any(k == "local" for k, _ in self._order) else ()
        args: list[Any] = []
        for kind, i in self._order:
            if kind == "builtin":
                raise ValueError(f"{self.name}: OpenCL kernels have no builtin params")
            if kind == "buffer":
                args.append(self._mem(handles[i], i))
            elif kind == "var":
                args.append(self._var_types[i](vals[i]))
            else:
                args.append(cl.LocalMemory(max(int(locs[i]), 1)))
        return args

    def _launch(self, handles: list, vals: list, var_vals: dict, global_size, local_size, wait: bool):
        self._own(handles)
        args = None if self._view_args else self._source_args(handles, vals, var_vals)
        groups, local, glob = self._sizes(global_size, local_size)
        if not all(groups):
            return 0.0 if wait else None  # an empty grid: OpenCL refuses a zero global size, nothing to run
        k = self._kernel()
        if args is None:
            self._set_changed(k, handles, vals)
        else:
            k.set_args(*args)
        return _enqueue(self.ctx.queue, k, glob, local, wait, handles)

    def _set_changed(self, k, handles: list, vals: list) -> None:
        """Set a generated kernel's (cl_mem, byte offset) pairs and vars on this thread's kernel object, only where
        they differ from its last launch's: PoCL's clSetKernelArg of a by-value argument costs ~6 us (a cl_mem
        ~0.06 us), and a new set of Buffers mostly changes only the cl_mem arguments. A slot is None until set, so
        a set_arg that raises leaves it to be set again; a float is always set (0.0 == -0.0)."""
        last = getattr(self._tls, "last", None)
        if last is None:
            last = self._tls.last = [None] * (2 * len(handles) + len(vals))
        i = 0
        for h in handles:
            if last[i] is not h.mem:
                last[i] = None
                k.set_arg(i, h.mem)
                last[i] = h.mem
            if type(last[i + 1]) is not int or last[i + 1] != h.offset:
                last[i + 1] = None
                k.set_arg(i + 1, np.uint64(h.offset))
                last[i + 1] = h.offset
            i += 2
        for t, x in zip(self._var_types, vals):
            if type(x) is not int or type(last[i]) is not int or last[i] != x:
                last[i] = None
                k.set_arg(i, t(x))
                last[i] = x if type(x) is int else None
            i += 1

    def prepare_launch(self, handles: list, vals: list, var_vals: dict, global_size, local_size) -> Any:
        """The core's launch cache (Program.prepare_launch): a repeated launch gets a kernel object of its own, its
        arguments set and sizes checked once: one clEnqueueNDRangeKernel. Generated kernels only: a hand-written
        one's views are sub-buffers, which would keep their parent allocation alive in the cache."""
        if not self._view_args:
            return None
        self._own(handles)
        groups, local, glob = self._sizes(global_size, local_size)
        if not all(groups):
            return None
        import pyopencl as cl
        kern = cl.Kernel(self._prg, self.spec.entry)  # its own: clSetKernelArg is never called on it again
        kern.set_args(*[x for h in handles for x in (h.mem, np.uint64(h.offset))],
                      *[t(x) for t, x in zip(self._var_types, vals)])
        queue = self.ctx.queue
        return lambda wait: _enqueue(queue, kern, glob, local, wait, handles)

    def _sizes(self, global_size, local_size) -> tuple[tuple[int, ...], ...]:
        """(work-groups, work-items a group, global work size) per axis, checked against the device's and the
        kernel's limits; kept for the last sizes asked (the check costs ~3 us, launches mostly repeat sizes)."""
        sized = self.__dict__.get("_sized")
        if sized is None or sized[0] != global_size or sized[1] != local_size:
            groups, local = launch_sizes.check_values(self.name, global_size, local_size)
            groups, local = with_required(self.name, groups or (1,), local, self.default_local)
            launch_sizes.check_limits(self.name, groups, local, self._limits)
            glob = tuple(g * lo for g, lo in zip(groups, local))
            sized = self._sized = (global_size, local_size, groups, local, glob)
        return sized[2:]


def _group_info(kernel, device, what: str) -> Any:
    """clGetKernelWorkGroupInfo(`what`), None when the driver does not answer (the device's limits hold)."""
    import pyopencl as cl
    try:
        return kernel.get_work_group_info(getattr(cl.kernel_work_group_info, what), device)
    except (cl.Error, TypeError, ValueError):
        return None


def _enqueue(queue, kernel, glob: tuple, local: tuple, wait: bool, keep: list) -> Any:
    import pyopencl as cl
    try:
        ev = cl.enqueue_nd_range_kernel(queue, kernel, glob, local)
        if not wait:
            return EventLaunch(ev, queue)
        wait_event(ev, queue, keep)
    except KeyboardInterrupt:
        # a Ctrl-C that landed during the enqueue (a lazy build can take seconds) is raised as the call returns,
        # before its event is ours: count what the queue holds as running, through a marker behind it
        mark = cl.enqueue_marker(queue)
        queue.flush()
        interrupt.abandoned(lambda: mark.command_execution_status <= cl.command_execution_status.COMPLETE, keep)
        raise
    return (ev.profile.end - ev.profile.start) * 1e-9


def wait_event(ev, queue, keep=None) -> None:
    """Wait for `ev` so that Ctrl-C interrupts the wait (devicekit.interrupt.wait_until polls its status on the main
    thread); a failed command raises here, from the driver's own wait."""
    import pyopencl as cl
    queue.flush()  # polled status moves only for commands the driver was handed
    interrupt.wait_until(lambda: ev.command_execution_status <= cl.command_execution_status.COMPLETE, ev.wait, keep)
    ev.wait()  # returns at once; raises for a command that ended in error


class EventLaunch(Launch):
    """What `execute(wait=False)` returns on OpenCL: the launch's own event. `wait()` waits for that kernel only
    (the in-order queue has run everything before it) and returns its time on the device, from the profile."""

    __slots__ = ("_ev", "_queue")

    def __init__(self, ev, queue):
        super().__init__(None, 0.0)
        self._ev, self._queue = ev, queue

    def wait(self) -> float:
        if self.seconds is None:
            wait_event(self._ev, self._queue)
            self.seconds = (self._ev.profile.end - self._ev.profile.start) * 1e-9
        return self.seconds


def factory(spec):
    """RuntimeFactory of one device: CompiledSpec -> OpenCLProgram in OPENCL:<spec.index>'s context."""
    ctx = context.get(spec.index)  # fail here, with the reason, rather than at the first program
    return lambda compiled: OpenCLProgram(compiled, ctx)
