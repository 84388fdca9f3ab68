"""The peer columns of bench/run.py besides numpy: numba, torch eager, torch.compile and jax.jit, each case written
the fastest way a user of that library would (one pass into a preallocated output where the library has `out=`,
fastmath where numba's reductions need it to vectorize), run on the same inputs in the same process. Every peer's
result is checked against numpy before it is timed: a time for a wrong answer is no comparison.

All optional: a peer that does not import is "not installed" (scripts/bench-setup.sh installs them), one that imports
but cannot run here (torch.compile without a working C++ toolchain) is "unavailable: <reason>"; neither is an error.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .more_cases import JACOBI_WEIGHT, MLP_DIMS

__all__ = ["PEERS", "Peer", "PeerTime", "best_peer", "configuration", "missing", "time_peer"]

PEERS = ("numba", "torch", "torch.compile", "jax.jit")
MATMULS = ("matmul", "matmul-default", "matmul-packed", "matmul-packed-once", "matmul-naive", "matmul-naive-searched")


@dataclass(frozen=True)
class PeerTime:
    """One peer on one case: `seconds` (best of the reps), or `note` saying why there is none ("not installed",
    "unavailable: ...", "no version", "wrong: ...")."""

    seconds: float | None
    note: str = ""

    def cell(self) -> str:
        return self.note if self.seconds is None else ""


Peer = str


def missing(peer: Peer) -> str | None:
    """None when `peer` can run here, else "not installed (...)" or "unavailable: <reason>"."""
    mod = {"numba": "numba", "torch": "torch", "torch.compile": "torch", "jax.jit": "jax"}[peer]
    try:
        __import__(mod)
    except ImportError:
        return f"not installed (bash scripts/bench-setup.sh installs {mod})"
    except Exception as e:  # noqa: BLE001 - a broken install is "unavailable", not a crash of the bench
        return f"unavailable: {mod} does not import ({type(e).__name__}: {str(e).splitlines()[0][:100]})"
    if peer == "torch.compile":
        return _torch_compile_problem()
    return None


@functools.cache
def _torch_compile_problem() -> str | None:
    """torch.compile needs inductor's C++ toolchain on CPU: one tiny compile says whether it works here."""
    import torch
    try:
        f = torch.compile(lambda x: x * 2.0 + 1.0)
        if float(f(torch.ones(8))[0]) != 3.0:
            return "unavailable: torch.compile gave a wrong answer on a smoke test"
    except Exception as e:  # noqa: BLE001 - any failure to compile means the column is unavailable here
        return f"unavailable: torch.compile fails here ({type(e).__name__}: {str(e).strip().splitlines()[0][:120]})"
    return None


def configuration(peer: Peer) -> str:
    """How the peer's column runs, in words (the bench's header prints it)."""
    if peer == "numba":
        return ("@njit(parallel=True) with prange over the outer loop; fastmath=True for sum, softmax, matmul, "
                "the MLP and jacobi (reductions vectorize only with it); compiled before timing")
    if peer == "torch":
        import torch
        return (f"torch {torch.__version__} eager, {torch.get_num_threads()} intra-op threads: torch.addcmul(out=), "
                "x.sum(), torch.softmax, torch.mm(out=), torch.index_select(out=), "
                "addmm(out=) + relu_ + addmm(out=), jacobi as in-place slice adds into out's interior")
    if peer == "torch.compile":
        import torch
        return f"torch {torch.__version__} torch.compile (inductor, default mode) of the eager expressions"
    if peer == "jax.jit":
        import jax
        return (f"jax {jax.__version__} jax.jit on {jax.default_backend()} ({len(jax.devices())} device), inputs "
                "on the device before timing, block_until_ready: a*b+c, jnp.sum, jax.nn.softmax, a @ b, "
                "x.at[idx].get(mode='promise_in_bounds'), the whole MLP forward, jacobi as where(border, a, pad(interior))")
    raise ValueError(f"unknown peer {peer!r}; the peers are {', '.join(PEERS)}")


# ------------------------------------------------------------------ each peer's version of a case
def _base(case_name: str) -> str:
    """The product a case computes, as the peers write it (the naive sum is the sum)."""
    if case_name in MATMULS:
        return "matmul"
    return "gather" if case_name.startswith("gather") else "sum" if case_name == "sum-naive" else case_name


def _side(d: dict[str, Any]) -> int:
    return int(d["a"].size ** 0.5 + 0.5)


def _mlp_mats(d: dict[str, Any]) -> tuple[np.ndarray, ...]:
    """(x, w1, b1, w2, b2) of the MLP case as matrices (views of the flat arrays)."""
    k, h, o = MLP_DIMS
    return d["x"].reshape(-1, k), d["w1"].reshape(k, h), d["b1"], d["w2"].reshape(h, o), d["b2"]


def _jacobi_slices(a: Any) -> tuple[Any, ...]:
    """The five slices of a 5-point Jacobi sweep, in the case's order (centre, up, down, left, right)."""
    return a[1:-1, 1:-1], a[:-2, 1:-1], a[2:, 1:-1], a[1:-1, :-2], a[1:-1, 2:]


