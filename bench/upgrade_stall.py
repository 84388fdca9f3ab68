#!/usr/bin/env python3
"""The stall of the swap to the final build (tiers): a training-like step of 20 new elementwise kernels (n=1000, each
on its quick O0 build), launched once each per step, STEPS steps (~100,000 launches); all of them reach their 32nd
launch in the same step, and steps go on past STEPS until every kernel runs its final build (at most 20 s more).
Every mode runs the same launches, so `none` is the machine's own noise floor for the same window.

Printed per mode, from the third step on (the first pay one-time costs): launches, the worst launch in wall time and
in this thread's CPU time (a build made on the launching thread counts, the machine's other work does not), p99.9
and median wall, how many launches took over 5 ms wall and of those how many the OS preempted (an involuntary
context switch of this thread during the launch: the machine's load; the others waited voluntarily: for the GIL or
a lock), the build window (the 32nd launch to the last adoption), the slowest `dev.compile` of NEW new kernels made
while the final builds run (their quick O0 build takes llvm_jit.LOCK, which an O3 build in this process holds for
~20 ms; mode `none` compiles them at O3) and the load average. Modes, each with its own
compile cache in a temp dir (so every final build is compiled, never read), each in a new process:

- none:       DEVICEKIT_TIERS=0 (every kernel on its final build from the start): the noise floor
- sync:       the old rule (the final O3 build made on the launching thread at the 32nd launch)
- thread:     the upgrade thread compiles in this process (compile_worker.enabled = False)
- background: the upgrade thread has the compile worker process compile (devicekit_cpu/compile_worker.py)

    python bench/upgrade_stall.py            # every mode
    python bench/upgrade_stall.py --mode background --mode none
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

KERNELS, STEPS, N, NEW = 20, 5000, 1000, 5
MODES = ("none", "sync", "thread", "background")


def run(mode: str, steps: int = STEPS, nice: int | None = None) -> dict:
    import devicekit as dk
    import numpy as np
    from devicekit import kernels
    from devicekit.compile.cache import CompileCache
    from devicekit.targets import Device
    from devicekit_cpu import compile_worker
    from devicekit_cpu.llvm_compiler import LLVMCompiler
    from devicekit_cpu.upgrade import QuickTier

    if mode == "sync":
        QuickTier.start = QuickTier.run  # build on the launching thread, as before
    if mode == "thread":
        compile_worker.enabled = False
    if nice is not None:
        compile_worker.NICE = nice
    if mode == "none":
        os.environ["DEVICEKIT_TIERS"] = "0"
    cpu = dk.device("CPU")
    comp = LLVMCompiler()
    comp.cache = CompileCache(tempfile.mkdtemp(prefix="dk-upgrade-stall-"), disk=False)
    dev = Device("CPU", cpu.allocator, cpu.pair("llvm")[0], comp, cpu.runtime)
    progs = [dev.compile(kernels.elementwise(f"a * b + c * {i + 1}.25 - 0.5", name=f"stall_{i}"))
             for i in range(KERNELS)]
    assert all(p.tier == ("final" if mode == "none" else "quick") for p in progs)
    rng = np.random.default_rng(0)
    bufs = [dk.Buffer(dev, N, "float32").copyin(rng.standard_normal(N).astype(np.float32)) for _ in range(3)]
    outs = [dk.Buffer(dev, N, "float32") for _ in progs]
    walls: list[float] = []
    worst_cpu = 0.0
    over = preempted = 0
    usage, THREAD = resource.getrusage, getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)
    t_first = t_last = None
    load0 = os.getloadavg()[0]
    t_end = time.perf_counter() + 20.0
    step = 0
    new_ms: list[float] = []
    while step < steps or (time.perf_counter() < t_end and any(p.tier == "quick" for p in progs)):
        if step == 31 and mode != "none":  # every kernel's 32nd launch: the final builds start
            t_first = time.perf_counter()
        if 33 <= step < 33 + 2 * NEW and step % 2:  # a new kernel while they run: its quick build's compile
            t0 = time.perf_counter()
            dev.compile(kernels.elementwise(f"a * c - b * {step}.5", name=f"stall_new_{step}"))
            new_ms.append((time.perf_counter() - t0) * 1e3)
        for p, o in zip(progs, outs):
            quick = p.tier == "quick"
            r0, c0, t0 = usage(THREAD).ru_nivcsw, time.thread_time(), time.perf_counter()
            p.execute([*bufs, o], [N], wait=True)
            wall = time.perf_counter() - t0
            if step >= 2:
                walls.append(wall)
                worst_cpu = max(worst_cpu, time.thread_time() - c0)
                if wall > 0.005:
                    over += 1
                    preempted += usage(THREAD).ru_nivcsw > r0
            if quick and p.tier == "final":
                t_last = time.perf_counter()
        step += 1
    walls.sort()
    return {"launches": len(walls), "worst_ms": walls[-1] * 1e3, "worst_cpu_ms": worst_cpu * 1e3,
            "p999_ms": walls[int(len(walls) * 0.999)] * 1e3, "median_us": statistics.median(walls) * 1e6,
            "over": over, "preempted": preempted, "final": sum(p.tier == "final" for p in progs),
            "window_ms": (t_last - t_first) * 1e3 if t_first and t_last else 0.0,
            "load": (load0, os.getloadavg()[0]), "new_ms": max(new_ms), "new_all": new_ms, "worker_failed": compile_worker.reason()}


def line(mode: str, r: dict) -> str:
    return (f"{mode:<11} {r['launches']:6d} launches  worst {r['worst_ms']:6.2f} ms wall {r['worst_cpu_ms']:5.2f} ms CPU"
            f"  p99.9 {r['p999_ms']:5.2f} ms  median {r['median_us']:5.1f} us  over 5 ms {r['over']:3d}"
            f" ({r['preempted']} preempted; {r['over'] * 1e5 / r['launches']:.0f} per 100k)  adopted {r['final']}/{KERNELS} in {r['window_ms']:6.0f} ms"
            f"  new kernel {r['new_ms']:5.1f} ms  load {r['load'][0]:.1f}-{r['load'][1]:.1f}"
            + (f"  [{r['worker_failed']}]" if r["worker_failed"] else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=MODES, action="append", help="run these modes (default: all)")
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--nice", type=int, help="the compile worker's niceness (default: compile_worker.NICE)")
    ap.add_argument("--here", action="store_true", help="run the one --mode in this process")
    args = ap.parse_args()
    if args.here:
        print(line(args.mode[0], run(args.mode[0], args.steps, args.nice)), flush=True)
        return 0
    print(f"{KERNELS} new kernels (n={N}) x {args.steps} steps; load {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs", flush=True)
    for mode in args.mode or MODES:
        nice = [] if args.nice is None else ["--nice", str(args.nice)]
        subprocess.run([sys.executable, __file__, "--here", "--mode", mode, "--steps", str(args.steps), *nice],
                       check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
