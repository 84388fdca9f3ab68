"""Data-dependent indices (issue 11 item 3): an access the verifier cannot prove in bounds is guarded at run time on
every device. Nothing outside a buffer is read or written, and the launch raises IndexError naming the kernel, the
param and the offending index; the process survives (10**9 used to segfault the CPU pairs and the ACME device)."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir
from devicekit.ir import dtypes
from devicekit.memory import Buffer
from devicekit.testing.devices import device_for

DEVICES = ["PYTHON", "CPU/llvm", "CPU/c", "ACME"]



@pytest.fixture(params=DEVICES)
def dev(request):
    return device_for(request.param)


def gather(idx_dtype=dtypes.int64, **build) -> ir.Kernel:
    k = ir.KernelBuilder("gather")
    n, m = k.var("n", 1, 1 << 20), k.var("m", 1, 1 << 20)
    x = k.param("x", dtypes.float32, m)
    idx = k.param("idx", idx_dtype, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    out[i] = x[idx[i]] * 2.0
    return k.build(**build)


def scatter() -> ir.Kernel:
    k = ir.KernelBuilder("scatter")
    n, m = k.var("n", 1, 1 << 20), k.var("m", 1, 1 << 20)
    v = k.param("v", dtypes.float32, n)
    idx = k.param("idx", dtypes.int64, n)
    out = k.param("out", dtypes.float32, m, writable=True)
    i = k.range(n, "global")
    out[idx[i]] = v[i]
    return k.build()


def gather_sum() -> ir.Kernel:
    """A gather inside a reduction: the failure is reduced before it is recorded."""
    k = ir.KernelBuilder("gather_sum")
    n, m = k.var("n", 1, 1 << 16), k.var("m", 1, 1 << 20)
    x = k.param("x", dtypes.float32, m)
    idx = k.param("idx", dtypes.int32, n * 4)
    out = k.param("out", dtypes.float32, n, writable=True)
    i, r = k.range(n, "global"), k.range(4, "reduce")
    out[i] = x[idx[i * 4 + r]].sum(r)
    return k.build()


X = np.arange(10, dtype=np.float32) + 0.5
IDX = np.array([3, 0, 9, 4, 4, 1, 7], dtype=np.int64)


@pytest.mark.parametrize("bad", [10**9, -1, 10, 11, -(10**12)])
def test_out_of_bounds_gather_raises_naming_kernel_param_and_index(dev, bad):
    idx = IDX.copy()
    idx[2] = bad
    with pytest.raises(IndexError, match=rf"kernel gather: access to x\[{bad}\] is out of bounds \(size 10\)"):
        dk.run(gather(), dev, x=X, idx=idx, n=len(idx), m=len(X))
    # the process and the device are fine afterwards
    got = dk.run(gather(), dev, x=X, idx=IDX, n=len(IDX), m=len(X))["out"]
    np.testing.assert_array_equal(got, X[IDX] * 2)


@pytest.mark.parametrize("bad", [2**31 - 1, -1, 10, -(2**31)])
def test_int32_indices(dev, bad):
    idx = IDX.astype(np.int32)
    idx[-1] = bad
    with pytest.raises(IndexError, match=rf"access to x\[{bad}\]"):
        dk.run(gather(dtypes.int32), dev, x=X, idx=idx, n=len(idx), m=len(X))


@pytest.mark.parametrize("bad", [10**9, -1, 8, 9])
def test_out_of_bounds_scatter_raises_and_writes_nothing_outside(dev, bad):
    """out is the first half of one allocation, `neighbour` the second: an unchecked out[8] would be neighbour[0]."""
    root = Buffer(dev, 16, dtypes.float32).copyin(np.full(16, -7.0, np.float32))
    out, neighbour = root.view(8), root.view(8, offset=8)
    idx = np.array([0, 5, bad, 2], dtype=np.int64)
    bufs = [Buffer(dev, 4, dtypes.float32).copyin(np.arange(4, dtype=np.float32) + 1),
            Buffer(dev, 4, dtypes.int64).copyin(idx), out]
    prog = dev.compile(scatter())
    with pytest.raises(IndexError, match=rf"kernel scatter: access to out\[{bad}\] is out of bounds \(size 8\)"):
        prog.execute(bufs, [4, 8], wait=True)
    np.testing.assert_array_equal(neighbour.numpy(), np.full(8, -7.0, np.float32))


def test_gather_inside_a_reduction(dev):
    idx = np.array([0, 1, 2, 3, 9, 8, 7, 6], dtype=np.int32)
    want = X[idx].reshape(2, 4).sum(axis=1)  # numpy: on PYTHON the reference would be compared with itself
    np.testing.assert_allclose(dk.run(gather_sum(), dev, x=X, idx=idx, n=2, m=10)["out"], want)
    idx[5] = 100
    with pytest.raises(IndexError, match=r"kernel gather_sum: access to x\[100\]"):
        dk.run(gather_sum(), dev, x=X, idx=idx, n=2, m=10)


def test_in_bounds_gathers_match_the_reference(dev):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(1000).astype(np.float32)
    idx = rng.integers(0, 1000, 4099)
    idx[:4] = [0, 999, 1, 998]  # both ends of x
    got = dk.run(gather(), dev, x=x, idx=idx, n=len(idx), m=len(x))["out"]
    np.testing.assert_array_equal(got, x[idx] * 2)  # numpy, not the reference (PYTHON is one of the devices)


def test_the_check_is_against_the_declared_size(dev):
    """A buffer larger than the declared size does not widen what the kernel may touch (PYTHON included)."""
    idx = np.array([8, 0, 1, 7], dtype=np.int64)
    with pytest.raises(IndexError, match=r"access to x\[8\] is out of bounds \(size 8\)"):
        dk.run(gather(), dev, x=X, idx=idx, n=4, m=8)


def test_the_hidden_buffer_is_invisible():
    prog = dk.device("CPU").compile(gather())
    assert [p.name for p in prog.spec.user_params] == ["x", "idx", "out"]
    assert prog.spec.params[-1].name == "dk_bounds" and prog.spec.checks is not None
    with pytest.raises(TypeError, match=r"expected 3 buffers \(x, idx, out\), got 4"):
        prog.execute([Buffer("CPU", 10, dtypes.float32), Buffer("CPU", 7, dtypes.int64),
                      Buffer("CPU", 7, dtypes.float32), Buffer("CPU", 2, dtypes.int64)], [7, 10])
    with pytest.raises(ValueError, match="reserved"):
        ir.KernelBuilder("k").param("dk_bounds", dtypes.float32, 4)


def test_proven_accesses_get_no_check():
    from devicekit import kernels
    from devicekit.ir.linearize import lower
    caps = dk.device("CPU").renderer.capabilities
    for name, make in kernels.all_kernels().items():
        assert lower(make(), caps).checks is None, name


@pytest.mark.parametrize("how", ["kernel", "access"])
def test_opt_out(dev, how):
    """In-bounds data only: an unchecked out-of-bounds access is the user's promise broken."""
    if how == "kernel":
        kern = gather(checked=False)
    else:
        k = ir.KernelBuilder("gather")
        n, m = k.var("n", 1, 1 << 20), k.var("m", 1, 1 << 20)
        x, idx = k.param("x", dtypes.float32, m), k.param("idx", dtypes.int64, n)
        out = k.param("out", dtypes.float32, n, writable=True)
        i = k.range(n, "global")
        out[i] = x.load(idx[i], unchecked=True) * 2.0
        kern = k.build()
    assert kern.key != gather().key  # another program in every memo and cache
    if dev.spec.kind != "PYTHON":
        spec = dev.renderer.render(kern)
        assert spec.checks is None and "dk_bounds" not in spec.src
        assert "dk_bounds" in dev.renderer.render(gather()).src
    got = dk.run(kern, dev, x=X, idx=IDX, n=len(IDX), m=len(X))["out"]
    np.testing.assert_array_equal(got, X[IDX] * 2)


