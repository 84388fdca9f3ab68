#!/usr/bin/env python3
"""A framework's training step on the CPU device: an MLP (relu(x @ w1 + b1) @ w2 + b2, mean squared error, SGD)
trained as a framework would, a new batch every step through one rebound `dk.Plan` (the batch is a plan argument;
the dataset is uploaded once and each batch is a `Buffer.view` of it), against the same step in numpy, and torch
eager / jax.jit when they are installed, in one process. Sizes: 64-64-10 at batch 100 and 784-512-10 at batch 256.

    python bench/framework_step.py            # prints the table
    python bench/framework_step.py --quick    # fewer steps
    python bench/framework_step.py --peers torch  # a subset of the peers (numpy always runs)
    python bench/framework_step.py --cpu      # this thread's CPU time (a machine shared with other work; numpy's
                                              # BLAS threads and the CPU device's pool are then not counted)

Per size: the step time (mean of the best of 3 runs of S steps), the first step (compiling the step's kernels in this
process, building the Plan and running it once: the compile cache may be warm from an earlier run), the kernels
compiled, and where a step's time goes: the kernels (the step's launches replayed natively by a fixed Plan, ~7 ns a
launch above the kernels), the rest (the rebound plan's lookup per run, and Python around it), and the same step
launched through `execute` per launch (no Plan: what a framework without one pays, ~1-3 us a launch above the kernel).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CLOCK = time.perf_counter


def _example():
    """examples/mlp_train.py's matmul and column-sum kernel builders."""
    spec = importlib.util.spec_from_file_location("dk_mlp_train", os.path.join(HERE, os.pardir, "examples",
                                                                               "mlp_train.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kernels(ex, scale: float, lr: float):
    from devicekit import ir
    from devicekit.ir import dtypes
    f32 = dtypes.float32

    def mse_grad():
        k = ir.KernelBuilder(f"fw_mse_grad_{scale!r}".replace(".", "_").replace("-", "m"))
        n = k.var("n", 1, 1 << 24)
        z, y, dz = k.param("z", f32, size=n), k.param("y", f32, size=n), k.param("dz", f32, size=n, writable=True)
        i = k.range(n, "global")
        dz[i] = (z[i] - y[i]) * scale
        return k.build()

    def sgd():
        k = ir.KernelBuilder(f"fw_sgd_{lr!r}".replace(".", "_"))
        n = k.var("n", 1, 1 << 24)
        w, g = k.param("w", f32, size=n, writable=True), k.param("g", f32, size=n)
        i = k.range(n, "global")
        w[i] = w[i] - g[i] * lr
        return k.build()
    return [ex.matmul("fw_lin_relu", bias=True, relu=True), ex.matmul("fw_lin", bias=True),
            ex.matmul("fw_grad_w", ta=True), ex.matmul("fw_back", tb=True, mask=True), ex.column_sum("fw_colsum"),
            mse_grad(), sgd()]


CHECK_STEPS = 20  # every framework trains this many steps from the same init on the same batches, then its loss


def loss(x, y, p) -> float:
    """The mean squared error of params `p` on one batch, in float64: the number every framework must agree on."""
    w1, b1, w2, b2 = (np.asarray(a, np.float64) for a in p)
    z = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    return float(np.mean((z - y) ** 2))


def agree(got: float | None, want: float) -> str:
    """"ok" when `got` matches numpy's loss to 4 significant digits."""
    if got is None:
        return "-"
    return "ok" if abs(got - want) <= 1e-4 * abs(want) + 1e-7 else f"DIFFERS ({got:.6g} vs {want:.6g})"


def numpy_step(x, y, p, scale, lr):
    w1, b1, w2, b2 = p
    h = np.maximum(x @ w1 + b1, 0)
    z = h @ w2 + b2
    dz = (z - y) * np.float32(scale)
    dw2, db2 = h.T @ dz, dz.sum(0)
    dh = (dz @ w2.T) * (h > 0)
    dw1, db1 = x.T @ dh, dh.sum(0)
    w1 -= lr * dw1
    b1 -= lr * db1
    w2 -= lr * dw2
    b2 -= lr * db2


def bench_size(ex, d: int, h: int, c: int, b: int, steps: int, wanted: set | None = None, nb: int = 4) -> dict:
    import devicekit as dk
    lr = 0.01
    scale = 2.0 / (b * c)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((nb, b, d)).astype(np.float32)
    ys = np.eye(c, dtype=np.float32)[rng.integers(0, c, (nb, b))]
    init = [rng.standard_normal((d, h)).astype(np.float32) * 0.1, np.zeros(h, np.float32),
            rng.standard_normal((h, c)).astype(np.float32) * 0.1, np.zeros(c, np.float32)]
    out: dict = {}

    t0 = CLOCK()
    dev = dk.device("CPU")
    lin_relu, lin, grad_w, back, colsum, dloss, step = (dev.compile(k) for k in _kernels(ex, scale, lr))

    def buf(a):
        return dk.Buffer(dev, a.size, "float32").copyin(np.ascontiguousarray(a, np.float32).ravel())
    X, Y = buf(xs), buf(ys)
    batches = [(X.view(b * d, offset=k * b * d), Y.view(b * c, offset=k * b * c)) for k in range(nb)]
    w1, b1, w2, b2 = (buf(a) for a in init)
    t = {name: dk.Buffer(dev, size, "float32") for name, size in
         (("h", b * h), ("z", b * c), ("dz", b * c), ("dh", b * h), ("dw1", d * h), ("db1", h), ("dw2", h * c),
          ("db2", c))}
    launches = [
        (lin_relu, {"a": "x", "b": w1, "bias": b1, "out": t["h"], "m": b, "n": h, "k": d}),
        (lin, {"a": t["h"], "b": w2, "bias": b2, "out": t["z"], "m": b, "n": c, "k": h}),
        (dloss, {"z": t["z"], "y": "y", "dz": t["dz"], "n": b * c}),
        (grad_w, {"a": t["h"], "b": t["dz"], "out": t["dw2"], "m": h, "n": c, "k": b}),
        (colsum, {"g": t["dz"], "out": t["db2"], "m": b, "n": c}),
        (back, {"a": t["dz"], "b": w2, "mask": t["h"], "out": t["dh"], "m": b, "n": h, "k": c}),
        (grad_w, {"a": "x", "b": t["dh"], "out": t["dw1"], "m": d, "n": h, "k": b}),
        (colsum, {"g": t["dh"], "out": t["db1"], "m": b, "n": h}),
        *((step, {"w": w, "g": t[g], "n": n}) for w, g, n in ((w1, "dw1", d * h), (b1, "db1", h), (w2, "dw2", h * c),
                                                         (b2, "db2", c))),
    ]
    plan = dk.Plan(dev)
    for prog, named in launches:
        plan.add(prog, **named)
    plan.run(x=batches[0][0], y=batches[0][1], wait=True)
    out["first"] = CLOCK() - t0
    out["kernels"] = 7
    out["launches"] = len(launches)
    for prog in (lin_relu, lin, grad_w, back, colsum, dloss, step):
        prog.upgrade()  # the final builds (tiers), as a long training run has
    for s in range(nb):  # each batch's first run checks it
        plan.run(x=batches[s][0], y=batches[s][1])
    for w, a in zip((w1, b1, w2, b2), init):  # the loss check: CHECK_STEPS steps from the init, as numpy's
        w.copyin(a.ravel())
    for s in range(CHECK_STEPS):
        plan.run(x=batches[s % nb][0], y=batches[s % nb][1])
    dev.synchronize()
    out["dk_loss"] = loss(xs[0], ys[0], [w.numpy().reshape(a.shape) for w, a in zip((w1, b1, w2, b2), init)])

    def run_dk(n):
        for s in range(n):
            xb, yb = batches[s % nb]
            plan.run(x=xb, y=yb)
        dev.synchronize()
    out["dk"] = _best(run_dk, steps)

    bound = []
    for prog, named in launches:  # each launch alone, positional, through the launch memo: ~its native call
        named = {k: (batches[0][0] if isinstance(v, str) and v == "x" else batches[0][1] if isinstance(v, str)
                     and v == "y" else v) for k, v in named.items()}
        bufs, vals, _ = prog.bind(named)
        bound.append((prog, bufs, vals))

    def through_execute(n):  # the step as a framework without a Plan launches it: execute per launch
        for _ in range(n):
            for prog, bufs, vals in bound:
                prog.execute(bufs, vals)
        dev.synchronize()
    out["execute"] = _best(through_execute, steps)

    fixed = dk.Plan(dev)  # the step's kernels alone: one native replay of the 12 launches (~7 ns a launch)
    for prog, named in launches:
        fixed.add(prog, **{k: (batches[0][0] if v == "x" else batches[0][1] if v == "y" else v)
                           for k, v in named.items()})
    fixed.run()

    def kernels_only(n):
        for _ in range(n):
            fixed.run()
        dev.synchronize()
    out["kernel"] = _best(kernels_only, steps)

    params = [a.copy() for a in init]
    t0 = CLOCK()
    numpy_step(xs[0], ys[0], params, scale, lr)
    out["numpy_first"] = CLOCK() - t0
    for s in range(1, CHECK_STEPS):
        numpy_step(xs[s % nb], ys[s % nb], params, scale, lr)
    out["numpy_loss"] = loss(xs[0], ys[0], params)

    def run_np(n):
        for s in range(n):
            numpy_step(xs[s % nb], ys[s % nb], params, scale, lr)
    out["numpy"] = _best(run_np, steps)
    for name, peer in (("torch", _torch), ("jax", _jax)):
        run_it = wanted is None or {"torch": "torch", "jax": "jax.jit"}[name] in wanted
        got = peer(xs, ys, init, scale, lr, steps) if run_it else "not run (--peers)"
        if isinstance(got, str):
            out[name], out[f"{name}_why"] = None, got
        else:
            out[name], out[f"{name}_first"], out[f"{name}_loss"] = got
    return out


def _best(fn, steps: int) -> float:
    fn(2)
    t = float("inf")
    for _ in range(3):
        t0 = CLOCK()
        fn(steps)
        t = min(t, (CLOCK() - t0) / steps)
    return t


def _torch(xs, ys, init, scale, lr, steps) -> tuple[float, float, float] | str:
    """torch eager, the same step in place (no autograd: the hand-written backward pass, as numpy's): (step time,
    first step, loss after CHECK_STEPS steps), or why it does not run."""
    try:
        import torch
    except ImportError:
        return "not installed (bash scripts/bench-setup.sh)"
    x = [torch.from_numpy(a) for a in xs]
    y = [torch.from_numpy(a) for a in ys]
    p = [torch.from_numpy(a.copy()) for a in init]

    def run(n, first=0):
        with torch.no_grad():
            for s in range(first, first + n):
                w1, b1, w2, b2 = p
                xb, yb = x[s % len(x)], y[s % len(y)]
                hh = torch.clamp(xb @ w1 + b1, min=0)
                dz = (hh @ w2 + b2 - yb) * scale
                dh = (dz @ w2.T) * (hh > 0)
                w1 -= lr * (xb.T @ dh)
                b1 -= lr * dh.sum(0)
                w2 -= lr * (hh.T @ dz)
                b2 -= lr * dz.sum(0)
    t0 = CLOCK()
    run(1)
    first = CLOCK() - t0
    run(CHECK_STEPS - 1, first=1)
    checked = loss(xs[0], ys[0], [t.numpy() for t in p])
    threads = torch.get_num_threads()
    t_step = _best(run, steps)
    if threads > 1:  # a small step is faster on one thread than on a pool a loaded machine must wake: the faster counts
        torch.set_num_threads(1)
        try:
            t_step = min(t_step, _best(run, steps))
        finally:
            torch.set_num_threads(threads)
    return t_step, first, checked


def _jax(xs, ys, init, scale, lr, steps) -> tuple[float, float, float] | str:
    """jax.jit of the whole step (new params returned, donated buffers not used): (step time, first step with its
    compile, loss after CHECK_STEPS steps), or why it does not run."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return "not installed (bash scripts/bench-setup.sh)"

    @jax.jit
    def step(p, xb, yb):
        w1, b1, w2, b2 = p
        hh = jnp.maximum(xb @ w1 + b1, 0)
        dz = (hh @ w2 + b2 - yb) * scale
        dh = (dz @ w2.T) * (hh > 0)
        return (w1 - lr * (xb.T @ dh), b1 - lr * dh.sum(0), w2 - lr * (hh.T @ dz), b2 - lr * dz.sum(0))
    x = [jnp.asarray(a) for a in xs]
    y = [jnp.asarray(a) for a in ys]
    state = [tuple(jnp.asarray(a) for a in init)]

    def run(n, first=0):
        p = state[0]
        for s in range(first, first + n):
            p = step(p, x[s % len(x)], y[s % len(y)])
        jax.block_until_ready(p)
        state[0] = p
    t0 = CLOCK()
    run(1)
    first = CLOCK() - t0
    run(CHECK_STEPS - 1, first=1)
    checked = loss(xs[0], ys[0], [np.asarray(a) for a in state[0]])
    return _best(run, steps), first, checked


def _peer_config() -> str:
    """torch's and jax's versions and threads, or "not installed"."""
    parts = []
    try:
        import torch
        parts.append(f"torch {torch.__version__} eager, no autograd, the faster of {torch.get_num_threads()} threads "
                     "and 1")
    except ImportError:
        parts.append("torch not installed (bash scripts/bench-setup.sh)")
    try:
        import jax
        parts.append(f"jax {jax.__version__} jax.jit of the whole step on {jax.default_backend()}")
    except ImportError:
        parts.append("jax not installed (bash scripts/bench-setup.sh)")
    return "; ".join(parts)


def main() -> int:
    global CLOCK
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer steps")
    ap.add_argument("--cpu", action="store_true", help="time with this thread's CPU time (a loaded machine)")
    ap.add_argument("--peers", default="torch,jax.jit", help="the peers to run besides numpy (default torch,jax.jit; "
                    "'' for none)")
    args = ap.parse_args()
    wanted = {x.strip() for x in args.peers.split(",") if x.strip()}
    if unknown := wanted - {"torch", "jax.jit"}:
        ap.error(f"--peers: unknown peer(s) {', '.join(sorted(unknown))}; the peers are torch, jax.jit")
    if args.cpu:
        CLOCK = time.thread_time
    ex = _example()
    from devicekit.bench import machine as bench_machine
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# a framework's MLP step on the CPU device: {bench_machine.cpu_model()}; python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cpus, load at start {load0:.2f}, {'thread CPU time' if args.cpu else 'wall time'}")
    print(f"# peers: numpy {np.__version__} (its BLAS); {_peer_config()}")
    print(f"{'size':24} {'devicekit':>10} {'numpy':>10} {'torch':>9} {'jax.jit':>9} {'best peer/dk':>17} "
          f"{'first step dk/np/torch/jax (ms)':>32} {'kernels':>8} {'kernel time':>12} {'rest':>9} {'via execute':>12}")
    checks = []
    for d, h, c, b, steps in ((64, 64, 10, 100, 400), (784, 512, 10, 256, 40)):
        r = bench_size(ex, d, h, c, b, steps // 4 if args.quick else steps, wanted)

        def us(x):
            return "-" if x is None else f"{x * 1e6:.1f}"

        def ms(x):
            return "-" if x is None else f"{x * 1e3:.1f}"
        peers = {k: r[k] for k in ("numpy", "torch", "jax") if r.get(k)}
        top = min(peers, key=peers.get)
        firsts = "/".join(ms(r.get(k)) for k in ("first", "numpy_first", "torch_first", "jax_first"))
        size = f"{d}-{h}-{c}, batch {b}"
        ratio = f"{peers[top] / r['dk']:.2f}x ({top})"
        print(f"{size:24} {us(r['dk']):>10} {us(r['numpy']):>10} {us(r['torch']) if r['torch'] else 'not run':>9} "
              f"{us(r['jax']) if r['jax'] else 'not run':>9} "
              f"{ratio:>17} {firsts:>32} "
              f"{r['kernels']:>4}/{r['launches']:<3} {us(r['kernel']):>12} {us(max(0.0, r['dk'] - r['kernel'])):>9} "
              f"{us(r['execute']):>12}")
        want = r["numpy_loss"]
        checks.append(f"{size}: loss after {CHECK_STEPS} steps, numpy {want:.6g}; devicekit {agree(r['dk_loss'], want)}"
                      + "".join(f"; {name} " + (agree(r.get(f"{k}_loss"), want) if r.get(k) else r.get(f"{k}_why", "-"))
                                for name, k in (("torch", "torch"), ("jax.jit", "jax"))))
    print("(us a step; best peer/dk: the fastest peer's step time over devicekit's, above 1 devicekit is faster; "
          "first step: devicekit compiles the step's kernels (the compile cache may be warm from an earlier run), builds "
          "the Plan and runs it, jax.jit traces and compiles; kernels: distinct programs / launches a step; kernel "
          "time: the step's launches replayed by a fixed Plan, natively; rest: the rebound plan's lookup and Python; "
          "via execute: the step launched by execute per launch, no Plan)")
    print("\n".join(checks))
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# load at end {load1:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
