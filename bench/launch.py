#!/usr/bin/env python3
"""Launch overhead on the CPU device: what the core's one launch path costs above the native call (issue targets in
brackets). Every figure is a best-of-5 mean over many launches of a*b+c at n=16 (one thread, the kernel itself
~20 ns), so it is the Python above the kernel that is measured.

    python bench/launch.py            # prints the table
    python bench/launch.py --quick    # fewer launches
    python bench/launch.py --cpu      # this thread's CPU time instead of wall time (a machine shared with others)
    python bench/launch.py --cpu --device OPENCL   # another device: execute vs its backend's `_launch` vs its
                                                   # driver's own calls (OPENCL: set_args + enqueue), un-waited

Rows:
- execute, a var, alternating two sets of Buffers            [<= 1.0 us]
- execute, the same arguments again                           [<= 0.5 us]
- execute, 40 sets of Buffers in turn: each launch a miss of the launch cache (fast check, native call, store)
- execute of the seed path's Program (runtime(compile(render(k))))  [within 1.3x of Device.compile's]
- dk.run overhead at n=16: dk.run minus execute of resident Buffers [<= 5 us]
- Plan.run per launch, fixed Buffers / rebound Buffers        [rebound within 50 ns of fixed]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

CLOCK = time.perf_counter


def best(fn, n: int, reps: int = 5) -> float:
    """Best mean seconds per call of `fn` run `n` times, over `reps` repetitions (CLOCK: wall time, or with --cpu
    this thread's CPU time, which a machine shared with other work inflates far less: every case here runs on the
    calling thread)."""
    out = float("inf")
    for _ in range(reps):
        t0 = CLOCK()
        fn(n)
        out = min(out, (CLOCK() - t0) / n)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer launches")
    ap.add_argument("--cpu", action="store_true", help="time with this thread's CPU time (a loaded machine)")
    ap.add_argument("--device", default="CPU", help="a device other than CPU: the overhead above its driver")
    ap.add_argument("--cuda-fake", action="store_true", help="CUDA:0 on the plugin tests' fake driver (NVRTC's real "
                    "cubins, kernels run by a host emulation built with g++): CUDA's overhead without a GPU")
    args = ap.parse_args()
    if args.cuda_fake:
        args.device = "CUDA"
    global CLOCK
    if args.cpu:
        CLOCK = time.thread_time
    n = 5000 if args.quick else 50000

    import devicekit as dk
    from devicekit import kernels
    from devicekit.ir import dtypes

    if args.device.upper() != "CPU":
        return other_device(args, n)
    dev = dk.device("CPU")
    k = kernels.elementwise("a * b + c", name="bench_launch_fma")
    prog = dev.compile(k)
    prog.upgrade()
    m = 16
    sets = [[dk.Buffer(dev, m, dtypes.float32).copyin(np.ones(m, np.float32)) for _ in range(4)] for _ in range(2)]
    a, b = sets

    def alternating(n):
        ex = prog.execute
        for _ in range(n // 2):
            ex(a, [m])
            ex(b, [m])

    def same(n):
        ex = prog.execute
        for _ in range(n):
            ex(a, [m])

    many = [[dk.Buffer(dev, m, dtypes.float32).copyin(np.ones(m, np.float32)) for _ in range(4)] for _ in range(40)]

    def rotating(n):  # more sets than a Program's launch cache keeps: every launch is checked (a miss)
        ex = prog.execute
        for _ in range(n // 40):
            for s in many:
                ex(s, [m])

    r, c = dev.renderer, dev.compiler
    seed = dev.runtime(c.compile(r.render(k)))

    def seed_alternating(n):
        ex = seed.execute
        for _ in range(n // 2):
            ex(a, [m])
            ex(b, [m])

    def seed_same(n):
        ex = seed.execute
        for _ in range(n):
            ex(a, [m])

    arrs = {"a": np.ones(m, np.float32), "b": np.ones(m, np.float32), "c": np.ones(m, np.float32)}

    def run_numpy(n):
        for _ in range(n):
            dk.run(prog, a=arrs["a"], b=arrs["b"], c=arrs["c"], n=m)

    def run_resident(n):
        for _ in range(n):
            dk.run(prog, a=a[0], b=a[1], c=a[2], out=a[3], n=m)

    plan_n = 1000
    fixed = dk.Plan(dev)
    for _ in range(plan_n):
        fixed.add(prog, a=a[0], b=a[1], c=a[2], out=a[3], n=m)
    fixed.run()
    rebound = None
    try:
        rebound = dk.Plan(dev)
        for _ in range(plan_n):
            rebound.add(prog, a="x", b=a[1], c=a[2], out="y", n=m)
        rebound.run(x=a[0], y=a[3])
        rebound.run(x=b[0], y=b[3])
    except (TypeError, ValueError):
        rebound = None  # a devicekit without rebound plans

    def plan_fixed(n):
        for _ in range(n):
            fixed.run()

    def plan_rebound(n):
        for _ in range(n // 2):
            rebound.run(x=a[0], y=a[3])
            rebound.run(x=b[0], y=b[3])

    rows = []
    t_alt = best(alternating, n)
    t_same = best(same, n)
    t_seed_alt = best(seed_alternating, n)
    t_seed_same = best(seed_same, n)
    t_miss = best(rotating, n)
    direct = getattr(prog, "_direct", None), getattr(prog, "_long", None)
    if direct[0] is not None:  # the misses through the generic argument list (the CPU's direct call off)
        prog._direct, prog._long = None, None
        t_generic = best(rotating, n)
        prog._direct, prog._long = direct
        t_miss = min(t_miss, best(rotating, n))
    rows.append(("execute, var n, alternating Buffers", t_alt, "<= 1.0 us"))
    rows.append(("execute, same arguments", t_same, "<= 0.5 us"))
    from devicekit.runtime import CACHED_LAUNCHES
    rows.append(("execute, 40 sets in turn (launch cache misses)", t_miss, f"the cache keeps {CACHED_LAUNCHES}"))
    if direct[0] is not None:
        rows.append(("  the misses without the CPU's direct call", t_generic, f"+{(t_generic - t_miss) * 1e6:.2f} us"))
    rows.append(("seed-path Program, alternating Buffers", t_seed_alt, f"{t_seed_alt / t_alt:.2f}x (<= 1.3x)"))
    rows.append(("seed-path Program, same arguments", t_seed_same, f"{t_seed_same / t_same:.2f}x (<= 1.3x)"))
    t_run = best(run_numpy, n // 10)
    t_res = best(run_resident, n // 10)
    rows.append(("dk.run, numpy arrays, n=16", t_run, "copy in, launch, copy out"))
    rows.append(("dk.run, resident Buffers, n=16", t_res, ""))
    rows.append(("dk.run overhead (resident dk.run - execute)", t_res - t_same, "<= 5 us"))
    t_fix = best(plan_fixed, 20) / plan_n
    rows.append(("Plan.run per launch, fixed Buffers", t_fix, ""))
    if rebound is not None:
        t_reb = best(plan_rebound, 20) / plan_n
        rows.append(("Plan.run per launch, rebound Buffers", t_reb, f"+{(t_reb - t_fix) * 1e9:.0f} ns (<= 50 ns)"))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# devicekit launch overhead, {platform.machine()}, python {sys.version.split()[0]}, "
          f"load {load:.2f}, {os.cpu_count()} cpus, {'thread CPU time' if args.cpu else 'wall time'}")
    print(f"{'case':52} {'us':>9}  note")
    for name, t, note in rows:
        print(f"{name:52} {t * 1e6:9.3f}  {note}")
    return 0


def other_device(args, n: int) -> int:
    """execute (alternating Buffers, same arguments), the backend's `_launch` with its arguments prepared, and for
    OPENCL the driver's own calls (pyopencl set_args + enqueue_nd_range_kernel): what the core and the plugin add
    above the driver. Launches are not waited for; the device is synchronized after each timed batch."""
    import devicekit as dk
    from devicekit import kernels
    from devicekit.ir import dtypes
    k = kernels.elementwise("a * b + c", name="bench_launch_fma")
    dev = _fake_cuda(k) if args.cuda_fake else dk.device(args.device)
    prog = dev.compile(k)
    m = 16
    sets = [[dk.Buffer(dev, m, dtypes.float32).copyin(np.ones(m, np.float32)) for _ in range(4)] for _ in range(2)]
    a, b = sets
    n = min(n, 20000)

    def synced(fn):
        def run(k):
            fn(k)
            dev.synchronize()
        return run

    def alternating(k):
        ex = prog.execute
        for _ in range(k // 2):
            ex(a, [m])
            ex(b, [m])

    def same(k):
        ex = prog.execute
        for _ in range(k):
            ex(a, [m])

    var_vals = prog.check(a, [m])
    g, loc = prog.spec.launch_dims(var_vals)
    handles = [x.handle for x in a]

    def backend(k):
        launch = prog._launch
        for _ in range(k):
            launch(handles, [m], var_vals, g, loc, False)

    rows = [("execute, var n, alternating Buffers", best(synced(alternating), n), "<= 2 us above the driver"),
            ("execute, same arguments", best(synced(same), n), ""),
            ("backend _launch, prepared arguments", best(synced(backend), n), "")]
    if args.device.upper().startswith("OPENCL"):
        import pyopencl as cl
        kern = cl.Kernel(prog._prg, prog.spec.entry)  # its own: the program's kernel objects remember their args
        cl_args = [h.mem for h in handles] + [np.int64(m)]
        if prog._view_args:
            cl_args = [x for h in handles for x in (h.mem, np.uint64(h.offset))] + [np.int64(m)]
        groups, local, _ = prog._sizes(g, loc)  # work_sizes.CheckedSizes: groups, local size, work-items
        glob = tuple(x * y for x, y in zip(groups, local))
        queue = prog.ctx.queue
        kern.set_args(*cl_args)

        def driver(k):  # the driver's floor: one enqueue of a kernel whose arguments are set
            for _ in range(k):
                cl.enqueue_nd_range_kernel(queue, kern, glob, local)

        def driver_set(k):  # what a launch with new arguments costs the driver (PoCL: ~6 us a by-value argument)
            for _ in range(k):
                kern.set_args(*cl_args)
                cl.enqueue_nd_range_kernel(queue, kern, glob, local)
        t_drv = best(synced(driver), n)
        rows.append(("driver: enqueue_nd_range_kernel", t_drv, ""))
        rows.append(("driver: set_args + enqueue_nd_range_kernel", best(synced(driver_set), n // 4), ""))
        rows.append(("execute (alternating) above the driver", rows[0][1] - t_drv, "<= 2 us"))
        rows.append(("execute (same) above the driver", rows[1][1] - t_drv, "<= 2 us"))
    elif args.device.upper().startswith("CUDA"):  # the fake driver (--cuda-fake): its launch runs the kernel
        import math
        fn, ctx = prog.function, prog.ctx
        grid, block = (tuple(g) + (1, 1, 1))[:3], (tuple(loc or (1,)) + (1, 1, 1))[:3]
        cu_args = [int(h) for h in handles] + [m]
        assert math.prod(grid) > 0

        def driver(k):  # the driver's own call, in its context (pycuda's push/pop per call, as the plugin does)
            for _ in range(k):
                with ctx:
                    fn.prepared_async_call(grid, block, ctx.stream, *cu_args, shared_size=0)
        t_drv = best(synced(driver), n)
        rows.append(("driver: prepared_async_call (+ context push/pop)", t_drv, ""))
        rows.append(("execute (alternating) above the driver", rows[0][1] - t_drv, "<= 2 us"))
        rows.append(("execute (same) above the driver", rows[1][1] - t_drv, "<= 2 us"))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# devicekit launch overhead on {dev.spec}, load {load:.2f}, "
          f"{'thread CPU time' if args.cpu else 'wall time'}")
    for name, t, note in rows:
        print(f"{name:52} {t * 1e6:9.3f}  {note}")
    return 0


def _fake_cuda(kernel):
    """CUDA:0 built from the plugin's own factories on plugins/cuda/tests' fake pycuda (as its tests do)."""
    import pytest
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plugins", "cuda", "tests")
    sys.path.insert(0, here)
    import cuda_fake_pycuda as fake
    from cuda_host_emu import host_compile_many
    from devicekit.spec import DeviceSpec
    from devicekit.targets import Device
    from devicekit_cuda import context, plugin
    mp = pytest.MonkeyPatch()
    fake.install(mp)
    mp.setattr(context, "_contexts", {})
    mp.setattr(fake, "KERNELS", host_compile_many([kernel]))
    mp.setenv("DEVICEKIT_CUDA_ARCH", "sm_90")
    fake.calls.clear()
    spec = DeviceSpec("CUDA", 0)
    return Device(spec, *plugin.DEVICEKIT_BACKEND.pieces(spec, "nvrtc"))


if __name__ == "__main__":
    sys.exit(main())