def _jacobi_inner(a: Any) -> Any:
    c, up, down, left, right = _jacobi_slices(a)
    return (c + up + down + left + right) * JACOBI_WEIGHT


def _jacobi_new(a: Any) -> Any:
    """torch.compile's: a new out, a's clone with the sweep written into its interior (inductor ran it in 120-144 ms
    at 4096^2 against 152-185 for jax's form below; 2-core Rocket Lake, load 7-9)."""
    out = a.clone()
    out[1:-1, 1:-1] = _jacobi_inner(a)
    return out


def _jax_jacobi(a: Any) -> Any:
    """jax's: the interior padded back to n x n, a's border chosen by an iota mask (XLA on CPU ran it in 75-115 ms at
    4096^2 against 410-620 ms for `a.at[1:-1, 1:-1].set(...)`; 2-core Rocket Lake, load 5-7)."""
    import jax
    import jax.numpy as jnp
    i, j = (jax.lax.broadcasted_iota(jnp.int32, a.shape, d) for d in (0, 1))
    edge = (i == 0) | (j == 0) | (i == a.shape[0] - 1) | (j == a.shape[1] - 1)
    return jnp.where(edge, a, jnp.pad(_jacobi_inner(a), 1))


def _torch_jacobi(torch: Any) -> Callable[[dict[str, Any]], Any]:
    """Eager torch's fastest jacobi here: in-place adds into out's interior (out a copy of a made once). The
    alternatives measured on a 2-core Rocket Lake at load 9, 4096^2: this 135 ms, one expression then copy_ 496 ms,
    F.conv2d with a 3x3 cross then copy_ 1674 ms."""
    held: list = []

    def jacobi(d: dict[str, Any]) -> Any:
        if not held or held[0] is not d["a"]:
            a = torch.from_numpy(d["a"])
            held[:] = [d["a"], a, a.clone()]
        a, out = held[1], held[2]
        c, up, down, left, right = _jacobi_slices(a)
        inner = out[1:-1, 1:-1]
        torch.add(c, up, out=inner)
        inner.add_(down).add_(left).add_(right).mul_(JACOBI_WEIGHT)
        return out
    return jacobi


def _torch_mlp(torch: Any) -> Callable[[dict[str, Any]], Any]:
    """addmm into a held hidden tensor, relu_ in place, addmm into a held output: no allocation per call."""
    held: list = []

    def mlp(d: dict[str, Any]) -> Any:
        if not held or held[0] is not d["x"]:
            mats = [torch.from_numpy(np.ascontiguousarray(v)) for v in _mlp_mats(d)]
            m, h, o = mats[0].shape[0], mats[1].shape[1], mats[3].shape[1]
            held[:] = [d["x"], mats, torch.empty(m, h), torch.empty(m, o)]
        (x, w1, b1, w2, b2), hid, out = held[1], held[2], held[3]
        torch.addmm(b1, x, w1, out=hid)
        torch.relu_(hid)
        return torch.addmm(b2, hid, w2, out=out)
    return mlp


def _torch_version(case_name: str, compiled: bool) -> Callable[[dict[str, Any]], Any] | None:
    import torch
    base = _base(case_name)
    held: dict = {}
    if not compiled and base in ("mlp", "jacobi"):
        return (_torch_mlp if base == "mlp" else _torch_jacobi)(torch)

    def tensors(d: dict[str, Any], *names: str) -> list:  # zero-copy views of the case's arrays, made once per dict
        key = (id(d), names)
        if key not in held:
            held.clear()
            held[key] = [torch.from_numpy(np.ascontiguousarray(d[x])) for x in names]
        return held[key]

    if compiled:
        fns = {"fma": lambda a, b, c: a * b + c, "sum": lambda x: x.sum(),
               "softmax": lambda x: torch.softmax(x, dim=1), "matmul": lambda a, b: a @ b,
               "gather": lambda x, idx: x[idx],
               "mlp": lambda x, w1, b1, w2, b2: torch.relu(x @ w1 + b1) @ w2 + b2, "jacobi": _jacobi_new}
        if base not in fns:
            return None
        f = torch.compile(fns[base])
        if base == "mlp":
            return lambda d: f(*(t.view(v.shape) for t, v in zip(tensors(d, "x", "w1", "b1", "w2", "b2"),
                                                                  _mlp_mats(d))))
        if base == "jacobi":
            return lambda d: f(tensors(d, "a")[0])
    if base == "fma":
        out: list = []

        def fma(d):
            a, b, c = tensors(d, "a", "b", "c")
            if compiled:
                return f(a, b, c)
            if not out or out[0].shape != a.shape:
                out[:] = [torch.empty_like(a)]
            return torch.addcmul(c, a, b, out=out[0])
        return fma
    if base == "sum":
        return lambda d: (f if compiled else torch.sum)(tensors(d, "x")[0])
    if base == "softmax":
        def softmax(d):
            x = tensors(d, "x")[0].view(d["m"], d["n"])
            return f(x) if compiled else torch.softmax(x, dim=1)
        return softmax
    if base == "matmul":
        outm: list = []

        def mm(d):
            s = _side(d)
            a, b = (t.view(s, s) for t in tensors(d, "a", "b"))
            if compiled:
                return f(a, b)
            if not outm or outm[0].shape != (s, s):
                outm[:] = [torch.empty(s, s)]
            return torch.mm(a, b, out=outm[0])
        return mm
    if base == "gather":
        outg: list = []

        def gather(d):
            x, idx = tensors(d, "x", "idx")
            if compiled:
                return f(x, idx)
            if not outg or outg[0].shape != idx.shape:
                outg[:] = [torch.empty(idx.shape, dtype=x.dtype)]
            return torch.index_select(x, 0, idx, out=outg[0])
        return gather
    return None


