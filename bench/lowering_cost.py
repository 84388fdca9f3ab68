"""Cold cost of lowering, per stage (issue 31 item 3): process CPU time in a fresh process per measurement, best of N.

    .venv/bin/python bench/lowering_cost.py [--runs 3] [--all]

The naive 100x64 @ 64x64 matmul built with ir.KernelBuilder, split into the stages of `linearize.lower` (bounds,
optimizer, passes, range mapping, scheduler, and `other`: the rest of lower, its checks of which passes apply) and
the CPU renderer's `render_linear`; `--all` adds the slowest kernel of each module of
`devicekit.kernels.all_kernels()` and of the PolyBench IR ports (examples/polybench). Both lowered-kernel caches
(compile/lowered.py, in memory and on disk) are bypassed: the child calls `linearize.lower` and `render_linear`
themselves, so every figure is a real, cold lowering. Figures are in docs/decisions.md ("Deep kernels and the
cost of lowering", "The cost of lowering, per stage").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r'''
import importlib, json, sys, time
sys.path.insert(0, sys.argv[2])
import devicekit as dk
from devicekit import ir
from devicekit.ir import dtypes, linearize
T = {}
def timed(bucket, f):
    def w(*a, **k):
        t = time.process_time(); r = f(*a, **k); T[bucket] = T.get(bucket, 0) + time.process_time() - t; return r
    return w
for name, bucket in [("guard_accesses", "bounds"), ("optimize", "optimizer"), ("_map_ranges", "ranges")] + [
        (p, "passes") for p in ("promote_half", "expand_unroll", "simplify", "define_int_edges", "emulate_bf16",
                                "decompose", "group_vectors", "substitute", "graph_rewrite")]:
    setattr(linearize, name, timed(bucket, getattr(linearize, name)))
S = getattr(linearize, "Scheduler", None) or getattr(linearize, "_Scheduler")
S.run = timed("schedule", S.run)
S.__init__ = timed("schedule", S.__init__)  # its analyses (free ranges, pinned loads) are part of scheduling
what = sys.argv[1]
t0 = time.process_time()
if what == "matmul":
    k = ir.KernelBuilder("gemm")
    a = k.param("a", dtypes.float32, shape=(100, 64)); b = k.param("b", dtypes.float32, shape=(64, 64))
    c = k.param("c", dtypes.float32, shape=(100, 64), writable=True)
    i, j, r = k.range(100, "global"), k.range(64, "global"), k.range(64, "reduce")
    c[i, j] = (a[i, r] * b[r, j]).sum(r)
    ks = [k.build()]
elif what.startswith("lib:"):
    from devicekit.kernels import all_kernels
    ks = [all_kernels()[what[4:]]()]
else:
    mod = importlib.import_module("examples.polybench." + what[3:])
    ks = list(mod.kernels()) if hasattr(mod, "kernels") else [mod.kernel()]
T["build + verify"] = time.process_time() - t0
rend = dk.device("CPU").renderer
worst = None
for x in ks:  # the slowest kernel of the module
    before = dict(T)
    t = time.process_time(); lk = linearize.lower(x, rend.capabilities); tl = time.process_time() - t
    t = time.process_time(); rend.render_linear(lk, "k"); tr = time.process_time() - t
    if worst is None or tl > worst[0]:
        worst = (tl, tr, {k: T[k] - before.get(k, 0) for k in T if k != "build + verify"})
other = worst[0] - sum(worst[2].values())
out = {"build + verify": T["build + verify"], **worst[2], "other": other, "lower, all": worst[0], "render": worst[1]}
print(json.dumps({k: v * 1e3 for k, v in out.items()}))
'''


def measure(what: str, runs: int) -> dict[str, float]:
    best: dict[str, float] | None = None
    for _ in range(runs):
        p = subprocess.run([sys.executable, "-c", _CHILD, what, str(ROOT)], capture_output=True, text=True, cwd=ROOT,
                           check=False)
        if p.returncode:
            raise SystemExit(f"{what}: {p.stderr[-2000:]}")
        got = json.loads(p.stdout.strip().splitlines()[-1])
        if best is None or got["lower, all"] < best["lower, all"]:
            best = got
    assert best is not None
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--all", action="store_true", help="also every library kernel and PolyBench port")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs); process CPU ms, best of {args.runs}",
          flush=True)
    names = ["matmul"]
    if args.all:
        sys.path.insert(0, str(ROOT))
        import importlib

        from devicekit.kernels import all_kernels
        names += [f"lib:{n}" for n in all_kernels()]
        names += [f"pb:{n}" for n in importlib.import_module("examples.polybench").KERNELS]
    for n in names:
        got = measure(n, args.runs)
        print(f"{n:24s} " + "  ".join(f"{k} {v:.1f}" for k, v in got.items()), flush=True)


if __name__ == "__main__":
    main()
