#!/usr/bin/env python3
"""devicekit CPU (llvm pair) vs its peers (numpy, numba, torch eager, torch.compile, jax.jit, tinygrad), and the same
kernels on OPENCL and WEBGPU where they run, in one run. See bench/README.md (scripts/bench-setup.sh installs the peers).

    python bench/run.py                  # full run, prints the table
    python bench/run.py --quick          # fewer repetitions
    python bench/run.py --peers numba,torch,jax.jit   # a subset of the peers (default: all; a missing one's column
                                                       # says "not installed")
    python bench/run.py --update-readme  # also writes the table into bench/README.md
    python bench/run.py --rounds 3       # each row's columns timed 3 times in turn, each one's best kept (default 2)
    python bench/run.py --only fused,sum # a subset: fused sum naive-sum matmul matmul-default naive searched softmax gather
                                         # gather-unchecked mlp jacobi compile interop wavefront launch import
                                         # bandwidth (with fused or jacobi: the copy bandwidth and the row's
                                         # fraction of it) peak (with matmul or mlp: the FMA peak and the
                                         # row's fraction of it)
"""

from __future__ import annotations

import os
import sys

# numpy's BLAS must use the whole machine: these two pin OpenBLAS to a core type / cache size on some hosts
for _v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_v, None)
# tinygrad's CPU device runs $CC (default clang); Debian's clang-19 package installs only clang-19
if "CC" not in os.environ and not __import__("shutil").which("clang") and __import__("shutil").which("clang-19"):
    os.environ["CC"] = "clang-19"

import argparse
import contextlib
import itertools
import json
import platform
import statistics
import subprocess
import tempfile
import time

import numpy as np
from devicekit.bench import devices as bench_devices
from devicekit.bench import machine as bench_machine
from devicekit.bench import more_cases
from devicekit.bench import peers as bench_peers
from devicekit.bench.definition import best, cases, final, prepare

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "README.md")
BEGIN, END = "<!-- bench:begin {} -->", "<!-- bench:end {} -->"  # one block per CPU model
NEW_MODEL = "<!-- bench:next-model -->"  # where --update-readme puts the table of a CPU model the README lacks

PEERS = ("numpy", *bench_peers.PEERS, "tinygrad")  # the peer columns; OPENCL and WEBGPU are devicekit's own devices
ACCELS = tuple(bench_devices.ACCELERATORS)
# issue 36's bars: row -> (the peers it is held against, minimum ratio best such peer's time / devicekit's time);
# "every" is every peer column that has a time. Numpy's matmul is OpenBLAS: "vs BLAS" is against numpy.
BARS = {
    "fused a*b+c 16M f32": ("every", 1.2),
    "sum 16M f32": ("every", 1.2),
    "softmax 4096x1024 f32": (("torch", "torch.compile", "jax.jit"), 1.2),
    "matmul 1024 f32": (("numpy",), 1.0),
    "matmul 1024 f32, packed B (pack_b + panels, pack timed)": (("numpy",), 1.0),
    "matmul 1024 f32, kernels.matmul(1024, 1024, 1024) as a user calls it": (("numpy",), 1.0),
    "matmul 1024 f32, naive kernel (core optimizer)": (("numpy",), 0.9),
    "gather x[idx[i]] 16M f32": ("every", 1.1),
    "MLP fwd 256x784-512-10 f32": ("every", 1.2),
    "jacobi 5-point 4096^2 f32": ("every", 1.2),
}
# the detail rows held to a fraction of devicekit's copy bandwidth (issue 36): row -> minimum fraction
COPY_BARS = {"fused a*b+c 16M: fraction of the copy bandwidth": 0.9,
             "jacobi 5-point 4096^2: fraction of the copy bandwidth": 0.85}
LIMITS_MS = {"new kernel: render+compile+load": 10.0, "cached kernel: render+compile(hit)+load": 0.5,
             "launch of a tiny kernel (execute)": 0.010, "launch of a*b+c, n=4 (execute)": 0.002,
             "launch of a*b+c, n=16 (Plan.run, per launch)": 0.0003}
COPY_N = 16 << 20  # the copy-bandwidth row: 64 MB of float32, the size of the fused row's arrays
COPY_SOURCES = 3  # the fused row's inputs: the copy it is held to reads as many distinct bytes
# seconds of quiet before each column's timing: a thread pool that ran last keeps spinning on the cores after its
# call (OpenBLAS ~0.1 s, its THREAD_TIMEOUT of 2^28 cycles; devicekit's DEVICEKIT_CPU_SPIN_US 1 ms), and the next
# column's threads share the cores with it (the MLP forward right after numpy's: 860-980 us against 600-660)
SETTLE_S = 0.25
WARMUP_S = 0.1  # then each column's calls warm for this long before the timed ones (pools wake, pages settle)


def settle() -> None:
    """Let the pools of the column timed last go idle, so that each column starts on quiet cores."""
    time.sleep(SETTLE_S)


