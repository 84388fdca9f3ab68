"""OpenCLProgram: a program binary loaded in one OPENCL id's context, launched on its queue.

- Loading: clCreateProgramWithBinary + clBuildProgram (required before use, ~1 ms on PoCL); bytes the driver rejects
  (another device's binary, a damaged cache entry) raise here, at load, so the core recompiles cached bytes once.
- Kernel objects are per thread: clSetKernelArg is not thread-safe on one cl_kernel, and a Program may be launched
  from several threads at once (the queue itself is thread-safe).
- Launch dims are groups x local (ProgramSpec.global_size counts work-groups): global work size = groups * local.
  A hand-written kernel without local_size runs one work-item a group, or its reqd_work_group_size when it declares
  one (read from the built kernel, so macros are evaluated); another local size is a LaunchError saying so.
- Sizes are checked before enqueueing (devicekit.launch_sizes): ints, a local size of at least 1, the device's
  work-item dimensions and sizes, the kernel's work-group size, size_t, and PoCL's 2^32 work-groups (more kill the
  process with SIGILL inside PoCL). The OpenCL spelling `global_work_size=` (work-items) / `local_work_size=` is
  accepted by `execute` and by a call by name (opencl_sizes.py).
- Waiting (wait=True, `EventLaunch.wait()`) polls the event's status on the main thread (devicekit.interrupt.
  wait_until), so Ctrl-C interrupts a kernel that never ends.
- Generated kernels take each buffer as (cl_mem, byte offset) (meta "view_args"); a hand-written kernel's
  `__global T *` param gets the cl_mem itself, or for a view a sub-buffer, which OpenCL allows only at offsets
  aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN (a clear error otherwise).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import numpy as np
from devicekit import interrupt, launch_sizes
from devicekit.errors import LaunchError
from devicekit.render.signature import launch_shared
from devicekit.runtime import Program

from . import context, opencl_sizes
from .binary import unwrap

_NP = {"bool": np.uint8, "int8": np.int8, "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16,
       "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64, "float16": np.float16,
       "float32": np.float32, "float64": np.float64}


class OpenCLProgram(Program):
    def __init__(self, compiled, ctx: context.Ctx):
        super().__init__(compiled)
        import pyopencl as cl
        self.ctx = ctx
        entry = compiled.spec.entry
        try:
            prg = cl.Program(ctx.context, [ctx.device], [unwrap(compiled.lib, ctx.binary_key, compiled.spec.name)])
            prg.build(devices=[ctx.device])
            kernel = cl.Kernel(prg, entry)
        except cl.Error as e:
            raise RuntimeError(f"{ctx.name}: cannot load the program binary of {compiled.spec.name!r} "
                               f"(entry {entry!r}): {type(e).__name__}: {e}") from None
        self._prg = prg
        self._tls = threading.local()
        self._tls.kernel = kernel
        spec = compiled.spec
        self._view_args = bool(spec.get_meta("view_args", False))
        self._order = spec.arg_order()
        self._var_types = [np.int64 if v.dtype is None else _NP[v.dtype.name] for v in spec.vars]
        self._align = max(1, int(ctx.device.mem_base_addr_align) // 8)  # reported in bits
        self._reqd = _required_local_size(kernel, ctx.device) if spec.get_meta("from_source") else None

    def execute(self, buffers: Any, vals: Any = (), global_size: Any = None, local_size: Any = None,
                wait: bool = False, *, global_work_size: Any = None, local_work_size: Any = None) -> Any:
        """Program.execute, also with OpenCL's spelling: `global_work_size` in work-items (global_size counts
        work-groups) and `local_work_size` (opencl_sizes)."""
        if global_work_size is not None or local_work_size is not None:
            global_size, local_size = opencl_sizes.to_groups(self.name, global_size, local_size, global_work_size,
                                                             local_work_size, self._reqd)
        return super().execute(buffers, vals, global_size, local_size, wait)

    def __call__(self, *args: Any, **named: Any) -> Any:
        """Program.__call__, also taking `global_work_size=` / `local_work_size=` where no param or var has that
        name."""
        if any(k in named for k in opencl_sizes.WORK_OPTIONS):
            taken = {p.name for p in self.spec.user_params} | {v.name for v in self.spec.vars}
            work = {k: named.pop(k) for k in opencl_sizes.WORK_OPTIONS if k in named and k not in taken}
            if work:
                g, lo = opencl_sizes.to_groups(self.name, named.pop("global_size", None),
                                               named.pop("local_size", None), work.get("global_work_size"),
                                               work.get("local_work_size"), self._reqd)
                named.update({k: v for k, v in (("global_size", g), ("local_size", lo)) if v is not None})
        return super().__call__(*args, **named)

    def _kernel(self) -> Any:
        k = getattr(self._tls, "kernel", None)
        if k is None:
            import pyopencl as cl
            k = self._tls.kernel = cl.Kernel(self._prg, self.compiled.spec.entry)
        return k

    def _mem(self, h, j: int) -> Any:
        if h.index != self.ctx.index:
            raise ValueError(f"{self.name}: buffer {j} lives on OPENCL:{h.index}, the program on {self.ctx.name}")
        if h.offset == 0:
            return h.mem
        if h.offset % self._align:
            p = self.spec.params[j]
            raise ValueError(f"{self.name}: param {p.name!r} is a view {h.offset} bytes into its buffer; a hand-written "
                             f"OpenCL kernel gets views as sub-buffers, which need offsets aligned to "
                             f"{self._align} bytes on {self.ctx.device.name.strip()}: copy the data to its own buffer")
        import pyopencl as cl
        return h.mem.get_sub_region(h.offset, max(h.nbytes, 1), cl.mem_flags.READ_WRITE)

    def _launch(self, handles: list, vals: list, var_vals: dict, global_size, local_size, wait: bool):
        import pyopencl as cl
        args: list[Any] = []
        if self._view_args:
            args = None  # set below, only the arguments that changed
        else:
            locs = launch_shared(self.spec, var_vals)[1] if any(k == "local" for k, _ in self._order) else ()
            for kind, i in self._order:
                if kind == "buffer":
                    args.append(self._mem(handles[i], i))
                elif kind == "var":
                    args.append(self._var_types[i](vals[i]))
                elif kind == "local":
                    args.append(cl.LocalMemory(max(int(locs[i]), 1)))
                else:
                    raise ValueError(f"{self.name}: OpenCL kernels have no builtin params")
        sized = self.__dict__.get("_sized")  # the last launch's checked sizes (~3 us to check again)
        if sized is None or sized[0] != global_size or sized[1] != local_size:
            groups, local = self._sizes(global_size, local_size)
            sized = self._sized = (global_size, local_size, groups, local, tuple(g * lo for g, lo in zip(groups, local)))
        _, _, groups, local, glob = sized
        if any(g == 0 for g in groups):
            return 0.0 if wait else None  # an empty grid: OpenCL refuses a zero global size, nothing to run
        k = self._kernel()
        if args is None:
            self._set_changed(k, handles, vals)
        else:
            k.set_args(*args)
        ev = cl.enqueue_nd_range_kernel(self.ctx.queue, k, glob, local)
        if not wait:
            return EventLaunch(ev, self.ctx.queue)
        wait_event(ev, self.ctx.queue, handles)
        return (ev.profile.end - ev.profile.start) * 1e-9

    def _set_changed(self, k, handles: list, vals: list) -> None:
        """Set a generated kernel's (cl_mem, byte offset) pairs and int vars on this thread's kernel object, only where
        they differ from its last launch's: PoCL's clSetKernelArg of a by-value argument costs ~6 us of this thread's
        CPU (a cl_mem ~0.06 us), and a new set of Buffers mostly changes only the cl_mem arguments."""
        last = getattr(self._tls, "last", None)
        if last is None:
            last = self._tls.last = [None] * (2 * len(handles) + len(vals))
        i, index = 0, self.ctx.index
        for j, h in enumerate(handles):
            if h.index != index:
                raise ValueError(f"{self.name}: buffer {j} lives on OPENCL:{h.index}, the program on {self.ctx.name}")
            mem, off = h.mem, h.offset
            if last[i] is not mem:
                last[i] = None  # unknown until set: a set_arg that raises leaves it to be set again
                k.set_arg(i, mem)
                last[i] = mem
            if type(last[i + 1]) is not int or last[i + 1] != off:
                last[i + 1] = None
                k.set_arg(i + 1, np.uint64(off))
                last[i + 1] = off
            i += 2
        for t, x in zip(self._var_types, vals):
            if type(x) is not int or type(last[i]) is not int or last[i] != x:  # a float always (0.0 == -0.0)
                last[i] = None
                k.set_arg(i, t(x))
                last[i] = x if type(x) is int else None
            i += 1

    def prepare_launch(self, handles: list, vals: list, var_vals: dict, global_size, local_size) -> Any:
        """The core's launch cache (Program.prepare_launch): a repeated launch gets a kernel object of its own with its
        arguments set once and its sizes checked once, so it is one clEnqueueNDRangeKernel (no clSetKernelArg, no
        argument conversion, no size check). Generated kernels only: a hand-written one's views are sub-buffers,
        which would keep their parent allocation alive in the cache."""
        if not self._view_args:
            return None
        import pyopencl as cl
        args: list[Any] = []
        for j, h in enumerate(handles):
            if h.index != self.ctx.index:
                raise ValueError(f"{self.name}: buffer {j} lives on OPENCL:{h.index}, the program on {self.ctx.name}")
            args += [h.mem, np.uint64(h.offset)]
        args += [t(x) for t, x in zip(self._var_types, vals)]
        groups, local = self._sizes(global_size, local_size)
        if any(g == 0 for g in groups):
            return None
        glob = tuple(g * lo for g, lo in zip(groups, local))
        kern = cl.Kernel(self._prg, self.compiled.spec.entry)  # its own: clSetKernelArg is never called on it again
        kern.set_args(*args)
        queue, enqueue = self.ctx.queue, cl.enqueue_nd_range_kernel

        def go(wait: bool) -> Any:
            ev = enqueue(queue, kern, glob, local)
            if not wait:
                return EventLaunch(ev, queue)
            wait_event(ev, queue, handles)
            return (ev.profile.end - ev.profile.start) * 1e-9
        return go

    def _sizes(self, global_size, local_size) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(work-groups, work-items per group) per axis, both of one length, checked against the device's and the
        kernel's limits (devicekit.launch_sizes: one LaunchError naming the limit, before anything is enqueued)."""
        groups, local = launch_sizes.check_values(self.name, global_size, local_size)
        groups = groups or (1,)
        reqd = self._reqd
        if local:
            pass
        elif reqd is not None:  # the kernel's reqd_work_group_size is the only local size it runs with
            local = reqd[:max(i + 1 for i, x in enumerate(reqd) if x != 1 or i == 0)]
        else:
            local = (1,) * len(groups)
        if len(local) != len(groups):
            n = max(len(local), len(groups))
            groups, local = groups + (1,) * (n - len(groups)), local + (1,) * (n - len(local))
        if reqd is not None and local + (1,) * (3 - len(local)) != reqd:
            want = ", ".join(str(x) for x in reqd)
            raise LaunchError(f"{self.name}: the kernel declares reqd_work_group_size({want}); it was launched with "
                              f"local size {local}: pass local_size=({want}) or leave it out")
        launch_sizes.check_limits(self.name, groups, local, self._limits())
        return groups, local

    def _limits(self) -> launch_sizes.Limits:
        """The device's limits, with this kernel's own work-group size (CL_KERNEL_WORK_GROUP_SIZE, which register
        use can make smaller than the device's)."""
        lim = getattr(self, "_lim", None)
        if lim is None:
            import pyopencl as cl
            lim = self.ctx.limits()
            try:
                own = int(self._kernel().get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE,
                                                             self.ctx.device))
                if own > 0:
                    lim = dataclasses.replace(lim, max_group_items=min(own, lim.max_group_items or own))
            except (cl.Error, TypeError, ValueError):  # a driver that does not answer: the device's limit holds
                pass
            self._lim = lim
        return lim