def _jax_version(case_name: str) -> Callable[[dict[str, Any]], Any] | None:
    import jax
    import jax.numpy as jnp
    base = _base(case_name)
    held: dict = {}

    def arrays(d: dict[str, Any], *names: str) -> list:  # on the device once, outside the timed calls
        key = (id(d), names)
        if key not in held:
            held.clear()
            held[key] = [jax.device_put(d[x] if x != "idx" else d[x].astype(np.int32)) for x in names]
        return held[key]

    if base == "fma":
        f = jax.jit(lambda a, b, c: a * b + c)
        return lambda d: f(*arrays(d, "a", "b", "c")).block_until_ready()
    if base == "sum":
        f = jax.jit(jnp.sum)
        return lambda d: f(arrays(d, "x")[0]).block_until_ready()
    if base == "softmax":
        f = jax.jit(lambda x, m, n: jax.nn.softmax(x.reshape(m, n), axis=1), static_argnums=(1, 2))
        return lambda d: f(arrays(d, "x")[0], int(d["m"]), int(d["n"])).block_until_ready()
    if base == "matmul":
        f = jax.jit(lambda a, b, s: a.reshape(s, s) @ b.reshape(s, s), static_argnums=2)
        return lambda d: f(*arrays(d, "a", "b"), _side(d)).block_until_ready()
    if base == "gather":
        f = jax.jit(lambda x, idx: x.at[idx].get(mode="promise_in_bounds"))
        return lambda d: f(*arrays(d, "x", "idx")).block_until_ready()
    if base == "mlp":  # the whole forward, one XLA program
        k, h, o = MLP_DIMS
        f = jax.jit(lambda x, w1, b1, w2, b2: jax.nn.relu(x.reshape(-1, k) @ w1.reshape(k, h) + b1)
                    @ w2.reshape(h, o) + b2)
        return lambda d: f(*arrays(d, "x", "w1", "b1", "w2", "b2")).block_until_ready()
    if base == "jacobi":
        f = jax.jit(_jax_jacobi)
        return lambda d: f(arrays(d, "a")[0]).block_until_ready()
    return None


def version_for(peer: Peer, case_name: str) -> Callable[[dict[str, Any]], Any] | None:
    """A function of the case's inputs running the peer's version (its result: an array-like), None when the peer
    has none for this case."""
    if peer == "numba":
        from .numba_versions import version_for as numba_version
        return numba_version(case_name)
    if peer in ("torch", "torch.compile"):
        return _torch_version(case_name, compiled=peer == "torch.compile")
    if peer == "jax.jit":
        return _jax_version(case_name)
    raise ValueError(f"unknown peer {peer!r}; the peers are {', '.join(PEERS)}")


def _numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor
        return x.detach().numpy()
    return np.asarray(x)


def time_peer(peer: Peer, case: Any, inputs: dict[str, Any], want: np.ndarray, reps: int = 5,
              budget: float | None = None, warmup_s: float = 0.0) -> PeerTime:
    """The peer's best time on `case` (a definition.BenchCase) after a warm-up call whose result must match
    numpy's (`want`) within the case's tolerance (and `warmup_s` seconds more of calls, as `best`'s); otherwise a
    PeerTime with the reason and no time."""
    from .definition import best
    why = missing(peer)
    if why is not None:
        return PeerTime(None, why)
    try:
        fn = version_for(peer, case.name)
        if fn is None:
            return PeerTime(None, "no version")
        got = fn(inputs)  # the warm-up: numba and the jits compile here
        err = case.check(_numpy(got), want)
        if err:
            return PeerTime(None, f"wrong: {err}")
        return PeerTime(best(lambda: (fn(inputs), None)[1], reps, warmup=1, budget=budget, warmup_s=warmup_s))
    except Exception as e:  # noqa: BLE001 - one peer failing on one case leaves the rest of the table
        return PeerTime(None, f"failed: {type(e).__name__}: {str(e).strip().splitlines()[0][:80] if str(e) else ''}")


def best_peer(times: dict[str, float | None]) -> tuple[str, float] | None:
    """(name, seconds) of the fastest peer that has a time, None when none has."""
    timed = [(t, name) for name, t in times.items() if t]
    if not timed:
        return None
    t, name = min(timed)
    return name, t
