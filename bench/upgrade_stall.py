#!/usr/bin/env python3
"""The stall of the swap to the final build (tiers): a training-like step of 20 new elementwise kernels (n=1000, each
on its quick O0 build), launched once each per step for 48 steps; all of them reach their 32nd launch in the same step.
Printed per mode: the worst single launch in this thread's CPU time (what the launching thread itself spent: a build
made on it counts, the machine's other work does not) and in wall time (on a loaded machine the noise floor, mode
`none`, is tens of ms) from the third step on, how many launches took over 5 ms wall, the worst step from the third on (wall), and the median step. Modes, each with its own compile cache in a temp dir (so every final build is compiled, never read):

- sync:       the old rule (the final O3 build made on the launching thread at the 32nd launch)
- background: the upgrade thread builds it (devicekit_cpu/upgrade.py); the launch never waits for it
- none:       DEVICEKIT_TIERS=0 (every kernel on its final build from the start): the machine's own noise floor

Steps go on past 48 until every kernel runs its final build (at most 10 s); the swap is done when `adopted` is 20/20.

    python bench/upgrade_stall.py            # every mode (a new process each)
    python bench/upgrade_stall.py --mode background
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

KERNELS, STEPS, N = 20, 48, 1000


def run(mode: str) -> dict:
    import devicekit as dk
    import numpy as np
    from devicekit import kernels
    from devicekit.compile.cache import CompileCache
    from devicekit.targets import Device
    from devicekit_cpu.llvm_compiler import LLVMCompiler
    from devicekit_cpu.upgrade import QuickTier

    if mode == "sync":
        QuickTier.start = QuickTier.run  # build on the launching thread, as before
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
    worst = worst_cpu = 0.0
    over = 0
    steps: list[float] = []
    t_end = time.perf_counter() + 10.0
    while len(steps) < STEPS or (time.perf_counter() < t_end and any(p.tier == "quick" for p in progs)):
        t_step = time.perf_counter()
        for p, o in zip(progs, outs):
            c0, t0 = time.thread_time(), time.perf_counter()
            p.execute([*bufs, o], [N], wait=True)
            if len(steps) >= 2:  # the first steps pay one-time costs (the replay's own compile, once per process)
                wall = time.perf_counter() - t0
                worst, over = max(worst, wall), over + (wall > 0.005)
                worst_cpu = max(worst_cpu, time.thread_time() - c0)
        steps.append(time.perf_counter() - t_step)
    finals = sum(p.tier == "final" for p in progs)
    return {"worst_launch_ms": worst * 1e3, "worst_cpu_ms": worst_cpu * 1e3, "over": over, "worst_step_ms": max(steps[2:]) * 1e3,
            "median_step_ms": statistics.median(steps) * 1e3, "final_after": finals, "steps": len(steps)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["none", "sync", "background"])
    args = ap.parse_args()
    if args.mode:
        r = run(args.mode)
        print(f"{args.mode:<11} worst launch {r['worst_cpu_ms']:7.2f} ms CPU, {r['worst_launch_ms']:7.2f} ms wall, {r['over']:3d} over 5 ms wall   worst step {r['worst_step_ms']:8.2f} ms"
              f"   median step {r['median_step_ms']:6.3f} ms   adopted "
              f"{r['final_after']}/{KERNELS} after {r['steps']} steps")
        return 0
    print(f"{KERNELS} new kernels (n={N}) x {STEPS} steps; load {os.getloadavg()[0]:.1f}", flush=True)
    for mode in ("none", "sync", "background"):
        subprocess.run([sys.executable, __file__, "--mode", mode], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
