"""WebGPUProgram: one compute pipeline per kernel on its id's device, dispatched as groups x workgroup size.

- Loading: the WGSL text (the compiled bytes) becomes a shader module and a compute pipeline with an explicit
  layout (storage bindings read_write, one uniform binding); a source the device rejects raises here, at load.
- Arguments: generated kernels take every buffer at binding i and one uniform struct at binding n: each buffer's
  view offset in elements, then the vars and scalars (renderer meta "wgsl_args" / "wgsl_units"). A hand-written
  shader's bindings are its own (`source.py`: "wgsl_bindings", "wgsl_uniform"); its views must sit at the adapter's
  min-storage-buffer-offset-alignment.
- Bind groups are cached per Program by the buffers they bind (at most 64, oldest dropped). The uniform buffer is the
  Program's own: its write and the dispatch are submitted under the device's lock, so the queue sees them paired.
- Grids: a generated kernel's grid with an axis over max-compute-workgroups-per-dimension (65535: a 1-D launch of
  16M elements in 256-wide groups asks for 65536) is folded into nx x ny (x nz) groups (`fold`); the shader
  recomputes the grid's group id from the flat id and masks the extra groups (renderer: FOLD_PRELUDE). A grid of
  more groups than the fold reaches (2**31 - 1: the group id is an i32 in WGSL) is a LaunchError naming the limit;
  so is a hand-written shader's grid over the limit (its group ids are its own).
- Limits: a binding over max-storage-buffer-binding-size is a ValueError naming the limit; a zero extent runs
  nothing.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

import numpy as np
from devicekit.errors import LaunchError
from devicekit.ir.narrow import launch_check
from devicekit.per_index import programs_in
from devicekit.runtime import Program

from . import adapters
from .compiler import shader_module
from .renderer import GRID_FIELDS

_NP = {"i32": np.int32, "u32": np.uint32, "f32": np.float32}
_BY_DTYPE = {"int32": "i32", "uint32": "u32", "float32": "f32", "int64": "i32"}
CACHE = 64
FOLD_TOTAL = 2**31 - 1  # groups a folded grid may have: its flat group id is an i32 in the shader (gidx)


def fold(groups: tuple[int, ...], limit: int, local: tuple[int, ...] = ()) -> tuple[tuple[int, int, int],
                                                                                  tuple[int, ...]]:
    """(the workgroups to dispatch, the DkArgs grid words) for a grid of `groups` on an adapter that dispatches at
    most `limit` groups an axis. A grid within the limit is dispatched as it is (dk_fold 0); else its
    g0 * g1 * g2 groups are folded to nx x ny x nz, nx = limit, with nx * ny * nz - total < nx * ny extra groups,
    which the shader masks. Beyond FOLD_TOTAL groups (or limit**3), or an axis of more than FOLD_TOTAL invocations
    (groups x `local`: the global id is an i32 too; unfolded grids stay below it, 65535 x 256 at most): LaunchError
    naming the limit."""
    g = tuple(groups) + (1,) * (3 - len(groups))
    if all(x <= limit for x in g):
        return g, (0,) * len(GRID_FIELDS)
    total = g[0] * g[1] * g[2]
    nx = min(total, limit)
    ny = min(-(-total // nx), limit)
    nz = -(-total // (nx * ny))
    if total > FOLD_TOTAL or nz > limit:
        raise LaunchError(f"{groups} workgroups ({total} in all); WEBGPU folds a grid into at most {limit} groups an "
                          f"axis over 3 axes (max-compute-workgroups-per-dimension) and {FOLD_TOTAL} groups in all "
                          "(the group id is a 32-bit integer in WGSL): launch fewer groups")
    over = [i for i, (x, w) in enumerate(zip(g, local)) if x * int(w) > FOLD_TOTAL]
    if over:
        i = over[0]
        raise LaunchError(f"{groups} workgroups of {tuple(local)}: axis {i} has {g[i] * int(local[i])} invocations; "
                          f"WEBGPU computes the global id in 32 bits (at most {FOLD_TOTAL} an axis, the limit of a "
                          "folded grid): launch fewer groups")
    return (nx, ny, nz), (1, nx, ny, g[0], g[1], total)


class WebGPUProgram(Program):
    def __init__(self, compiled, ctx: adapters.Ctx):
        super().__init__(compiled)
        import wgpu
        self.ctx = ctx
        spec = compiled.spec
        src = bytes(compiled.lib).decode("utf-8", errors="replace")
        self._source = bool(spec.get_meta("from_source", False))
        nbuf = len(spec.params)
        if self._source:
            self._bindings = tuple(spec.get_meta("wgsl_bindings"))
            self._ubind = spec.get_meta("wgsl_uniform")
            self._wire = tuple(_BY_DTYPE[v.dtype.name] for v in spec.vars)
            self._units = None
        else:
            self._bindings = tuple(range(nbuf))
            self._ubind = nbuf
            self._wire = tuple(spec.get_meta("wgsl_args", ()))
            self._units = tuple(spec.get_meta("wgsl_units", ()))
        nfields = (0 if self._source else nbuf + 1 + len(GRID_FIELDS)) + len(self._wire)  # + dk_zero, grid
        self._ubytes = max(16, (4 * nfields + 15) & ~15)
        try:
            module = shader_module(ctx, src, repr(spec.name))
            u = wgpu.ShaderStage.COMPUTE
            t = wgpu.BufferBindingType  # generated shaders declare every buffer read_write; hand-written their own
            entries = [{"binding": b, "visibility": u, "buffer": {"type": t.storage if not self._source or p.writable
                                                                   else t.read_only_storage}}
                       for b, p in zip(self._bindings, spec.params)]
            if self._ubind is not None:
                entries.append({"binding": self._ubind, "visibility": u,
                                "buffer": {"type": wgpu.BufferBindingType.uniform}})
            if spec.get_meta("wgsl_wide", False):
                entries.append({"binding": nbuf + 1, "visibility": u, "buffer": {"type": t.storage}})
            self._layout = ctx.device.create_bind_group_layout(entries=entries)
            pl = ctx.device.create_pipeline_layout(bind_group_layouts=[self._layout])
            self._pipeline = ctx.device.create_compute_pipeline(layout=pl, compute={"module": module,
                                                                                    "entry_point": spec.entry})
        except Exception as e:  # noqa: BLE001 - anything the device refuses is a load failure, said here
            raise RuntimeError(f"{ctx.name}: cannot load the shader of {spec.name!r} (entry {spec.entry!r}): "
                               f"{type(e).__name__}: {e}") from None
        self._ubuf = (ctx.device.create_buffer(size=self._ubytes, usage=wgpu.BufferUsage.UNIFORM
                                               | wgpu.BufferUsage.COPY_DST) if self._ubind is not None else None)
        self._groups: OrderedDict = OrderedDict()
        self._wide = tuple(spec.get_meta("wgsl_wide", ()))  # int64 loads, widened 32-bit data: the flag at binding n + 1
        self._guards = tuple(spec.get_meta("narrow_guards", ()))  # int64 values proven to fit per launch (ir.narrow)
        self._proven: set = set()
        loops = spec.get_meta("loop_nest", ())
        self._trips = loops if ctx.loop_limit is not None and loops else None  # loops.iterations, per launch
        self._align = int(ctx.limits["min-storage-buffer-offset-alignment"])
        self._max_bind = int(ctx.limits["max-storage-buffer-binding-size"])
        self._max_groups = int(ctx.limits["max-compute-workgroups-per-dimension"])

    def _binding(self, h, j: int) -> tuple[Any, int, int, int]:
        """(buffer, bind offset, bind size, element offset) of handle h as param j."""
        if h.index != self.ctx.index:
            raise ValueError(f"{self.name}: buffer {j} lives on WEBGPU:{h.index}, the program on {self.ctx.name}")
        p = self.spec.params[j]
        if self._source:
            if h.offset % self._align:
                raise ValueError(f"{self.name}: param {p.name!r} is a view {h.offset} bytes into its buffer; a "
                                 f"hand-written WGSL shader binds views at offsets aligned to {self._align} bytes "
                                 "(min-storage-buffer-offset-alignment): copy the data to its own buffer")
            start, elem = h.offset, 0
        else:
            unit = self._units[j]
            start = h.offset - h.offset % self._align
            if (h.offset - start) % unit:
                raise ValueError(f"{self.name}: param {p.name!r} is a view {h.offset} bytes into its buffer, not a "
                                 f"whole number of {unit}-byte elements: WGSL arrays are typed")
            elem = (h.offset - start) // unit
        size = min(int(h.mem.size) - start, self._max_bind)
        if h.offset - start + h.nbytes > size:
            raise ValueError(f"{self.name}: param {p.name!r} spans {h.nbytes} bytes; this adapter binds at most "
                             f"{self._max_bind} bytes of a storage buffer (max-storage-buffer-binding-size)")
        return h.mem, start, size - size % 4, elem

    def _bind_group(self, binds: list, flag: Any = None) -> Any:
        key = tuple((b[0], b[1], b[2]) for b in binds)
        with self.ctx.lock:
            bg = self._groups.get(key)
            if bg is not None:
                self._groups.move_to_end(key)
                return bg
        entries = [{"binding": slot, "resource": {"buffer": b[0], "offset": b[1], "size": b[2]}}
                   for slot, b in zip(self._bindings, binds)]
        if self._ubuf is not None:
            entries.append({"binding": self._ubind, "resource": {"buffer": self._ubuf, "offset": 0,
                                                                  "size": self._ubytes}})
        if flag is not None:  # a bind group of its own: the flag buffer is the launch's
            entries.append({"binding": len(binds) + 1, "resource": {"buffer": flag, "offset": 0, "size": 16}})
            return self.ctx.device.create_bind_group(layout=self._layout, entries=entries)
        bg = self.ctx.device.create_bind_group(layout=self._layout, entries=entries)
        with self.ctx.lock:
            self._groups[key] = bg
            while len(self._groups) > CACHE:
                self._groups.popitem(last=False)
        return bg

    def _uniform(self, binds: list, vals: list, grid: tuple[int, ...] = ()) -> bytes:
        data = bytearray(self._ubytes)
        words = ([] if self._source else [np.int32(b[3]) for b in binds])
        words += [_NP[t](v) for t, v in zip(self._wire, vals)]
        if not self._source:  # dk_zero (always 0), then the grid words (fold)
            words += [np.uint32(0), *(np.uint32(x) for x in grid)]
        for i, w in enumerate(words):
            data[4 * i:4 * i + 4] = w.tobytes()
        return bytes(data)

    def _launch(self, handles: list, vals: list, var_vals: dict, global_size, local_size, wait: bool):
        groups = tuple(int(g) for g in (global_size or (1,)))
        if len(groups) > 3:
            raise ValueError(f"{self.name}: WebGPU dispatches 3 dimensions of workgroups, got {groups}")
        if self._source and any(g > self._max_groups for g in groups):
            raise LaunchError(f"{self.name}: {groups} workgroups; this adapter dispatches at most {self._max_groups} a "
                             "dimension (max-compute-workgroups-per-dimension), and a hand-written shader's grid "
                             "is not folded (its group ids are its own)")
        if any(g <= 0 for g in groups):
            dispatch, grid = groups, ()
        else:
            try:
                dispatch, grid = fold(groups, self._max_groups, tuple(local_size or self.spec.local_size or ()))
            except LaunchError as e:
                raise LaunchError(f"{self.name}: {e}") from None
        if self._source and local_size:
            declared = tuple(self.spec.get_meta("wgsl_workgroup_size"))
            got = tuple(int(x) for x in local_size) + (1,) * (3 - len(local_size))
            if got != declared:
                raise ValueError(f"{self.name}: the shader declares @workgroup_size{declared}; it was launched with "
                                 f"local size {tuple(local_size)}: pass local_size={declared} or leave it out")
        if self._guards or self._trips is not None:
            key = tuple(sorted(var_vals.items()))
            if key not in self._proven:
                launch_check(self._guards, var_vals, "WEBGPU", self.name, self.spec.get_meta("narrow_fit_lo", -2**31))
                self._check_trips(var_vals)
                if len(self._proven) > 256:
                    self._proven.clear()
                self._proven.add(key)
        binds = [self._binding(h, j) for j, h in enumerate(handles)]
        if any(g <= 0 for g in groups):
            return 0.0 if wait else None
        dev = self.ctx.device
        flag = None
        if self._wide:
            import wgpu
            flag = dev.create_buffer(size=16, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
        bg = self._bind_group(binds, flag)
        enc = dev.create_command_encoder()
        cp = enc.begin_compute_pass()
        cp.set_pipeline(self._pipeline)
        cp.set_bind_group(0, bg)
        cp.dispatch_workgroups(*dispatch)
        cp.end()
        t0 = time.perf_counter()
        with self.ctx.lock:  # the uniform write must meet its own dispatch on the queue
            if self._ubuf is not None:
                dev.queue.write_buffer(self._ubuf, 0, self._uniform(binds, vals, grid))
            dev.queue.submit([enc.finish()])
        if flag is not None:
            self._check_wide(flag, handles)
        if not wait:
            return None
        self.ctx.wait()
        return time.perf_counter() - t0

    def _check_trips(self, var_vals: dict) -> None:
        """A launch whose invocations may loop more often than the driver lets them (adapters.Ctx.loop_limit) is a
        DataRangeError (a LaunchError) naming both: the driver would stop the loops early and the results would be
        wrong. A documented limit of the adapter for these vars, not a bug: the fuzzer counts it as unsupported
        (seed 60065: 65,536 iterations of one invocation)."""
        if self._trips is None:
            return
        from .loops import iterations
        hi = iterations(self._trips, var_vals, self.ctx.loop_limit)
        if hi > self.ctx.loop_limit:
            from devicekit.errors import DataRangeError
            raise DataRangeError(f"{self.name}: one invocation may run {hi} loop iterations with {var_vals}; "
                                 f"{self.ctx.adapter.info.get('device', '?')} stops an invocation's loops after "
                                 f"{self.ctx.loop_limit} in all (Mesa's llvmpipe loop limiter) and would return "
                                 "wrong results: launch smaller sizes, or run it on a GPU adapter")

    def _read(self, buf: Any, offset: int, size: int) -> bytes:
        import wgpu
        dev = self.ctx.device
        staging = dev.create_buffer(size=size, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        enc = dev.create_command_encoder()
        enc.copy_buffer_to_buffer(buf, offset, staging, 0, size)
        dev.queue.submit([enc.finish()])
        staging.map_sync(wgpu.MapMode.READ)
        data = bytes(staging.read_mapped())
        staging.unmap()
        return data

    def _check_wide(self, flag: Any, handles: list) -> None:
        """The int64 load check (renderer: dk_ld64): a value outside int32 was read as int32's extreme of its sign,
        which no bindable buffer's index reaches. A bounds check that failed on it is the launch's answer
        (`Program.execute` raises its IndexError, naming the param; the index it reports is the saturated one);
        otherwise a DataRangeError (a ValueError), since arithmetic on the value was proven for int32 only."""
        if self._read(flag, 0, 16)[:4] == bytes(4):
            return
        checks = self.spec.checks
        if checks is not None:
            h = handles[-1]  # the bounds-check record: (failed, index) int64 pairs per site
            record = np.frombuffer(self._read(h.mem, h.offset - h.offset % 4, (h.nbytes + 3) & ~3), np.int64)
            if any(record[2 * k] for k in range(len(checks.sites))):
                return
        from devicekit.errors import DataRangeError
        raise DataRangeError(f"{self.name}: a 64-bit integer value from {', '.join(self._wide)} is outside int32: WEBGPU "
                         "computes index arithmetic in 32 bits (WGSL has no 64-bit integers), so the results of "
                         "this launch are not valid")


factory = programs_in(adapters.get, WebGPUProgram)  # RuntimeFactory: WebGPUPrograms on WEBGPU:<spec.index>'s device
