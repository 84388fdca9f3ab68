"""kernels.softmax: one exp per element (stored in `out`, then summed and scaled), against numpy on the PYTHON
reference device and the CPU device, at row lengths around every vector width (tails), with large, -inf and inf
inputs, and in float16 and float64."""

import devicekit as dk
import numpy as np
import pytest
from devicekit import kernels
from devicekit.ir import dtypes
from devicekit.ir.ops import ALU, Ops
from devicekit.render.renderer import Capabilities
from kernel_devices import python_or_cpu

TOL = {np.float32: 1e-4, np.float64: 1e-9, np.float16: 1e-2}  # docs/ir.md: |got - want| <= tol * (1 + |want|)


def _want(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)


def _close(got: np.ndarray, want: np.ndarray, tol: float) -> None:
    got = got.astype(np.float64)
    assert (np.isnan(got) == np.isnan(want)).all(), (got, want)
    ok = ~np.isnan(want)
    err = np.abs(got[ok] - want[ok]) - tol * (1 + np.abs(want[ok]))
    assert (err <= 0).all(), f"worst excess {err.max()}"


def _cpu():
    return python_or_cpu("CPU")


@pytest.fixture(params=["PYTHON", "CPU"])
def device(request):
    return python_or_cpu(request.param)


@pytest.fixture(params=["PYTHON", "CPU", "OPENCL", "WEBGPU"])
def every_device(request):
    """The exp's rounding must survive every backend's compiler: WEBGPU's llvmpipe reassociates floats, which folded
    a first form's (t + c) - c to t (25% off); the kit's softmax check found it."""
    if request.param == "CPU":
        return _cpu()
    try:
        return dk.device(request.param)
    except Exception as e:  # noqa: BLE001 - OPENCL and WEBGPU are optional here
        pytest.skip(f"no {request.param} device: {e}")


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 101])
@pytest.mark.parametrize("vec", [None, 1, 4, 16])
def test_softmax_rows_of_any_length(device, n, vec):
    m = 5
    x = (np.random.default_rng(n).standard_normal((m, n)) * 6).astype(np.float32)
    out = dk.run(kernels.softmax(vec=vec, device=device), device=device, x=x.reshape(-1), m=m, n=n)["out"]
    _close(out.reshape(m, n), _want(x), TOL[np.float32])


def test_softmax_large_and_infinite_inputs(device):
    """exp(x - max) never overflows (x - max <= 0) at |x| ~ 1e38; -inf lanes give 0; a row of -inf (or one with +inf)
    is NaN, as numpy's is."""
    rows = [np.full(19, 3e38), np.linspace(-3e38, 3e38, 19), np.r_[np.full(18, -np.inf), 2.0],
            np.r_[np.full(17, -1e30), -np.inf, 1e30], np.full(19, -np.inf), np.r_[np.zeros(18), np.inf],
            np.r_[np.full(9, 88.0), np.full(10, -100.0)]]
    x = np.array(rows, np.float32)
    out = dk.run(kernels.softmax(device=device), device=device, x=x.reshape(-1), m=len(rows), n=19)["out"]
    _close(out.reshape(x.shape), _want(x), TOL[np.float32])


@pytest.mark.parametrize("dt, np_dt", [(dtypes.float16, np.float16), (dtypes.float64, np.float64)])
def test_softmax_half_and_double(device, dt, np_dt):
    """float16 is computed in float32; float64 in float64 (it was rounded through float32 before: 1e-9 failed)."""
    m, n = 6, 37
    x = (np.random.default_rng(5).standard_normal((m, n)) * 3).astype(np_dt)
    out = dk.run(kernels.softmax(dt, device=device), device=device, x=x.reshape(-1), m=m, n=n)["out"]
    _close(out.reshape(m, n), _want(x), TOL[np_dt])


