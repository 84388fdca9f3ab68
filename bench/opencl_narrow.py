"""OPENCL with and without int32 index narrowing (`OpenCLRenderer(narrow=True)`, `ir.narrow.narrowed`): the library
kernels (elementwise, reduce, matmul), process CPU time per launch, interleaved rounds, median.

    POCL_MAX_PTHREAD_COUNT=1 .venv/bin/python bench/opencl_narrow.py [--rounds 8] [--size 512]

CPU time rather than wall time: PoCL runs kernels on its own threads, and on a shared machine the wall time of a
launch is mostly waiting for a core; with one PoCL thread the process's CPU time is the kernel's work. Each result
is checked against numpy before timing. The figures are in docs/decisions.md (WebGPU, narrowed indices)."""

from __future__ import annotations

import argparse
import resource

import numpy as np


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    import devicekit as dk
    from devicekit import kernels
    from devicekit_opencl.renderer import OpenCLRenderer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--size", type=int, default=512, help="matmul size (S x S x S)")
    args = ap.parse_args()
    dev = dk.device("OPENCL")
    plain, comp = dev.compilers[0]
    narrow = OpenCLRenderer(*plain.__reduce__()[1][:8], narrow=True)
    rng = np.random.default_rng(0)
    n, m, s = 1 << 22, 2048, args.size
    cases = [("elementwise a*b+c n=2^22", kernels.elementwise("a * b + c"), {"n": n},
              {"a": n, "b": n, "c": n, "out": n}, lambda h: h["a"] * h["b"] + h["c"]),
             ("reduce sum 2048x2048", kernels.reduce("sum"), {"m": m, "n": m}, {"x": m * m, "out": m},
              lambda h: h["x"].reshape(m, m).sum(1)),
             (f"matmul {s}^3", kernels.matmul(s, s, s, device=dev), {}, {"a": s * s, "b": s * s, "c": s * s},
              lambda h: h["a"].reshape(s, s).astype(np.float64) @ h["b"].reshape(s, s))]
    for name, k, vv, sizes, ref in cases:
        runs = {}
        for tag, r in (("off", plain), ("on", narrow)):
            spec = r.render(k)
            prog = dev.runtime(comp.compile(spec))
            host = {p.name: rng.standard_normal(sizes[p.name]).astype(np.float32) for p in spec.params}
            bufs = [dk.Buffer(dev, sizes[p.name], p.dtype).copyin(host[p.name]) for p in spec.params]
            vals = [vv[v.name] for v in spec.vars]
            prog.execute(bufs, vals, wait=True)
            np.testing.assert_allclose(bufs[-1].numpy(), np.ravel(ref(host)), rtol=2e-3, atol=2e-3)
            runs[tag] = (prog, bufs, vals, [], spec.src.count("long"))
        for rnd in range(args.rounds):
            for tag in (("on", "off") if rnd % 2 else ("off", "on")):
                prog, bufs, vals, ts, _ = runs[tag]
                c0 = _cpu()
                for _ in range(args.reps):
                    prog.execute(bufs, vals, wait=True)
                ts.append((_cpu() - c0) / args.reps)
        med = {t: float(np.median(runs[t][3])) * 1e3 for t in runs}
        print(f"{name}: off {med['off']:.3f} ms, on {med['on']:.3f} ms CPU per launch (on/off "
              f"{med['on'] / med['off']:.2f}); 'long' in the source {runs['off'][4]} -> {runs['on'][4]}", flush=True)


if __name__ == "__main__":
    main()
