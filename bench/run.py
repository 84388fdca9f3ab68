#!/usr/bin/env python3
"""devicekit CPU (llvm pair) vs numpy vs tinygrad, in one run. See bench/README.md.

    python bench/run.py                  # full run, prints the table
    python bench/run.py --quick          # fewer repetitions
    python bench/run.py --update-readme  # also writes the table into bench/README.md
    python bench/run.py --only fused,sum # a subset: fused sum matmul softmax compile launch import
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
import json
import platform
import statistics
import subprocess
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "README.md")
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"

# the bars: (row, "vs", minimum ratio other_time / devicekit_time) or (row, "max_ms", limit)
BARS = {
    "fused a*b+c 16M f32": [("tinygrad", 1.0), ("numpy", 1.8)],
    "sum 16M f32": [("numpy", 0.9)],
    "matmul 1024 f32": [("tinygrad", 5.0), ("numpy", 0.3)],
    "softmax 4096x1024 f32": [("numpy", 1.0)],
}
LIMITS_MS = {"new kernel: render+compile+load": 20.0, "cached kernel: render+compile(hit)+load": 0.5,
             "launch of a tiny kernel (execute)": 0.010}


def best(fn, reps: int, warmup: int = 1) -> float:
    """Best wall time of `reps` calls after `warmup` calls (seconds)."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


# ------------------------------------------------------------------ devicekit
class DK:
    def __init__(self):
        import devicekit as dk
        from devicekit.ir import dtypes
        self.dk, self.dtypes = dk, dtypes
        self.cpu = dk.device("CPU")
        self.pair = self.cpu.pair_names[0]

    def buf(self, a: np.ndarray):
        return self.dk.Buffer(self.cpu, a.size, self.dtypes.from_numpy(a.dtype)).copyin(a)

    def empty(self, n: int):
        return self.dk.Buffer(self.cpu, n, self.dtypes.float32)