def wait_event(ev, queue, keep=None) -> None:
    """Wait for `ev` so that Ctrl-C interrupts the wait (devicekit.interrupt.wait_until polls its status on the main
    thread); a failed command raises here, from the driver's own wait."""
    import pyopencl as cl
    queue.flush()  # polled status moves only for commands the driver was handed
    interrupt.wait_until(lambda: ev.command_execution_status <= cl.command_execution_status.COMPLETE, ev.wait, keep)
    ev.wait()  # returns at once; raises for a command that ended in error


class EventLaunch:
    """What `execute(wait=False)` returns on OpenCL: the launch's own event. `wait()` waits for that kernel only
    (the in-order queue has run everything before it) and returns its time on the device, from the profile."""

    __slots__ = ("_ev", "_queue", "seconds")

    def __init__(self, ev, queue):
        self._ev, self._queue, self.seconds = ev, queue, None

    @property
    def done(self) -> bool:
        return self.seconds is not None

    def wait(self) -> float:
        if self.seconds is None:
            wait_event(self._ev, self._queue)
            self.seconds = (self._ev.profile.end - self._ev.profile.start) * 1e-9
        return self.seconds

    def __repr__(self) -> str:
        return f"<EventLaunch done in {self.seconds:.6f} s>" if self.done else "<EventLaunch submitted>"


def _required_local_size(kernel, device) -> tuple[int, int, int] | None:
    """A hand-written kernel's `__attribute__((reqd_work_group_size(x, y, z)))`, as the driver compiled it (macros
    evaluated), or None when it declares none."""
    import pyopencl as cl
    try:
        r = tuple(int(x) for x in kernel.get_work_group_info(cl.kernel_work_group_info.COMPILE_WORK_GROUP_SIZE,
                                                              device))
    except (cl.Error, TypeError, ValueError):  # a driver that does not answer: the launch checks nothing more
        return None
    return r if len(r) == 3 and any(r) else None


def factory(spec):
    """RuntimeFactory of one device: CompiledSpec -> OpenCLProgram in OPENCL:<spec.index>'s context."""
    ctx = context.get(spec.index)  # fail here, with the reason, rather than at the first program

    def make(compiled) -> OpenCLProgram:
        return OpenCLProgram(compiled, ctx)
    return make
