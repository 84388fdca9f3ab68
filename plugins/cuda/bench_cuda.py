"""A small CUDA benchmark for devicekit-cuda (needs a GPU, its driver and pycuda; run by gpu_check.sh).

  elementwise  out = a + b (float32): GB/s moved, against the device's peak memory bandwidth
  sum          a two-stage block reduction (shared memory + barrier): GB/s read, against peak
  matmul       naive float32 matmul (one thread per output): GFLOP/s
  launch       the cost of one launch: async (queue only) and timed (wait=True round trip)

Usage: python plugins/cuda/bench_cuda.py [--device CUDA] [--size-mb 256] [--matmul 2048] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import devicekit as dk
import numpy as np
from devicekit import ir
from devicekit.ir.dtypes import dtypes

PEAK_GBS = {"H200": 4800.0, "H100 SXM": 3350.0, "H100 PCIe": 2000.0, "H100": 3350.0, "A100-SXM4-80GB": 2039.0,
            "A100": 1555.0, "L40S": 864.0, "A10": 600.0, "RTX 4090": 1008.0, "RTX 3090": 936.0, "T4": 320.0,
            "V100": 900.0}


def peak_bandwidth_gbs(ctx) -> tuple[float | None, str]:
    cuda = ctx.cuda
    try:
        clock_khz = ctx.device.get_attribute(cuda.device_attribute.MEMORY_CLOCK_RATE)
        bus_bits = ctx.device.get_attribute(cuda.device_attribute.GLOBAL_MEMORY_BUS_WIDTH)
        if clock_khz and bus_bits:
            return 2.0 * clock_khz * 1e3 * bus_bits / 8 / 1e9, "device attributes"
    except Exception:  # noqa: BLE001, S110 - attribute removed in newer drivers
        pass
    for key, gbs in PEAK_GBS.items():
        if key in ctx.name:
            return gbs, f"datasheet ({key})"
    return None, "unknown"


def timed(prog, bufs, vals, reps=20) -> float:
    prog.execute(bufs, vals, wait=True)  # warm-up
    return statistics.median(prog.execute(bufs, vals, wait=True) for _ in range(reps))


def add_kernel():
    k = ir.KernelBuilder("bench_add")
    n = k.var("n", lo=1, hi=2**40)
    a, b = k.param("a", dtypes.float32, size=n), k.param("b", dtypes.float32, size=n)
    o = k.param("o", dtypes.float32, size=n, writable=True)
    i = k.range(n, kind="global")
    o[i] = a[i] + b[i]
    return k.build()


def block_sum_kernel(threads=256):
    """Stage 1: block g sums a[g*threads + t + s*stride] over s (stride = blocks*threads), then the block's
    partial sums meet in shared memory; thread 0 writes out[g]."""
    k = ir.KernelBuilder("bench_block_sum")
    nb = k.var("nb", lo=1, hi=2**31 - 1)
    per = k.var("per", lo=1, hi=2**31 - 1)  # elements per thread
    a = k.param("a", dtypes.float32, size=nb * threads * per)
    o = k.param("o", dtypes.float32, size=nb, writable=True)
    smem = k.local("part", dtypes.float32, threads)
    g, t = k.range(nb, kind="global"), k.range(threads, kind="local")
    s = k.range(per, kind="reduce")
    smem[t] = a[s * (nb * threads) + g * threads + t].sum(s)
    k.barrier()
    r = k.range(threads, kind="reduce")
    o.store(g, smem[r].sum(r), gate=t.eq(0))
    return k.build()


def matmul_kernel():
    k = ir.KernelBuilder("bench_matmul")
    m, n, kk = k.var("m", lo=1, hi=65535), k.var("n", lo=1, hi=1 << 16), k.var("k", lo=1, hi=1 << 16)
    a = k.param("a", dtypes.float32, size=m * kk)
    b = k.param("b", dtypes.float32, size=kk * n)
    c = k.param("c", dtypes.float32, size=m * n, writable=True)
    j = k.range(n, kind="global")  # created first: maps to threadIdx.x, so loads of b and stores of c coalesce
    i = k.range(m, kind="global")
    r = k.range(kk, kind="reduce")
    c[i * n + j] = (a[i * kk + r] * b[r * n + j]).sum(r)
    return k.build()


def tiny_kernel():
    k = ir.KernelBuilder("bench_tiny")
    o = k.param("o", dtypes.float32, size=1, writable=True)
    i = k.range(1, kind="global")
    o[i] = i.cast(dtypes.float32)
    return k.build()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="CUDA")
    ap.add_argument("--size-mb", type=int, default=256, help="bytes per input array, MiB")
    ap.add_argument("--matmul", type=int, default=2048)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    dev = dk.device(args.device)
    from devicekit_cuda.context import get
    ctx = get(dev.spec.index)
    peak, peak_src = peak_bandwidth_gbs(ctx)
    res: dict = {"device": str(dev.spec), "name": ctx.name, "arch": ctx.arch, "compiler": dev.compiler.identity(),
                 "peak_gbs": peak, "peak_source": peak_src}
    print(f"{dev.spec}: {ctx.name} ({ctx.arch}); peak memory bandwidth "
          f"{f'{peak:.0f} GB/s' if peak else 'unknown'} ({peak_src})")
    print(f"compiler: {dev.compiler.identity()}")

    def pct(gbs):
        return f" ({100 * gbs / peak:.0f}% of peak)" if peak else ""

    # elementwise
    n = args.size_mb * (1 << 20) // 4
    a = dk.Buffer(dev, n, dtypes.float32).copyin(np.random.default_rng(0).random(n, dtype=np.float32))
    b = dk.Buffer(dev, n, dtypes.float32).copyin(np.ones(n, np.float32))
    o = dk.Buffer(dev, n, dtypes.float32)
    prog = dev.compile(add_kernel())
    t = timed(prog, [a, b, o], [n])
    gbs = 3 * n * 4 / t / 1e9
    res["elementwise"] = {"elements": n, "seconds": t, "gbs": gbs}
    print(f"elementwise add  {n:>11} x f32  {t * 1e3:8.3f} ms  {gbs:8.1f} GB/s{pct(gbs)}")
    np.testing.assert_allclose(o.numpy()[:1000], a.numpy()[:1000] + 1.0, rtol=1e-6)

    # sum
    threads, nb = 256, 4 * 132
    per = max(1, n // (nb * threads))
    used = nb * threads * per
    ssum = dev.compile(block_sum_kernel(threads))
    part = dk.Buffer(dev, nb, dtypes.float32)
    t = timed(ssum, [a, part], [nb, per])
    gbs = used * 4 / t / 1e9
    total = float(part.numpy().astype(np.float64).sum())
    want = float(a.numpy()[:used].astype(np.float64).sum())
    res["sum"] = {"elements": used, "seconds": t, "gbs": gbs, "rel_err": abs(total - want) / want}
    print(f"sum (2-stage)    {used:>11} x f32  {t * 1e3:8.3f} ms  {gbs:8.1f} GB/s{pct(gbs)}  "
          f"rel.err {abs(total - want) / want:.1e}")

    # matmul
    m = args.matmul
    rng = np.random.default_rng(1)
    am, bm = rng.standard_normal((m, m), dtype=np.float32), rng.standard_normal((m, m), dtype=np.float32)
    A = dk.Buffer(dev, m * m, dtypes.float32).copyin(am)
    B = dk.Buffer(dev, m * m, dtypes.float32).copyin(bm)
    C = dk.Buffer(dev, m * m, dtypes.float32)
    mm = dev.compile(matmul_kernel())
    t = timed(mm, [A, B, C], [m, m, m], reps=5)
    gflops = 2 * m**3 / t / 1e9
    err = float(np.abs(C.numpy().reshape(m, m)[:8] - am[:8] @ bm).max())
    res["matmul"] = {"n": m, "seconds": t, "gflops": gflops, "max_abs_err_rows0_7": err}
    print(f"matmul naive     {m}x{m}x{m}  {t * 1e3:8.3f} ms  {gflops:8.1f} GFLOP/s  max err {err:.1e}")

    # launch overhead
    tiny = dev.compile(tiny_kernel())
    ob = dk.Buffer(dev, 1, dtypes.float32)
    tiny.execute([ob], [], wait=True)
    reps = 2000
    t0 = time.perf_counter()
    for _ in range(reps):
        tiny.execute([ob], [])
    dev.synchronize()
    async_us = (time.perf_counter() - t0) / reps * 1e6
    t0 = time.perf_counter()
    for _ in range(200):
        tiny.execute([ob], [], wait=True)
    wait_us = (time.perf_counter() - t0) / 200 * 1e6
    gpu_us = statistics.median(tiny.execute([ob], [], wait=True) for _ in range(50)) * 1e6
    res["launch"] = {"async_us": async_us, "timed_roundtrip_us": wait_us, "event_us": gpu_us}
    print(f"launch overhead  async {async_us:6.1f} us/launch   timed round trip {wait_us:6.1f} us   "
          f"event-measured {gpu_us:6.1f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