def test_gated_data_dependent_load_with_a_gate_that_does_not_guard(dev):
    k = ir.KernelBuilder("gated")
    n, m = k.var("n", 1, 1 << 20), k.var("m", 1, 1 << 20)
    x, idx = k.param("x", dtypes.float32, m), k.param("idx", dtypes.int64, n)
    out = k.param("out", dtypes.float32, n, writable=True)
    i = k.range(n, "global")
    j = idx[i]
    out[i] = x.load(j, gate=j.ne(-5), default=-1.0)
    kern = k.build()
    idx = IDX.copy()
    idx[1] = -5  # gated off: reads the default, no error
    np.testing.assert_array_equal(dk.run(kern, dev, x=X, idx=idx, n=7, m=10)["out"],
                                  np.where(idx == -5, -1.0, X[np.where(idx == -5, 0, idx)]).astype(np.float32))
    idx[3] = 12
    with pytest.raises(IndexError, match=r"kernel gated: access to x\[12\]"):
        dk.run(kern, dev, x=X, idx=idx, n=7, m=10)


@pytest.mark.parametrize("make", [gather, scatter, gather_sum])
def test_the_record_is_kept_in_registers_and_stored_after_every_loop(make):
    """A conditional store to the record in every iteration kept LLVM from vectorizing (a masked scatter per vector):
    the scheduler keeps a running maximum in an accumulator and stores it once, outside every loop."""
    from devicekit.ir.linearize import lower
    from devicekit.ir.ops import Ops
    lin = lower(make(), dk.device("CPU").renderer.capabilities)
    depth, record_stores = 0, []
    for u in lin.uops:
        depth += u.op is Ops.RANGE
        depth -= u.op is Ops.ENDRANGE
        if u.op is Ops.STORE and u.src[0].src[0].arg[1] == "dk_bounds":
            record_stores.append(depth)
    assert record_stores == [0, 0]


def test_resident_launches_after_a_failed_one_and_from_threads():
    """The CPU fast path keeps its zeroed records for reuse: a failed launch's record is not reused (the next good
    launch raises nothing), and concurrent launches each get their own."""
    from concurrent.futures import ThreadPoolExecutor
    cpu = dk.device("CPU")
    prog = cpu.compile(gather())
    bx = Buffer(cpu, 10, dtypes.float32)
    bx.copyin(X)

    def launch(bad: int | None):
        idx = IDX.copy()
        if bad is not None:
            idx[2] = bad
        bi, bo = Buffer(cpu, 7, dtypes.int64), Buffer(cpu, 7, dtypes.float32)
        bi.copyin(idx)
        try:
            prog.execute([bx, bi, bo], [7, 10])
        except IndexError as e:
            return str(e)
        return bo.numpy().tolist()

    good = (X[IDX] * 2).tolist()
    assert "x[10]" in launch(10) and launch(None) == good
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(launch, [None, 12, None, -3] * 25))
    for bad, out in zip([None, 12, None, -3] * 25, outs):
        assert out == good if bad is None else f"x[{bad}]" in out
