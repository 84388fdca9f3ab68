"""What the library kernels of `kernels.all_kernels()` compute, in plain numpy (float64, then the output dtype): the
kit's answer that does not come from the PYTHON reference. On PYTHON the reference compared with itself can catch
nothing (a reference that reads one element over agrees with itself); these catch it on every device."""

from __future__ import annotations

from typing import Any

import numpy as np


def _panels_to_rows(bp: np.ndarray, K: int, N: int, tn: int) -> np.ndarray:
    """b (K x N) from its panels (pack_b's layout: panel p is K x tn, columns p*tn ..)."""
    panels = -(-N // tn)
    return bp.reshape(panels, K, tn).transpose(1, 0, 2).reshape(K, panels * tn)[:, :N]


def library_expected(name: str, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """{output param: value} for `kernels.example_inputs(name)`. KeyError for a kernel it does not know."""
    g = {k: np.asarray(v, np.float64) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    f32 = lambda x: np.asarray(x).astype(np.float32).reshape(-1)
    if name == "elementwise_fma":
        return {"out": f32(g["a"] * g["b"] + g["c"])}
    if name == "elementwise_math":
        a, b = g["a"], g["b"]
        with np.errstate(invalid="ignore"):
            return {"out": f32(np.where(a < 0, np.exp2(a), np.sqrt(a) + np.sin(b)))}
    if name == "elementwise_int":
        a, b = inputs["a"].astype(np.int64), inputs["b"].astype(np.int64)
        # the IR's integer division and modulo truncate toward zero (C's), unlike numpy's floor
        t = a * 3 + b
        q = np.trunc(t / 2).astype(np.int64)
        r = np.fmod(a, 5)
        return {"out": (q - r).astype(np.int32)}
    if name.startswith(("reduce_", "softmax", "transpose")):
        m, n = inputs["m"], inputs["n"]
        x = g["x"].reshape(m, n)
        if name == "reduce_sum":
            return {"out": f32(x.sum(axis=1))}
        if name == "reduce_max":
            return {"out": f32(x.max(axis=1))}
        if name == "reduce_sum_axis0":
            return {"out": f32(x.sum(axis=0))}
        if name == "softmax":
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return {"out": f32(e / e.sum(axis=1, keepdims=True))}
        return {"out": f32(x.T)}
    if name == "matmul":
        return {"c": f32(g["a"].reshape(24, 16) @ g["b"].reshape(16, 20))}
    if name == "mlp_layer":
        return {"c": f32(np.maximum(g["a"].reshape(16, 8) @ g["b"].reshape(8, 12) + g["bias"], 0))}
    if name == "pack_b":
        b = g["b"].reshape(16, 20)
        padded = np.zeros((16, 32))
        padded[:, :20] = b
        return {"bp": f32(padded.reshape(16, 2, 16).transpose(1, 0, 2))}
    if name == "matmul_panels":
        return {"c": f32(g["a"].reshape(24, 16) @ _panels_to_rows(g["bp"], 16, 20, 16))}
    if name == "mlp_layer_panels":
        w = _panels_to_rows(g["bp"], 8, 12, 8)
        return {"c": f32(np.maximum(g["a"].reshape(16, 8) @ w + g["bias"], 0))}
    raise KeyError(f"no numpy answer for library kernel {name!r}")
