"""A framework author's training loop: a 2-layer MLP (relu(x @ w1 + b1) @ w2 + b2, mean squared error) trained by
SGD with every step's 13 launches (forward, backward, updates) captured once in a `dk.Plan` and replayed with a new
batch each step: the batch's inputs and targets are plan arguments (`a="x"`, `y="y"`), given to `plan.run(x=...,
y=...)` as Buffers, checked once per distinct batch and replayed with no checks after. The dataset is uploaded once
(one Buffer each for inputs and targets); each batch is a `Buffer.view` of it, so no step copies anything. Weights,
activations and gradients stay on the device for the whole run. Checked against the same steps in numpy, on
PYTHON, the CPU device and OPENCL when it is available (or the devices named on the command line).

    .venv/bin/python examples/mlp_train.py            # PYTHON, CPU, and OPENCL when present
    .venv/bin/python examples/mlp_train.py CPU
"""

from __future__ import annotations

import sys

import devicekit as dk
import numpy as np
from devicekit import ir
from devicekit.ir import dtypes

F32 = dtypes.float32
B, D, H, C = 32, 16, 24, 4  # batch, inputs, hidden units, outputs
NB = 4  # batches in the dataset: step s trains on batch s % NB
LR, STEPS = 0.05, 20


def matmul(name: str, ta: bool = False, tb: bool = False, bias: bool = False, relu: bool = False,
           mask: bool = False) -> ir.Kernel:
    """out[i, j] = sum_r A(i, r) * B(r, j) (+ bias[j], relu, or times (m[i, j] > 0)); A, B read transposed when
    asked: the backward pass's x^T @ dh and dz @ w2^T without a transpose kernel."""
    k = ir.KernelBuilder(name)
    m, n, kk = k.var("m", 1, 4096), k.var("n", 1, 4096), k.var("k", 1, 4096)
    a = k.param("a", F32, shape=(kk, m) if ta else (m, kk))
    b = k.param("b", F32, shape=(n, kk) if tb else (kk, n))
    bs = k.param("bias", F32, size=n) if bias else None
    mk = k.param("mask", F32, shape=(m, n)) if mask else None
    out = k.param("out", F32, shape=(m, n), writable=True)
    i, j, r = k.range(m, "global"), k.range(n, "global"), k.range(kk, "reduce")
    acc = ((a[r, i] if ta else a[i, r]) * (b[j, r] if tb else b[r, j])).sum(r)
    if bs is not None:
        acc = acc + bs[j]
    if relu:
        acc = ir.maximum(acc, 0.0)
    if mk is not None:
        acc = ir.where(mk[i, j] > 0.0, acc, 0.0)
    out[i, j] = acc
    return k.build()


def column_sum(name: str) -> ir.Kernel:
    """out[j] = sum_i g[i, j]: a bias gradient."""
    k = ir.KernelBuilder(name)
    m, n = k.var("m", 1, 4096), k.var("n", 1, 4096)
    g, out = k.param("g", F32, shape=(m, n)), k.param("out", F32, size=n, writable=True)
    j, r = k.range(n, "global"), k.range(m, "reduce")
    out[j] = g[r, j].sum(r)
    return k.build()


def mse_grad() -> ir.Kernel:
    """dz = (z - y) * 2 / (m * n): the gradient of the mean squared error."""
    k = ir.KernelBuilder("mse_grad")
    n = k.var("n", 1, 1 << 20)
    z, y, dz = k.param("z", F32, size=n), k.param("y", F32, size=n), k.param("dz", F32, size=n, writable=True)
    i = k.range(n, "global")
    dz[i] = (z[i] - y[i]) * (2.0 / (B * C))
    return k.build()


def sgd() -> ir.Kernel:
    """w -= LR * g, in place."""
    k = ir.KernelBuilder("sgd")
    n = k.var("n", 1, 1 << 20)
    w, g = k.param("w", F32, size=n, writable=True), k.param("g", F32, size=n)
    i = k.range(n, "global")
    w[i] = w[i] - g[i] * LR
    return k.build()


def train_numpy(xs, ys, w1, b1, w2, b2):
    for s in range(STEPS):
        x, y = xs[s % NB], ys[s % NB]
        h = np.maximum(x @ w1 + b1, 0)
        z = h @ w2 + b2
        dz = (z - y) * np.float32(2.0 / (B * C))
        dw2, db2 = h.T @ dz, dz.sum(0)
        dh = (dz @ w2.T) * (h > 0)
        dw1, db1 = x.T @ dh, dh.sum(0)
        w1, b1, w2, b2 = w1 - LR * dw1, b1 - LR * db1, w2 - LR * dw2, b2 - LR * db2
    return w1, b1, w2, b2, loss_of(xs, ys, w1, b1, w2, b2)