@pytest.mark.parametrize("regs, lanes", [(2048, 16), (512, 8), (0, 8), (256, 4)])
def test_softmax_computes_each_exp_once(regs, lanes):
    """The speed point (issue 36): each element's exp is computed once, in a `lanes`-wide vector body plus a scalar
    tail, and stored; no exp sits inside a reduction (the three-pass form summed exp(x - max) and computed it again
    for the output: twice the exp, the kernel's cost)."""
    caps = Capabilities(dtypes=frozenset(dtypes.all()), ops=frozenset(), vector_register_bytes=regs)
    k = kernels.softmax(device=caps)
    nodes = k.uops()
    # an exp: the core's EXP2, or the power of two (int bits -> float) of softmax's own float32 exp
    exps = [u for u in nodes if u.op is Ops.EXP2 or (u.op is Ops.BITCAST and u.dtype.scalar() == dtypes.float32)]
    assert sorted(u.dtype.count for u in exps) == [1, lanes]
    in_reduce = {x for u in nodes if u.op is Ops.REDUCE for x in u.src[0].toposort()}
    assert not in_reduce & set(exps)


@pytest.mark.parametrize("vec", [0, 17, 2.0, True])
def test_softmax_names_a_bad_vec(vec):
    with pytest.raises(ValueError, match=r"softmax vec must be an int in 1\.\.16"):
        kernels.softmax(vec=vec)


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64])
def test_softmax_exp_is_within_a_few_ulp_of_numpy(every_device, dt):
    """softmax's float32 exp (a degree-6 series, one power of two, clamped at 2**-127) against float64 numpy over
    the whole range a row's x - max takes: relative error under 1e-5 wherever the result is a normal float (the
    float32 rounding of x - max itself, up to 104 * 2**-24, is most of it), 0 under 2**-126.5 and for -inf."""
    if dt not in every_device.renderer.capabilities.dtypes:
        pytest.skip(f"{every_device} has no {dt}")
    np_dt = {dtypes.float32: np.float32, dtypes.float64: np.float64}[dt]
    # 4001 points (about 27 per ln 2 the exp reduces by); PYTHON interprets the same series as every compiled device
    # does, at 1 ms a point: every fourth point there (4 s -> 1 s each)
    grid = np.linspace(-103.0, 0.0, 4001)[::4 if every_device.spec.kind == "PYTHON" else 1]
    d = np.r_[grid, -0.3466, 0.3466 - 1, -1e-7, -87.3, -88.0, -np.inf].astype(np_dt)
    x = np.r_[d, 0.0].astype(np_dt)  # the max is 0: out = exp(d) / sum
    out = dk.run(kernels.softmax(dt, device=every_device), device=every_device, x=x, m=1, n=x.size)["out"]
    out = out.astype(np.float64)
    e = np.exp(x.astype(np.float64))
    want = e / e.sum()
    normal = want > 2.0 ** -126 * 4
    assert (np.abs(out[normal] - want[normal]) / want[normal]).max() < (1e-5 if dt == dtypes.float32 else 1e-12)
    assert (out[~normal] <= 2.0 ** -123).all() and out[x == -np.inf][0] == 0.0


def test_softmax_exp_is_nineteen_vector_ops():
    """The speed point of the float32 exp (issue 36): 19 ops per vector (a clamp's compare and select, a rounding add,
    an int subtract and one int->float conversion, a degree-5 polynomial, a shift and the scaling multiply), no NaN
    select (the first form: 26 ops, two conversions, a CMPNE and a WHERE for NaN: 256 x 1024 in cache, one thread,
    0.125 -> 0.095 ms)."""
    from devicekit import ir
    k = ir.KernelBuilder("probe")
    x = k.param("x", dtypes.float32, 16)
    d = ir.vectorize(*(x[c] for c in range(16)))
    e = kernels._exp_nonpositive(d)
    ops = [u for u in e.toposort() if (u.op in ALU or u.op is Ops.CAST) and u not in set(d.toposort())]
    assert len(ops) <= 19, sorted(u.op.name for u in ops)
    assert [u.op for u in ops].count(Ops.CAST) <= 1 and Ops.CMPNE not in [u.op for u in ops], sorted(u.op.name for u in ops)