# ------------------------------------------------------------------ devicekit
class DK:
    def __init__(self):
        import devicekit as dk
        from devicekit.ir import dtypes
        self.dk, self.dtypes = dk, dtypes
        self.cpu = dk.device("CPU")
        self.pair = self.cpu.pair_names[0]
        from devicekit_cpu import spinpool  # a process's first split launch builds the native pool on a thread of
        spinpool.ready()  # its own (~30-50 ms on one core; the Python pool runs the chunks meanwhile): built first
        infos = dk.devices()
        self.accel, self.accel_notes = {}, bench_devices.notes(infos)  # the OPENCL and WEBGPU columns, where they run
        for kind, note in zip(ACCELS, self.accel_notes):
            if ": unavailable" not in note and ": not installed" not in note:
                self.accel[kind] = dk.device(kind)

    def buf(self, a: np.ndarray):
        return self.dk.Buffer(self.cpu, a.size, self.dtypes.from_numpy(a.dtype)).copyin(a)

    def empty(self, n: int):
        return self.dk.Buffer(self.cpu, n, self.dtypes.float32)


# ------------------------------------------------------------------ tinygrad
def load_tinygrad():
    """(Tensor, TinyJit, Device) or the reason tinygrad cannot run here."""
    os.environ.setdefault("DEV", "CPU")
    try:
        from tinygrad import Device, Tensor, TinyJit
    except ImportError as e:
        return f"not installed ({e.name}): pip install tinygrad"
    try:
        t = (Tensor([1.0, 2.0]) + 1).numpy()
        assert t[1] == 3.0
    except Exception as e:  # noqa: BLE001 - report any failure to run as "unavailable"
        return f"cannot run its CPU device ({type(e).__name__}: {str(e).splitlines()[0][:120]}); " \
               "apt-get install -y clang-19 and CC=clang-19"
    return Tensor, TinyJit, Device


def tg_time(tg, fn, args, reps):
    _, TinyJit, Device = tg
    jf = TinyJit(lambda *xs: fn(*xs).realize())

    def call():
        jf(*args)
        Device[Device.DEFAULT].synchronize()
    return best(call, reps, warmup=3)


# ------------------------------------------------------------------ benchmarks
ROWS = {"fused": "fma", "sum": "sum", "naive-sum": "sum-naive", "matmul": "matmul", "matmul-default": "matmul-default", "naive": "matmul-naive", "searched": "matmul-naive-searched",
        "softmax": "softmax",
        "gather": "gather", "gather-unchecked": "gather-unchecked",
        "mlp": "mlp", "jacobi": "jacobi"}  # --only name -> case name (the last two: devicekit.bench.more_cases)
NAIVE_SUM_BAR = 1.1  # issue 36: the obvious `o[0] = x[r].sum(r)` within 1.1x of kernels.reduce's two stages


ROUNDS = 2  # each row's columns are timed this many times in turn (--rounds), each column's best kept


def bench_case(dk, tg, case, reps, peers, compare: bool = True) -> dict:
    """`bench_case_once` ROUNDS times in turn (devicekit, numpy, each peer, OPENCL, WEBGPU, then again), each
    column's best kept (`merge_rounds`): on a shared machine a slow minute then hits every column, not one."""
    return merge_rounds([bench_case_once(dk, tg, case, reps, peers, compare) for _ in range(ROUNDS)])


def merge_rounds(rounds: list[dict]) -> dict:
    """One row from the rounds of a row: a column's least time where every round timed it; a round's "wrong ..." or
    "error ..." wherever one says so (a result that was wrong once is wrong), else the first round's note."""
    out = {}
    for col in rounds[0]:
        vals = [r.get(col) for r in rounds]
        bad = next((v for v in vals if isinstance(v, str) and v.startswith(("wrong", "error", "failed"))), None)
        if bad is not None:
            out[col] = bad
        elif all(isinstance(v, float) for v in vals):
            out[col] = min(vals)
        else:
            out[col] = next((v for v in vals if not isinstance(v, float)), vals[0])
    return out