def packed_matmul(M: int, N: int, K: int, tm: int = 2, tn: int = 8, um: int = 2):
    """Proposal for devicekit.kernels.matmul on CPUs: B packed into [N/tn][K][tn] panels (one pack kernel), then
    (um*tm) x tn rows x columns per instance: a tm x tn tile (tm broadcasts of `a` times one tn-float load of the
    panel) repeated over an `unroll` range of um, so um accumulators share one k loop. Returns (pack, matmul)."""
    from devicekit import ir
    from devicekit.ir import dtypes
    k = ir.KernelBuilder(f"pack_b_{tn}")
    b = k.param("b", dtypes.float32, K * N)
    bp = k.param("bp", dtypes.float32, K * N, writable=True)
    j, r, y = k.range(N // tn, "global"), k.range(K, "loop"), k.range(tn, "loop")
    bp[(j * K + r) * tn + y] = b[r * N + j * tn + y]
    pack = k.build()
    k = ir.KernelBuilder(f"matmul_packed_{um}x{tm}x{tn}")
    a = k.param("a", dtypes.float32, M * K)
    bp = k.param("bp", dtypes.float32, K * N)
    c = k.param("c", dtypes.float32, M * N, writable=True)
    i, j = k.range(M // (tm * um), "global"), k.range(N // tn, "global")
    u = k.range(um, "unroll")
    r = k.range(K, "reduce")
    row0 = (i * um + u) * tm
    av = [a[(row0 + x) * K + r] for x in range(tm)]
    bv = [bp[(j * K + r) * tn + y] for y in range(tn)]
    acc = ir.vectorize(*[av[x] * bv[y] for x in range(tm) for y in range(tn)]).sum(r)
    for x in range(tm):
        for y in range(tn):
            c[(row0 + x) * N + j * tn + y] = acc.gep(x * tn + y)
    return pack, k.build()


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
def bench_fused(dk, tg, reps):
    from devicekit import kernels
    n = 16 << 20
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    p = dk.cpu.compile(kernels.elementwise("a * b + c"))
    bufs = [dk.buf(a), dk.buf(b), dk.buf(c), dk.empty(n)]
    t_dk = best(lambda: p.execute(bufs, [n]), reps)
    out = bufs[3].numpy()
    assert np.allclose(out, a * b + c, rtol=1e-5, atol=1e-5)
    t_np = best(lambda: a * b + c, reps)
    t_tg = None
    if not isinstance(tg, str):
        T = tg[0]
        ta, tb, tc = (T(x).realize() for x in (a, b, c))
        t_tg = tg_time(tg, lambda x, y, z: x * y + z, (ta, tb, tc), reps)
    return t_dk, t_np, t_tg


def bench_sum(dk, tg, reps):
    from devicekit import kernels
    n, parts = 16 << 20, 64
    a = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    p = dk.cpu.compile(kernels.reduce("sum"))
    xa, partial, total = dk.buf(a), dk.empty(parts), dk.empty(1)

    def run():  # 64 row sums on the thread pool, then the sum of the 64 partials
        p.execute([xa, partial], [parts, n // parts])
        p.execute([partial, total], [1, parts])
    t_dk = best(run, reps)
    assert abs(total.numpy()[0] - a.astype(np.float64).sum()) < 1e-3 * n ** 0.5
    t_np = best(lambda: a.sum(), reps)
    t_tg = None
    if not isinstance(tg, str):
        t_tg = tg_time(tg, lambda x: x.sum(), (tg[0](a).realize(),), reps)
    return t_dk, t_np, t_tg


def bench_matmul(dk, tg, reps, extra: dict):
    from devicekit import kernels
    s = 1024
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((s, s), dtype=np.float32), rng.standard_normal((s, s), dtype=np.float32)
    ref = a @ b
    p = dk.cpu.compile(kernels.matmul(s, s, s))
    ba, bb, bc = dk.buf(a.reshape(-1)), dk.buf(b.reshape(-1)), dk.empty(s * s)
    t_dk = best(lambda: p.execute([ba, bb, bc]), max(2, reps // 2))
    assert np.allclose(bc.numpy().reshape(s, s), ref, rtol=1e-3, atol=1e-3)
    pack, mm = packed_matmul(s, s, s)
    pp, pm = dk.cpu.compile(pack), dk.cpu.compile(mm)
    bp = dk.empty(s * s)

    def packed():
        pp.execute([bb, bp])
        pm.execute([ba, bp, bc])
    extra["matmul 1024 f32, packed B, 2x(2x8) tiles (proposal)"] = best(packed, max(2, reps // 2))
    assert np.allclose(bc.numpy().reshape(s, s), ref, rtol=1e-3, atol=1e-3)
    t_np = best(lambda: a @ b, reps)
    t_tg = None
    if not isinstance(tg, str):
        T = tg[0]
        t_tg = tg_time(tg, lambda x, y: x @ y, (T(a).realize(), T(b).realize()), max(2, reps // 2))
    return t_dk, t_np, t_tg


def bench_softmax(dk, tg, reps):
    from devicekit import kernels
    m, n = 4096, 1024
    x = np.random.default_rng(3).standard_normal((m, n), dtype=np.float32)

    def np_softmax():
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    p = dk.cpu.compile(kernels.softmax())
    bx, bo = dk.buf(x.reshape(-1)), dk.empty(m * n)
    t_dk = best(lambda: p.execute([bx, bo], [m, n]), reps)
    assert np.allclose(bo.numpy().reshape(m, n), np_softmax(), rtol=1e-4, atol=1e-6)
    t_np = best(np_softmax, reps)
    t_tg = None
    if not isinstance(tg, str):
        t_tg = tg_time(tg, lambda t: t.softmax(axis=1), (tg[0](x).realize(),), reps)
    return t_dk, t_np, t_tg


def bench_compile(dk, reps):
    """New kernel: a kernel never seen (unique constant), a fresh in-memory cache: render + compile + load.
    Cached: the same kernel again (render + memory-cache hit + load). Device memo: dev.compile() a second time."""
    from devicekit import kernels
    from devicekit.compile.cache import CompileCache
    renderer, compiler = dk.cpu.pair(dk.pair)
    saved = compiler.cache
    compiler.cache = CompileCache(tempfile.mkdtemp(prefix="dkbench_"), disk=False)
    try:
        new, hit, parts = [], [], {"render": [], "compile": [], "load": []}
        salt = time.time_ns() % 1000003
        for i in range(max(5, reps)):
            kern = kernels.elementwise(f"a * b + c * {salt + i}.0 + {i}.5", name=f"fresh_{salt}_{i}")
            t0 = time.perf_counter()
            spec = renderer.render(kern)
            t1 = time.perf_counter()
            compiled = compiler.compile(spec)
            t2 = time.perf_counter()
            dk.cpu.runtime(compiled)
            t3 = time.perf_counter()
            new.append(t3 - t0)
            parts["render"].append(t1 - t0)
            parts["compile"].append(t2 - t1)
            parts["load"].append(t3 - t2)
            t0 = time.perf_counter()
            dk.cpu.runtime(compiler.compile(renderer.render(kern)))
            hit.append(time.perf_counter() - t0)
        kern = kernels.elementwise("a * b + c")
        dk.cpu.compile(kern)
        memo = best(lambda: dk.cpu.compile(kern), 50)
    finally:
        compiler.cache = saved
    return statistics.median(new), statistics.median(hit), memo, {k: statistics.median(v) for k, v in parts.items()}


def bench_launch(dk):
    from devicekit import ir
    from devicekit.ir import dtypes
    k = ir.KernelBuilder("tiny_inc")
    o = k.param("o", dtypes.float32, size=1, writable=True)
    o[0] = o[0] + 1.0
    p = dk.cpu.compile(k.build())
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
    pe = dk.cpu.compile(kernels.elementwise("a * b + c"))
    ebufs = [dk.buf(np.ones(16, np.float32)) for _ in range(4)]
    for _ in range(1000):
        pe.execute(ebufs, [16])

    def loop_vars():
        for _ in range(n):
            pe.execute(ebufs, [16])
    return best(loop_exec, 5, 0) / n, best(loop_native, 5, 0) / n, best(loop_vars, 5, 0) / n


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
def fmt_t(t: float | None) -> str:
    if t is None:
        return "n/a"
    return f"{t * 1e6:.1f} µs" if t < 1e-3 else f"{t * 1e3:.2f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--update-readme", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--json", help="also write the results as JSON to this path")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    want = (lambda name: not only or name in only)
    reps = 3 if args.quick else 15  # best-of: many short runs find the quiet moments of a shared machine

    load0 = f"{os.getloadavg()[0]:.2f}"
    dk = DK()
    tg = load_tinygrad()
    if isinstance(tg, str):
        tg_note = f"tinygrad unavailable: {tg}"
    else:
        from importlib.metadata import version
        tg_note = f"tinygrad {version('tinygrad')} (CPU device, CC={os.environ.get('CC', 'clang')}, default settings)"
    rows, extra = [], {}
    if want("fused"):
        rows.append(("fused a*b+c 16M f32", *bench_fused(dk, tg, reps)))
    if want("sum"):
        rows.append(("sum 16M f32", *bench_sum(dk, tg, reps)))
    if want("matmul"):
        rows.append(("matmul 1024 f32", *bench_matmul(dk, tg, reps, extra)))
    if want("softmax"):
        rows.append(("softmax 4096x1024 f32", *bench_softmax(dk, tg, reps)))
    singles = []
    if want("compile"):
        new, hit, memo, parts = bench_compile(dk, reps)
        detail = (f"render {fmt_t(parts['render'])}, compile {fmt_t(parts['compile'])}, "
                  f"load {fmt_t(parts['load'])}")
        singles.append(("new kernel: render+compile+load", new, detail))
        singles.append(("cached kernel: render+compile(hit)+load", hit, ""))
        singles.append(("cached kernel: Device.compile again (memo)", memo, ""))
    if want("launch"):
        t_exec, t_native, t_vars = bench_launch(dk)
        singles.append(("launch of a tiny kernel (execute)", t_exec, "checks + ctypes call"))
        singles.append(("launch of a*b+c, n=16 (execute)", t_vars, "sizes and extent from the var n"))
        singles.append(("launch of a tiny kernel (native call only)", t_native, "Program._launch"))
    imports = []
    if want("import"):
        imports.append(("import devicekit + devicekit.devices()",
                        import_time("import devicekit; devicekit.devices()")))
        imports.append(("import tinygrad", import_time("import tinygrad")))

    threads = __import__("devicekit_cpu.hostinfo", fromlist=["num_threads"]).num_threads()
    cpu_name = __import__("devicekit_cpu.hostinfo", fromlist=["cpu_fingerprint"]).cpu_fingerprint()
    head = (f"Machine: {cpu_name.split(' flags=')[0]}, {os.cpu_count()} CPUs, devicekit CPU threads {threads}; "
            f"python {platform.python_version()}, numpy {np.__version__}; {tg_note}. "
            f"devicekit pair: {dk.pair} ({dk.cpu.compiler.identity().split(' features=')[0]}). "
            f"Load average before/after the run: {load0} / {os.getloadavg()[0]:.2f} (other processes share the CPUs).")
    lines = [head, "",
             "| benchmark | devicekit | numpy | tinygrad | numpy / devicekit | tinygrad / devicekit | bar |",
             "|---|---|---|---|---|---|---|"]
    results = {}
    for name, t_dk, t_np, t_tg in rows:
        r_np = t_np / t_dk
        r_tg = t_tg / t_dk if t_tg else None
        bars = []
        for who, need in BARS.get(name, []):
            r = r_np if who == "numpy" else r_tg
            bars.append(f"{who} ≥{need}x: " + ("n/a" if r is None else ("ok" if r >= need else "MISSED")))
        lines.append(f"| {name} | {fmt_t(t_dk)} | {fmt_t(t_np)} | {fmt_t(t_tg)} | {r_np:.2f}x | "
                     f"{'n/a' if r_tg is None else f'{r_tg:.2f}x'} | {'; '.join(bars)} |")
        results[name] = {"devicekit": t_dk, "numpy": t_np, "tinygrad": t_tg}
    for name, t in extra.items():
        lines.append(f"| {name} | {fmt_t(t)} | | | | | (pack included) |")
        results[name] = {"devicekit": t}
    if singles:
        lines += ["", "| devicekit overhead | time | bar | detail |", "|---|---|---|---|"]
        for name, t, detail in singles:
            lim = LIMITS_MS.get(name)
            bar = "" if lim is None else f"≤{fmt_t(lim / 1e3)}: " + ("ok" if t * 1e3 <= lim else "MISSED")
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
        with open(README) as f:
            text = f.read()
        a, b = text.index(BEGIN) + len(BEGIN), text.index(END)
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        with open(README, "w") as f:
            f.write(text[:a] + f"\n_Last run: {stamp}, `python bench/run.py`._\n\n" + table + "\n" + text[b:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