def loss_of(xs, ys, w1, b1, w2, b2) -> float:
    """The mean squared error over the whole dataset."""
    return float(((np.maximum(xs @ w1 + b1, 0) @ w2 + b2 - ys) ** 2).mean())


def train_on(spec: str, data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    dev = dk.device(spec)
    lin_relu, lin = dev.compile(matmul("lin_relu", bias=True, relu=True)), dev.compile(matmul("lin", bias=True))
    grad_w, back = dev.compile(matmul("grad_w", ta=True)), dev.compile(matmul("back", tb=True, mask=True))
    colsum, dloss, step = dev.compile(column_sum("colsum")), dev.compile(mse_grad()), dev.compile(sgd())

    def buf(a):
        return dk.Buffer(dev, a.size, F32).copyin(np.ascontiguousarray(a, np.float32).ravel())

    p = {name: buf(a) for name, a in data.items()}  # the dataset and the weights: uploaded once
    xs = [p["xs"].view(B * D, offset=k * B * D) for k in range(NB)]  # batch k: a view, no copy
    ys = [p["ys"].view(B * C, offset=k * B * C) for k in range(NB)]
    t = {name: dk.Buffer(dev, size, F32) for name, size in
         (("h", B * H), ("z", B * C), ("dz", B * C), ("dh", B * H), ("dw1", D * H), ("db1", H), ("dw2", H * C),
          ("db2", C))}
    plan = dk.Plan(dev)  # "x" and "y": the batch, a plan argument given to every run
    plan.add(lin_relu, a="x", b=p["w1"], bias=p["b1"], out=t["h"], m=B, n=H, k=D)           # forward
    plan.add(lin, a=t["h"], b=p["w2"], bias=p["b2"], out=t["z"], m=B, n=C, k=H)
    plan.add(dloss, z=t["z"], y="y", dz=t["dz"], n=B * C)                                    # backward
    plan.add(grad_w, a=t["h"], b=t["dz"], out=t["dw2"], m=H, n=C, k=B)
    plan.add(colsum, g=t["dz"], out=t["db2"], m=B, n=C)
    plan.add(back, a=t["dz"], b=p["w2"], mask=t["h"], out=t["dh"], m=B, n=H, k=C)
    plan.add(grad_w, a="x", b=t["dh"], out=t["dw1"], m=D, n=H, k=B)
    plan.add(colsum, g=t["dh"], out=t["db1"], m=B, n=H)
    for w, g, n in (("w1", "dw1", D * H), ("b1", "db1", H), ("w2", "dw2", H * C), ("b2", "db2", C)):
        plan.add(step, w=p[w], g=t[g], n=n)                                                   # SGD
    for s in range(STEPS):
        plan.run(x=xs[s % NB], y=ys[s % NB])  # a new batch every step, one Plan
    plan.device.synchronize()
    return {name: p[name].numpy() for name in ("w1", "b1", "w2", "b2")}


def main(argv: list[str]) -> int:
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((NB, B, D)).astype(np.float32)
    ys = np.tanh(xs @ rng.standard_normal((D, C)).astype(np.float32) * 0.5)
    data = {"xs": xs, "ys": ys, "w1": rng.standard_normal((D, H)).astype(np.float32) * 0.3,
            "b1": np.full(H, 0.01, np.float32), "w2": rng.standard_normal((H, C)).astype(np.float32) * 0.3,
            "b2": np.zeros(C, np.float32)}
    *want, loss = train_numpy(xs, ys, data["w1"], data["b1"], data["w2"], data["b2"])
    loss0 = loss_of(xs, ys, data["w1"], data["b1"], data["w2"], data["b2"])
    print(f"MLP {D}->{H}->{C}, {NB} batches of {B}, {STEPS} SGD steps of 13 launches each (one Plan, a new batch "
          f"each step): numpy loss {loss0:.4f} -> {loss:.4f}")
    specs = argv or ["PYTHON", "CPU"] + [str(d.spec) for d in dk.devices() if d.kind == "OPENCL" and d.available][:1]
    ok = loss < loss0
    for spec in specs:
        got = train_on(spec, data)
        err = max(float(np.max(np.abs(got[k] - w.ravel()))) for k, w in zip(("w1", "b1", "w2", "b2"), want))
        good = err < 1e-4
        ok &= good
        print(f"{spec:8} weights after training: max abs difference from numpy {err:.2g} "
              f"{'ok' if good else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