def bench_case_once(dk, tg, case, reps, peers, compare: bool = True) -> dict:
    """{column: best time (seconds) or the reason there is none} of one case of devicekit.bench.definition (the
    definition `devicekit bench` uses, here at its "large" sizes): devicekit, then (when `compare`) each peer and the
    OPENCL and WEBGPU devices. Every result is checked against numpy: devicekit's must match (else an error), a
    peer's or another device's that does not is reported as "wrong", not timed."""
    inputs = case.inputs()
    prepared = prepare(case, dk.cpu, inputs)
    settle()
    t_dk = best(prepared.launch, reps, warmup_s=WARMUP_S)
    want = case.reference(inputs)
    err = case.check(prepared.output(), want)
    assert not err, f"{case.title}: {err}"
    row = {"devicekit": t_dk}
    if case.name == "matmul-naive-searched":  # dk.search times every candidate tile: on CPU only (minutes elsewhere)
        row.update(dict.fromkeys(ACCELS, "not run (the search is timed on CPU)"))
    else:
        row.update(accel_times(dk, case, inputs, want, max(2, reps // 3)))
    if not compare:
        return row
    settle()
    row["numpy"] = best(lambda: case.reference(inputs), reps, warmup_s=WARMUP_S)
    for peer in bench_peers.PEERS:
        if peer not in peers:
            row[peer] = "not run (--peers)"
            continue
        settle()
        pt = bench_peers.time_peer(peer, case, inputs, want, reps, warmup_s=WARMUP_S)
        row[peer] = pt.seconds if pt.seconds is not None else pt.note
    if isinstance(tg, str):
        row["tinygrad"] = "not installed" if tg.startswith("not installed") else "unavailable"
    elif case.tinygrad is None:
        row["tinygrad"] = "no version"
    else:
        fn, arrays = case.tinygrad(inputs)
        settle()
        row["tinygrad"] = tg_time(tg, fn, tuple(tg[0](a).realize() for a in arrays), reps)
    return row


def accel_times(dk, case, inputs, want, reps) -> dict:
    """The same case on OPENCL and WEBGPU (PoCL and lavapipe here: the host CPU through OpenCL and through Mesa's
    Vulkan), each checked against numpy; a device that cannot run the case (WGSL has no int64 for the gather's
    indices) gets its error in words."""
    out = {}
    for kind in ACCELS:
        dev = dk.accel.get(kind)
        if dev is None:
            out[kind] = "unavailable"
            continue
        try:
            prep = prepare(case, dev, inputs)
            settle()
            t = best(prep.launch, reps, warmup_s=WARMUP_S)
            err = case.check(prep.output(), want)
            out[kind] = t if not err else f"wrong: {err}"
        except Exception as e:  # noqa: BLE001 - one device failing one case leaves the rest of the table
            out[kind] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
    return out


@contextlib.contextmanager
def fresh_cache(compiler):
    """`compiler` with a new memory-only compile cache for the block: what it builds is new to it."""
    from devicekit.compile.cache import CompileCache
    saved, compiler.cache = compiler.cache, CompileCache(tempfile.mkdtemp(prefix="dkbench_"), disk=False)
    try:
        yield compiler
    finally:
        compiler.cache = saved


def bench_compile(dk, reps):
    """New kernel: a kernel never seen (unique constant), a fresh in-memory cache: render + first build + load, the
    path Device.compile takes (tiers: the quick build, LLVM O0); then its final build (O3) + load, what the program
    pays once it has run enough (Program.upgrade). Cached: the same kernel again (render + memory-cache hit of the
    final bytes + load). Device memo: dev.compile() a second time."""
    from devicekit import kernels
    renderer, compiler = dk.cpu.pair(dk.pair)
    with fresh_cache(compiler):
        new, upgraded, hit, tiers = [], [], [], set()
        parts = {"render": [], "compile": [], "load": []}
        salt = time.time_ns() % 1000003
        for i in range(max(5, reps)):
            kern = kernels.elementwise(f"a * b + c * {salt + i}.0 + {i}.5", name=f"fresh_{salt}_{i}")
            t0 = time.perf_counter()
            spec = renderer.render(kern)
            t1 = time.perf_counter()
            compiled = compiler.first_build(spec)
            t2 = time.perf_counter()
            dk.cpu.runtime(compiled)
            t3 = time.perf_counter()
            new.append(t3 - t0)
            parts["render"].append(t1 - t0)
            parts["compile"].append(t2 - t1)
            parts["load"].append(t3 - t2)
            tiers.add(compiled.tier)
            t0 = time.perf_counter()
            dk.cpu.runtime(compiler.compile(spec))
            upgraded.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            dk.cpu.runtime(compiler.first_build(renderer.render(kern)))
            hit.append(time.perf_counter() - t0)
        kern = kernels.elementwise("a * b + c")
        dk.cpu.compile(kern)
        memo = best(lambda: dk.cpu.compile(kern), 50)
    parts = {k: statistics.median(v) for k, v in parts.items()}
    parts["tier"] = "/".join(sorted(tiers))
    return statistics.median(new), statistics.median(upgraded), statistics.median(hit), memo, parts


def bench_search(dk) -> tuple[float, tuple]:
    """dk.search of the naive 1024 matmul in a fresh memory-only cache: (seconds, the optimizer's opts chosen). The
    choice stays in tile_search's memory, so the benchmark case that follows times it without searching again."""
    from devicekit import tile_search
    from devicekit.bench.definition import naive_matmul
    tile_search._CHOSEN.clear()
    with fresh_cache(dk.cpu.compiler):
        t0 = time.perf_counter()
        opts = tile_search.search(naive_matmul(1024), dk.cpu).spec.get_meta("opts")
        return time.perf_counter() - t0, opts


def bench_compile_many(dk, n: int = 64):
    """64 kernels never seen, one by one vs Device.compile_many (threads), each in a fresh memory-only cache."""
    from devicekit import kernels
    _, compiler = dk.cpu.pair(dk.pair)
    times = []
    for how in ("serial", "many"):
        with fresh_cache(compiler):
            salt = time.time_ns() % 1000003
            ks = [kernels.elementwise(f"a * b + c * {salt + i}.0 + {i}.25", name=f"many_{how}_{salt}_{i}")
                  for i in range(n)]
            t0 = time.perf_counter()
            if how == "serial":
                [dk.cpu.compile(k, pair=dk.pair) for k in ks]
            else:
                dk.cpu.compile_many(ks, pair=dk.pair)
            times.append(time.perf_counter() - t0)
    return times[0], times[1]


def bench_interop(dk):
    """Zero-copy wrap of a 64 MB array (dk.from_numpy), its DLPack export (np.from_dlpack), and dk.run of a*b+c at
    1M elements with resident Buffers vs numpy arrays (copied in and out)."""
    from devicekit import kernels
    big = np.zeros(16 << 20, np.float32)  # 64 MB
    buf = dk.dk.from_numpy(big, dk.cpu)
    wrap = best(lambda: dk.dk.from_numpy(big, dk.cpu), 50)
    export = best(lambda: np.from_dlpack(buf), 50)
    kern = kernels.elementwise("a * b + c")
    n = 1 << 20
    arrs = {x: np.random.default_rng(0).standard_normal(n).astype(np.float32) for x in "abc"}
    bufs = {x: dk.buf(a) for x, a in arrs.items()}
    bufs["out"] = dk.empty(n)
    dk.dk.run(kern, dk.cpu, **arrs, n=n)
    copies = best(lambda: dk.dk.run(kern, dk.cpu, **arrs, n=n), 10)
    resident = best(lambda: dk.dk.run(kern, dk.cpu, **bufs, n=n), 10)
    return wrap, export, copies, resident


def bench_bandwidth(dk):
    """The machine's copy bandwidth, counted as STREAM does (bytes read + bytes written, 2 x 64 MB): devicekit's copy
    kernel on all its threads (`out[i] = a[i]`, streaming stores like the fused row) from one source, the same
    kernel from COPY_SOURCES sources in turn (each launch reads 64 MB the last two did not: the fused row's read set,
    3 x 64 MB), and numpy's copyto (one thread). A row is held to the copy that reads as many distinct bytes as it
    does: on a host whose last-level cache holds part of 64 MB (a 480 MB L3 here) a copy of one source, repeated,
    is partly a cache read (bench/README.md: 51 GB/s from one source, 35 from three, on the Xeon)."""
    from devicekit import kernels
    rng = np.random.default_rng(9)
    arrays = [rng.standard_normal(COPY_N).astype(np.float32) for _ in range(COPY_SOURCES)]
    prog = final(dk.cpu.compile(kernels.elementwise("a", name="bench_copy")))
    srcs, dst = [dk.buf(a) for a in arrays], dk.empty(COPY_N)
    t_dk = best(lambda: prog.execute([srcs[0], dst], [COPY_N], wait=True), 10, warmup=2)
    assert np.array_equal(dst.numpy(), arrays[0]), "the copy kernel is wrong"
    turn = itertools.cycle(range(COPY_SOURCES))
    t_turns = best(lambda: prog.execute([srcs[next(turn)], dst], [COPY_N], wait=True), 3 * COPY_SOURCES,
                   warmup=COPY_SOURCES)
    out = np.empty_like(arrays[0])
    t_np = best(lambda: np.copyto(out, arrays[0]), 10, warmup=1)
    return t_dk, t_turns, t_np


def _wavefront_kernel():
    """One anti-diagonal of a 2-D wavefront: a[i, j] = (a[i - 1, j] + a[i, j - 1]) * 0.5 for its cells (each depends on
    its upper and left neighbours: diagonals run in order). The diagonal is given by its first row `lo`, its length
    `cnt` and the column `j0` of its first cell, with related bounds that keep every access inside the grid (the
    bounds proof carries `t < cnt <= n - lo` through `lo + t`: no run-time check)."""
    from devicekit import ir
    from devicekit.ir import dtypes
    k = ir.KernelBuilder("wavefront")
    n = k.var("n", 2, 4096)
    lo = k.var("lo", 1, n - 1)
    cnt = k.var("cnt", 1, n - lo)
    j0 = k.var("j0", cnt, n - 1)
    a = k.param("a", dtypes.float32, shape=(n, n), writable=True)
    t = k.range(cnt, "global")
    i, j = lo + t, j0 - t
    a[i, j] = (a[i - 1, j] + a[i, j - 1]) * 0.5
    return k.build()


def bench_wavefront(dk, n: int = 401, steps: int = 149):
    """`steps` sweeps of 2n-3 diagonal launches each on an n x n grid (119,051 launches: the size of a PolyBench
    seidel-2d written as wavefront steps): a Python loop of execute, one dk.Plan of a sweep replayed, and numpy one
    diagonal at a time; results compared."""
    prog = final(dk.cpu.compile(_wavefront_kernel()))
    diags = [(d, max(1, d - n + 1), min(d - 1, n - 1) - max(1, d - n + 1) + 1) for d in range(2, 2 * n - 1)]
    diags = [(d, lo, cnt) for d, lo, cnt in diags if cnt >= 1]  # cells (i, d - i), i in [lo, lo + cnt)
    start = np.random.default_rng(0).random(n * n, dtype=np.float32)
    buf = dk.buf(start)

    def loop():
        buf.copyin(start)
        for _ in range(steps):
            for d, lo, cnt in diags:
                prog.execute([buf], [n, lo, cnt, d - lo])
    plan = dk.dk.Plan(dk.cpu)
    for d, lo, cnt in diags:
        plan.add(prog, a=buf, n=n, lo=lo, cnt=cnt, j0=d - lo)

    def planned():
        buf.copyin(start)
        for _ in range(steps):
            plan.run()

    def numpy_ref():
        a = start.reshape(n, n).copy()
        for _ in range(steps):
            for d, lo, cnt in diags:
                i = np.arange(lo, lo + cnt)
                a[i, d - i] = (a[i - 1, d - i] + a[i, d - i - 1]) * np.float32(0.5)
        return a
    want = numpy_ref()
    planned()
    ok = np.allclose(buf.numpy().reshape(n, n), want, rtol=1e-5)
    loop()
    ok = ok and np.allclose(buf.numpy().reshape(n, n), want, rtol=1e-5)
    return (best(loop, 3, 0), best(planned, 3, 0), best(numpy_ref, 3, 0), steps * len(diags), ok)


def bench_launch(dk):
    from devicekit import ir
    from devicekit.ir import dtypes
    k = ir.KernelBuilder("tiny_inc")
    o = k.param("o", dtypes.float32, size=1, writable=True)
    o[0] = o[0] + 1.0
    p = final(dk.cpu.compile(k.build()))
    buf = dk.empty(1)
    buf.copyin(np.zeros(1, np.float32))
    args, h = [buf], [buf.handle]
    n = 20000
    for _ in range(1000):
        p.execute(args)

    def loop_exec():
        for _ in range(n):
            p.execute(args)

    def loop_native():
        for _ in range(n):
            p._launch(h, [], {}, None, None, False)
    from devicekit import kernels
    pe = final(dk.cpu.compile(kernels.elementwise("a * b + c")))
    t_vars = {}
    for m in (1, 4, 16):  # a global range of m elements: one thread below the cost model's threshold (runtime.py)
        mbufs = [dk.buf(np.ones(m, np.float32)) for _ in range(4)]
        for _ in range(1000):
            pe.execute(mbufs, [m])

        def loop_vars(mbufs=mbufs, m=m):
            for _ in range(n):
                pe.execute(mbufs, [m])
        t_vars[m] = best(loop_vars, 5, 0) / n
    ebufs = [dk.buf(np.ones(16, np.float32)) for _ in range(4)]
    plan = dk.dk.Plan(dk.cpu)
    for _ in range(1000):
        plan.add(pe, a=ebufs[0], b=ebufs[1], c=ebufs[2], out=ebufs[3], n=16)
    plan.run()
    t_plan = best(plan.run, 10, 0) / 1000
    return best(loop_exec, 5, 0) / n, best(loop_native, 5, 0) / n, t_vars, t_plan


def import_time(code: str, reps: int = 3) -> float | None:
    ts = []
    for _ in range(reps):
        prog = f"import time; t0 = time.perf_counter(); {code}; print(time.perf_counter() - t0)"
        p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=300, check=False)
        if p.returncode != 0:
            return None
        ts.append(float(p.stdout.strip().splitlines()[-1]))
    return min(ts)


# ------------------------------------------------------------------ report
def short(note: str | None) -> str:
    """A table cell for a column without a time: the reason's first words ("not installed", "wrong", ...)."""
    if not note:
        return "n/a"
    return note.split(":")[0].split(" (")[0]


def fastest(row: dict, cols) -> tuple[str, float] | None:
    """(column, time) of the fastest of `cols` that has a time in `row`; None where none has."""
    return bench_peers.best_peer({k: row.get(k) if isinstance(row.get(k), float) else None for k in cols})


def bar_peers(title: str) -> tuple[tuple[str, ...], float]:
    """(the columns a row's bar is held against, the ratio it asks) of a row in BARS."""
    against, need = BARS[title]
    return (PEERS if against == "every" else against), need


def peak_rows(rows: list, by_name: dict) -> list[tuple[str, float | None, str]]:
    """The host's float32 multiply-add peak (devicekit_cpu.fma_peak: registers only, one thread and every thread),
    measured after the columns, on settled cores; then the compute-bound rows as fractions of it, devicekit's and
    the best peer's, and the fraction a row's bar asks of devicekit (the peer's fraction x the bar)."""
    from devicekit_cpu import fma_peak
    from devicekit_cpu.hostinfo import num_threads
    settle()
    one, every = fma_peak.peak(1), fma_peak.peak(num_threads())
    out = [("float32 FMA peak, one thread (registers only)", None, f"{one / 1e9:.0f} GFLOP/s"),
           (f"float32 FMA peak, {num_threads()} threads", None, f"{every / 1e9:.0f} GFLOP/s")]
    for case_name in ("matmul", "mlp"):
        case = by_name[case_name]
        row = next((r[1] for r in rows if r[0] == case.title), None)
        if row is None or not isinstance(row.get("devicekit"), float):
            continue
        t = row["devicekit"]
        top = fastest(row, PEERS)
        detail = f"{case.work / t / 1e9:.0f} GFLOP/s = {case.work / t / every:.2f} of the peak"
        if top is not None:
            detail += f"; best peer ({top[0]}) {case.work / top[1] / every:.2f}"
        if case.title in BARS:  # the peers the bar is held against (matmul: numpy's BLAS)
            against, need = bar_peers(case.title)
            if (vs := fastest(row, against)) is not None:
                detail += f"; the bar ({need}x {vs[0]}) asks {case.work / vs[1] / every * need:.2f}"
        out.append((f"{case.title}: fraction of the FMA peak", t, detail))
    return out


def fmt_t(t: float | None) -> str:
    if t is None:
        return "n/a"
    if t < 1e-6:
        return f"{t * 1e9:.0f} ns"
    return f"{t * 1e6:.1f} µs" if t < 1e-3 else f"{t * 1e3:.2f} ms"


def shown_args(argv: list[str]) -> list[str]:
    """The command line as bench/README.md shows it: without `--json FILE` (the runner's file, not the project's)."""
    shown, skip = [], False
    for a in argv:
        if skip or a.startswith("--json="):
            skip = False
            continue
        skip = a == "--json"
        if not skip:
            shown.append(a)
    return shown


def update_readme(cpu_model: str, table: str) -> None:
    """Write `table` into bench/README.md's block for this CPU model (a new "### <model>" section before "## Notes"
    the first time): one table per model, so that a regression on one host stays visible next to the others."""
    with open(README) as f:
        text = f.read()
    begin, end = BEGIN.format(cpu_model), END.format(cpu_model)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    body = f"\n_Last run: {stamp}, `python bench/run.py {' '.join(shown_args(sys.argv[1:]))}`._\n\n{table}\n"
    if begin in text:
        a, b = text.index(begin) + len(begin), text.index(end)
        text = text[:a] + body + text[b:]
    else:  # a model not seen before: its section goes where the README keeps the next one
        at = text.index(NEW_MODEL) if NEW_MODEL in text else len(text)
        text = text[:at] + f"### {cpu_model}\n\n{begin}{body}{end}\n\n" + text[at:]
    with open(README, "w") as f:
        f.write(text)


def main() -> int:
    global ROUNDS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--update-readme", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--json", help="also write the results as JSON to this path")
    ap.add_argument("--rounds", type=int, choices=range(1, 10), metavar="N",
                    help=f"time each row's columns N times in turn, each column's best kept (default {ROUNDS}; "
                         "--quick: 1)")
    ap.add_argument("--peers", default=",".join(bench_peers.PEERS),
                    help=f"the peers to run besides numpy and tinygrad (default: {','.join(bench_peers.PEERS)})")
    args = ap.parse_args()
    peers = set(filter(None, args.peers.split(",")))
    if peers - set(bench_peers.PEERS):
        ap.error(f"--peers: unknown {', '.join(sorted(peers - set(bench_peers.PEERS)))}; the peers are "
                 f"{', '.join(bench_peers.PEERS)}")
    only = set(filter(None, args.only.split(",")))
    want = (lambda name: not only or name in only)
    reps = 3 if args.quick else 15  # best-of: many short runs find the quiet moments of a shared machine
    ROUNDS = args.rounds if args.rounds is not None else 1 if args.quick else ROUNDS

    load0 = f"{os.getloadavg()[0]:.2f}"
    cpu_model = bench_machine.cpu_model()
    print(f"CPU: {cpu_model}; load at start {load0} on {bench_machine.cpus()} CPUs", flush=True)
    if (busy := bench_machine.busy_warning()) is not None:
        print(busy, file=sys.stderr)
    dk = DK()
    tg = load_tinygrad()
    if isinstance(tg, str):
        tg_note = f"tinygrad unavailable: {tg}"
    else:
        from importlib.metadata import version
        tg_note = f"tinygrad {version('tinygrad')} (CPU device, CC={os.environ.get('CC', 'clang')}, default settings)"
    peer_notes = {}  # each peer's configuration, or why it does not run here
    for peer in bench_peers.PEERS:
        why = "not run (--peers)" if peer not in peers else bench_peers.missing(peer)
        peer_notes[peer] = why or bench_peers.configuration(peer)
    nb_note = peer_notes["numba"]
    by_name = {c.name: c for c in (*cases(profile="large", proposals=True), *more_cases.cases("large"))}
    rows = []
    for row, name in ROWS.items():
        if want(row):
            case, r = by_name[name], max(2, reps // 2) if name.startswith("matmul") else reps
            print(f"bench/run.py: {case.title} ...", file=sys.stderr, flush=True)
            mm_row = next((x[1] for x in rows if x[0] == by_name["matmul"].title), None)
            if name == "matmul-naive-searched":  # the search itself, timed once in a fresh cache; the case reuses
                search_s, search_opts = bench_search(dk)  # its choice (remembered in memory)
            sum_row = next((x[1] for x in rows if x[0] == by_name["sum"].title), None)
            if name == "sum-naive" and sum_row is not None:  # the same sum: the sum row's peers (run once)
                got = bench_case(dk, tg, case, r, peers, compare=False)
                rows.append((case.title, {**{k: sum_row[k] for k in PEERS}, **got}))
                continue
            if name in ("matmul-default", "matmul-naive", "matmul-naive-searched") and mm_row is not None:
                # the same product: the peers' times of the matmul row (run once); its own OPENCL/WEBGPU time
                got = bench_case(dk, tg, case, r, peers, compare=False)
                rows.append((case.title, {**{k: mm_row[k] for k in PEERS}, **got}))
                continue
            rows.append((case.title, bench_case(dk, tg, case, r, peers)))
            if name == "matmul":  # the same product, so the same peers' times; its own OPENCL/WEBGPU time
                for pname in ("matmul-packed", "matmul-packed-once"):
                    packed = by_name[pname]
                    got = bench_case(dk, tg, packed, r, peers, compare=False)
                    rows.append((packed.title, {**{k: rows[-1][1][k] for k in PEERS}, **got}))
    singles = []
    mm, naive, searched = (next((r[1]["devicekit"] for r in rows if r[0] == by_name[n].title), None)
                           for n in ("matmul", "matmul-naive", "matmul-naive-searched"))
    lib_sum, naive_sum = (next((r[1]["devicekit"] for r in rows if r[0] == by_name[n].title), None)
                          for n in ("sum", "sum-naive"))
    if lib_sum is not None and naive_sum is not None:
        singles.append(("naive sum (o[0] = x[r].sum(r)) / kernels.reduce's two stages", naive_sum,
                        f"{naive_sum / lib_sum:.2f}x kernels.reduce's {fmt_t(lib_sum)} (issue 36: within "
                        f"{NAIVE_SUM_BAR}x)"))
    if mm is not None and naive is not None:
        singles.append(("naive matmul (core optimizer) / kernels.matmul", naive,
                        f"{naive / mm:.2f}x kernels.matmul's {fmt_t(mm)} (issue 17: within 1.5x)"))
    if mm is not None and searched is not None:
        singles.append(("naive matmul (dk.search) / kernels.matmul", searched,
                        (f"{searched / mm:.2f}x kernels.matmul's; the search took {search_s:.1f} s and chose "
                        f"{', '.join(search_opts or ('as written',))}")))
    if want("fused") or want("bandwidth") or want("jacobi"):
        t_copy, t_turns, t_copy_np = bench_bandwidth(dk)
        bw, bw_turns = 2 * 4 * COPY_N / t_copy, 2 * 4 * COPY_N / t_turns
        singles.append(("copy 64 MB (devicekit copy kernel, all threads)", t_copy,
                        f"{bw / 1e9:.1f} GB/s (read + written, STREAM's count)"))
        singles.append((f"copy 64 MB from {COPY_SOURCES} sources in turn (devicekit, all threads)", t_turns,
                        f"{bw_turns / 1e9:.1f} GB/s: {COPY_SOURCES} x 64 MB read, as the fused row reads"))
        singles.append(("copy 64 MB (numpy copyto, one thread)", t_copy_np, f"{2 * 4 * COPY_N / t_copy_np / 1e9:.1f} GB/s"))
        fused = next((r[1]["devicekit"] for r in rows if r[0].startswith("fused")), None)
        if fused is not None:  # held to the copy of as many distinct bytes; its fraction of the one-source copy too
            rate = 4 * 4 * COPY_N / fused
            singles.append(("fused a*b+c 16M: fraction of the copy bandwidth", fused,
                            f"{rate / 1e9:.1f} GB/s (4 x 64 MB) = {rate / bw_turns:.2f} of devicekit's copy from "
                            f"{COPY_SOURCES} sources ({rate / bw:.2f} of the one-source copy)"))
        jacobi = next((r[1]["devicekit"] for r in rows if r[0] == by_name["jacobi"].title), None)
        if jacobi is not None:  # read once + written once, as the copy counts: a sweep at copy speed scores 1
            rate = by_name["jacobi"].work / jacobi
            singles.append(("jacobi 5-point 4096^2: fraction of the copy bandwidth", jacobi,
                            f"{rate / 1e9:.1f} GB/s (2 x 64 MB) = {rate / bw:.2f} of devicekit's copy"))
    if want("peak") or want("matmul") or want("mlp"):
        singles += peak_rows(rows, by_name)
    if want("compile"):
        new, upgraded, hit, memo, parts = bench_compile(dk, reps)
        detail = (f"{parts['tier']} build: render {fmt_t(parts['render'])}, compile {fmt_t(parts['compile'])}, "
                  f"load {fmt_t(parts['load'])}")
        singles.append(("new kernel: render+compile+load", new, detail))
        from devicekit_cpu.runtime import TIER_LAUNCHES, TIER_WORK
        singles.append(("its final build (O3) + load, once it has run enough", upgraded,
                        (f"Program.upgrade: after {TIER_LAUNCHES} launches or 2^{TIER_WORK.bit_length() - 1} "
                        "estimated operations")))
        from devicekit.bench.numba_versions import first_call_seconds
        nb_first = [first_call_seconds(time.time_ns() % 1000003 + i + 0.5) for i in range(3)]
        if nb_first[0] is None:
            singles.append(("new kernel: numba first call (parallel njit a*b+c)", None, nb_note))
        else:
            singles.append(("new kernel: numba first call (parallel njit a*b+c)", statistics.median(nb_first),
                            f"{statistics.median(nb_first) / new:.1f}x devicekit's new kernel"))
        singles.append(("cached kernel: render+compile(hit)+load", hit, ""))
        singles.append(("cached kernel: Device.compile again (memo)", memo, ""))
        serial, many = bench_compile_many(dk)
        singles.append(("64 new kernels, one by one", serial, ""))
        singles.append(("64 new kernels, Device.compile_many", many,
                        f"{serial / many:.2f}x faster on {len(os.sched_getaffinity(0))} CPUs"))
    if want("interop"):
        wrap, export, copies, resident = bench_interop(dk)
        singles.append(("wrap a 64 MB array (dk.from_numpy, no copy)", wrap, "checks + a handle"))
        singles.append(("export a Buffer (np.from_dlpack, no copy)", export, "DLPack capsule"))
        singles.append(("dk.run a*b+c, 1M, numpy arrays (copied in/out)", copies, ""))
        singles.append(("dk.run a*b+c, 1M, resident Buffers", resident, f"{copies / resident:.1f}x less"))
    if want("wavefront"):
        t_loop, t_planned, t_np, launches, ok = bench_wavefront(dk)
        check = "ok" if ok else "MISMATCH"
        singles.append((f"wavefront, {launches} launches: Python loop of execute", t_loop, check))
        singles.append((f"wavefront, {launches} launches: dk.Plan replay", t_planned,
                        f"{t_loop / t_planned:.1f}x faster than the loop; {check}"))
        singles.append((f"wavefront, {launches} diagonals: numpy", t_np, f"{t_np / t_planned:.1f}x the plan's time"))
    if want("launch"):
        t_exec, t_native, t_vars, t_plan = bench_launch(dk)
        singles.append(("launch of a tiny kernel (execute)", t_exec, "checks + ctypes call"))
        for m, t in t_vars.items():
            singles.append((f"launch of a*b+c, n={m} (execute)", t, "sizes and extent from the var n, one thread"))
        singles.append(("launch of a*b+c, n=16 (Plan.run, per launch)", t_plan,
                        "1000 launches, checked once, replayed in one native call"))
        singles.append(("launch of a tiny kernel (native call only)", t_native, "Program._launch"))
    imports = []
    if want("import"):
        imports.append(("import devicekit + devicekit.devices()",
                        import_time("import devicekit; devicekit.devices()")))
        imports.append(("import tinygrad", import_time("import tinygrad")))

    threads = __import__("devicekit_cpu.hostinfo", fromlist=["num_threads"]).num_threads()
    load1 = f"{os.getloadavg()[0]:.2f}"
    print(f"load at end {load1}", flush=True)
    head = (f"Machine: {cpu_model}; {os.cpu_count()} CPUs, devicekit CPU threads {threads}; "
            f"python {platform.python_version()}, numpy {np.__version__}. "
            f"devicekit pair: {dk.pair} ({dk.cpu.compiler.identity().split(' features=')[0]}). "
            f"Load average at start / end: {load0} / {load1} (other processes share the CPUs). "
            f"{bench_machine.describe()}.")
    config = [f"- numpy: {np.__version__}, `a * b + c`, `x.sum()`, max/exp/sum/divide, `a @ b` (its BLAS), `x[idx]`, "
              "the MLP forward `relu(x @ w1 + b1) @ w2 + b2` (BLAS), jacobi's five slices into out's interior",
              *(f"- {peer}: {peer_notes[peer]}" for peer in bench_peers.PEERS), f"- tinygrad: {tg_note}",
              *(f"- {note}" for note in dk.accel_notes)]
    cols = (*PEERS, *ACCELS)
    lines = [head, "", "Peers and devices:", *config, "",
             f"| benchmark | devicekit | {' | '.join(cols)} | best peer / devicekit | bar |",
             "|---" * (len(cols) + 4) + "|"]
    results, footnotes = {}, []
    for name, row in rows:
        t_dk = row["devicekit"]
        cells = []
        for col in cols:
            v = row.get(col)
            if isinstance(v, float):
                cells.append(fmt_t(v))
            else:
                cells.append(short(v))
                if v and (v.startswith(("wrong", "error", "failed"))):
                    footnotes.append(f"- {name}, {col}: {v}")
        top = fastest(row, PEERS)
        ratio = "n/a" if top is None else f"{top[1] / t_dk:.2f}x ({top[0]})"
        bar = ""
        if name in BARS:
            against, need = bar_peers(name)
            vs = fastest(row, against)
            bar = f"≥{need}x vs {'every peer' if against is PEERS else '/'.join(against)}: " + (
                "n/a" if vs is None else ("ok" if vs[1] / t_dk >= need else "MISSED") + f" ({vs[1] / t_dk:.2f}x)")
        lines.append(f"| {name} | {fmt_t(t_dk)} | {' | '.join(cells)} | {ratio} | {bar} |")
        results[name] = row
    if footnotes:
        lines += ["", *footnotes]
    if singles:
        lines += ["", "| devicekit overhead | time | bar | detail |", "|---|---|---|---|"]
        for name, t, detail in singles:
            lim = LIMITS_MS.get(name)
            bar = "" if lim is None or t is None else f"≤{fmt_t(lim / 1e3)}: " + ("ok" if t * 1e3 <= lim else "MISSED")
            if name in COPY_BARS and t is not None:
                got = float(detail.split(" = ")[1].split()[0])
                bar = f"≥{COPY_BARS[name]} of copy: " + ("ok" if got >= COPY_BARS[name] else "MISSED")
            lines.append(f"| {name} | {fmt_t(t)} | {bar} | {detail} |")
            results[name] = {"devicekit": t}
    if imports:
        lines += ["", "| import (fresh interpreter) | time |", "|---|---|"]
        for name, t in imports:
            lines.append(f"| {name} | {fmt_t(t) if t is not None else 'n/a (not installed)'} |")
            results[name] = {"time": t}
    table = "\n".join(lines)
    print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.update_readme:
        update_readme(cpu_model, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
