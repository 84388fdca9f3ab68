"""A small framework integration: a 2-layer MLP forward pass (relu(x @ w1 + b1) @ w2 + b2, then softmax) built
from `devicekit.kernels`, run on the best available device (or DEVICEKIT_DEVICE), with the weights kept on the
device between layers, checked against numpy.

    .venv/bin/python examples/mlp.py
"""

import sys

import devicekit as dk
import numpy as np
from devicekit import kernels
from devicekit.ir import dtypes


class Linear:
    """One fused layer on a device: out = act(x @ w + b), the weights uploaded once."""

    def __init__(self, dev, w: np.ndarray, b: np.ndarray, batch: int, relu: bool):
        self.dev, (self.k, self.n), self.batch = dev, w.shape, batch
        if relu:
            kernel = kernels.mlp_layer(batch, self.n, self.k)
        else:
            kernel = kernels.matmul(batch, self.n, self.k, bias=True, name="linear")
        self.program = dev.compile(kernel)
        self.w = dk.Buffer(dev, w.size, dtypes.float32).copyin(w.astype(np.float32).ravel())
        self.b = dk.Buffer(dev, b.size, dtypes.float32).copyin(b.astype(np.float32))

    def __call__(self, x: "dk.Buffer") -> "dk.Buffer":
        out = dk.Buffer(self.dev, self.batch * self.n, dtypes.float32)
        self.program.execute([x, self.w, self.b, out])  # params: a (x), b (w), bias, c (out)
        return out


def main() -> int:
    batch, d_in, hidden, classes = 32, 64, 48, 10
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, d_in)).astype(np.float32)
    w1, b1 = rng.standard_normal((d_in, hidden)).astype(np.float32) * 0.1, np.zeros(hidden, np.float32) + 0.01
    w2, b2 = rng.standard_normal((hidden, classes)).astype(np.float32) * 0.1, np.zeros(classes, np.float32)

    dev = dk.device()
    layer1 = Linear(dev, w1, b1, batch, relu=True)
    layer2 = Linear(dev, w2, b2, batch, relu=False)
    softmax = dev.compile(kernels.softmax())

    bx = dk.Buffer(dev, x.size, dtypes.float32).copyin(x.ravel())
    logits = layer2(layer1(bx))
    probs = dk.Buffer(dev, batch * classes, dtypes.float32)
    softmax.execute([logits, probs], [batch, classes], wait=True)
    got = probs.numpy().reshape(batch, classes)

    h = np.maximum(x @ w1 + b1, 0)
    z = h @ w2 + b2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    err = float(np.max(np.abs(got - want)))
    ok = err < 1e-5 and np.allclose(got.sum(axis=1), 1, atol=1e-5)
    print(f"device: {dev.spec} (pair {dev.pair_names[0]!r})")
    print(f"MLP {d_in}->{hidden}->{classes}, batch {batch}: predicted classes {got.argmax(axis=1)[:8].tolist()}...")
    print(f"max abs error vs numpy {err:.2g}: {'ok' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
