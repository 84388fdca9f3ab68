"""Launch plans: captured launches replay in order with new plan-var values; checks happen when a set of values is
first run (or at capture when nothing is left open), never per replay; errors name what was wrong."""

from __future__ import annotations

import devicekit as dk
import numpy as np
import pytest
from devicekit import ir, kernels
from devicekit.ir import dtypes


def _shift_add():
    """y[i] += x[i + s] for i < n: a var `s` that a plan binds per run."""
    k = ir.KernelBuilder("plan_shift")
    n, s = k.var("n", 1, 4096), k.var("s", 0, 64)
    x, y = k.param("x", dtypes.float32, size=n + 64), k.param("y", dtypes.float32, size=n, writable=True)
    i = k.range(n, "global")
    y[i] = y[i] + x[i + s]
    return k.build()


@pytest.mark.parametrize("spec", ["CPU", "PYTHON"])
def test_plan_replays_in_order_with_new_values(spec):
    dev = dk.device(spec)
    fma = dev.compile(kernels.elementwise("a * b + 1.0", name="plan_fma"))
    shift = dev.compile(_shift_add())
    xs = np.arange(128 + 64, dtype=np.float32)
    x, y = dk.Buffer(dev, 192, "float32").copyin(xs), dk.Buffer(dev, 128, "float32").copyin(np.zeros(128, np.float32))
    t = dk.Buffer(dev, 128, "float32")
    plan = dk.Plan(dev)
    plan.add(shift, x=x, y=y, n=128, s="s").add(fma, a=y, b=y, out=t, n=128).add(shift, x=x, y=y, n=128, s=0)
    assert len(plan) == 3 and plan.plan_vars == ("s",)
    want = np.zeros(128, np.float32)
    for s in (3, 3, 10, 3):
        plan.run(s=s, wait=True)
        want = want + xs[s:s + 128]
        tw = want * want + 1
        want = want + xs[:128]
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(t.numpy(), tw, rtol=1e-6)


def test_plan_checks_at_capture_and_per_new_values():
    dev = dk.device("CPU")
    shift = dev.compile(_shift_add())
    x, y = dk.Buffer(dev, 100, "float32"), dk.Buffer(dev, 128, "float32")
    with pytest.raises(ValueError, match="'x' needs 192 elements"):  # fully bound: checked at capture
        dk.Plan(dev).add(shift, x=x, y=y, n=128, s=0)
    plan = dk.Plan(dev).add(shift, x=dk.Buffer(dev, 192, "float32"), y=y, n=128, s="s")
    with pytest.raises(ValueError, match="s"):  # out of the var's bounds: checked on the first run of s=65
        plan.run(s=65)
    with pytest.raises(TypeError, match=r"Plan.run: missing plan var\(s\) s \(the plan's vars: s\)"):
        plan.run()
    with pytest.raises(TypeError, match=r"unknown plan var\(s\) t"):
        plan.run(s=1, t=2)
    with pytest.raises(TypeError, match="Plan.add takes a Program"):
        plan.add(_shift_add(), x=x)
    with pytest.raises(TypeError, match=r"missing argument\(s\) y"):
        plan.add(shift, x=x, n=1, s=0)
    with pytest.raises(ValueError, match="runs on PYTHON, the plan on CPU"):
        plan.add(dk.device("PYTHON").compile(_shift_add()), x=x, y=y, n=1, s=0)


def test_checked_kernels_still_raise_in_a_plan():
    dev = dk.device("CPU")
    k = ir.KernelBuilder("plan_gather")
    n = k.var("n", 1, 64)
    idx, x = k.param("idx", dtypes.int32, size=n), k.param("x", dtypes.float32, size=8)
    out = k.param("out", dtypes.float32, size=n, writable=True)
    i = k.range(n, "global")
    out[i] = x[idx[i]]
    prog = dev.compile(k.build())
    bidx = dk.Buffer(dev, 4, "int32").copyin(np.array([0, 1, 2, 3], np.int32))
    plan = dk.Plan(dev).add(prog, idx=bidx, x=dk.Buffer(dev, 8, "float32"), out=dk.Buffer(dev, 4, "float32"), n=4)
    plan.run()
    bidx.copyin(np.array([0, 1, 99, 3], np.int32))
    with pytest.raises(IndexError, match="99"):
        plan.run()


def _gather(name: str = "plan_mix_gather") -> ir.Kernel:
    """out[i] = x[idx[i]]: an index read from memory, so the kernel carries a run-time bounds check (a checked
    launch reads its check record after it runs)."""
    k = ir.KernelBuilder(name)
    n = k.var("n", 1, 64)
    idx, x = k.param("idx", dtypes.int32, size=n), k.param("x", dtypes.float32, size=16)
    out = k.param("out", dtypes.float32, size=n, writable=True)
    i = k.range(n, "global")
    out[i] = x[idx[i]]
    return k.build()


def test_native_replay_on_cpu_mixes_with_threaded_and_checked_launches():
    """Small launches are packed into one native call; a launch split across threads and a checked one in between
    run through their own paths, in order: every result as numpy computes it, on the first and later runs. The
    checked gather reads what the launch before it wrote and the launch after it reads what it wrote, so a plan
    that ran checked launches out of order (e.g. after the others) gives other values."""
    dev = dk.device("CPU")
    fma = dev.compile(kernels.elementwise("a * b + 1.0", name="plan_native_fma"))
    small = [dev.compile(kernels.elementwise(f"a + {i}.0", inputs=("a",), name=f"plan_small_{i}")) for i in range(3)]
    gather = dev.compile(_gather())
    assert gather.spec.checks is not None, "the gather must be a checked kernel for this test to mean anything"
    big_n = 1 << 20
    assert fma.plan_record([dk.Buffer(dev, 16, "float32").handle] * 3, [16]) is not None  # a one-thread launch
    assert fma.plan_record([dk.Buffer(dev, big_n, "float32").handle] * 3, [big_n]) is None  # split over threads
    x = dk.Buffer(dev, big_n, "float32").copyin(np.full(big_n, 0.5, np.float32))
    y, z = dk.Buffer(dev, big_n, "float32"), dk.Buffer(dev, 16, "float32")
    idx = dk.Buffer(dev, 16, "int32").copyin(np.arange(16, dtype=np.int32)[::-1].copy())
    w, v = dk.Buffer(dev, 16, "float32"), dk.Buffer(dev, 16, "float32")
    plan = dk.Plan(dev)
    plan.add(small[0], a=x, out=z, n=16).add(small[1], a=z, out=y, n=16)  # z = 0.5, y[:16] = 1.5
    plan.add(small[2], a=y, out=v, n=16)  # v = 3.5: the gather reads it
    plan.add(gather, idx=idx, x=v, out=w, n=16)  # w = v reversed = 3.5
    plan.add(small[1], a=w, out=v, n=16)  # v = w + 1 = 4.5: reads the gather's output
    plan.add(fma, a=x, b=x, out=y, n=big_n).add(small[2], a=y, out=z, n=16)  # y = 1.25, z = 3.25
    for _ in range(3):
        for b in (w, v):
            b.copyin(np.zeros(16, np.float32))
        plan.run(wait=True)
        np.testing.assert_allclose(y.numpy(), np.full(big_n, 1.25, np.float32))
        np.testing.assert_allclose(z.numpy(), np.full(16, 3.25, np.float32))
        np.testing.assert_allclose(w.numpy(), np.full(16, 3.5, np.float32))
        np.testing.assert_allclose(v.numpy(), np.full(16, 4.5, np.float32))


def test_call_batcher_packs_runs_of_one_replay_and_keeps_order():
    """The packing Plan and devicekit-ray's actor share: consecutive native launches are one replay call, a launch
    without a native record or an explicit call ends the run, and the calls reproduce the launches in order."""
    from devicekit.plan import CallBatcher
    dev = dk.device("CPU")
    inc = dev.compile(kernels.elementwise("a + 1.0", name="batcher_inc"))
    big_n = 1 << 20
    a, b = dk.Buffer(dev, 16, "float32").copyin(np.zeros(16, np.float32)), dk.Buffer(dev, 16, "float32")
    x, y = dk.Buffer(dev, big_n, "float32").copyin(np.zeros(big_n, np.float32)), dk.Buffer(dev, big_n, "float32")

    def add(batch, src, dst, n, native=True):
        var_vals = {"n": n}
        g, loc = inc.spec.launch_dims(var_vals)
        batch.launch(inc, [src.handle, dst.handle], [n], var_vals, g, loc, native=native)
    batch = CallBatcher()
    add(batch, a, b, 16)
    add(batch, b, a, 16)  # packed with the first
    add(batch, x, y, big_n)  # split over threads: no native record, its own _launch
    add(batch, a, b, 16)
    batch.call(dev.synchronize, ())
    add(batch, b, a, 16, native=False)  # asked not to pack
    calls = batch.calls()
    assert len(calls) == 5 and calls[1][0] == inc._launch and calls[4][0] == inc._launch
    assert calls[3][0] == dev.synchronize
    assert calls[0][0] is calls[2][0] and calls[0][0] != inc._launch, "both runs go to the CPU's one native replay"
    assert calls[0][1][1] == 2 and calls[2][1][1] == 1, "consecutive native launches packed into one call"
    assert calls[0][1][0].dtype == np.int64
    assert batch.calls() == [], "empty after"
    for fn, args in calls:
        fn(*args)
    dev.synchronize()
    np.testing.assert_array_equal(a.numpy(), np.full(16, 4.0, np.float32))
    np.testing.assert_array_equal(b.numpy(), np.full(16, 3.0, np.float32))
    assert y.numpy()[-1] == 1.0


# ---- issue 31.5: a Plan's Buffers as plan arguments, rebound at every run


@pytest.mark.parametrize("spec", ["CPU", "PYTHON"])
def test_rebound_buffers_replay_on_each_new_set(spec):
    """`a="batch"` makes a param a plan argument: each run gives a Buffer; the same plan computes on each set."""
    dev = dk.device(spec)
    fma = dev.compile(kernels.elementwise("a * b + 1.0", name="plan_rebound_fma"))
    inc = dev.compile(kernels.elementwise("a + 1.0", inputs=("a",), name="plan_rebound_inc"))
    t = dk.Buffer(dev, 32, "float32")
    plan = dk.Plan(dev).add(fma, a="batch", b="batch", out=t, n="n").add(inc, a=t, out="result", n="n")
    assert plan.plan_vars == ("batch", "n", "result") and plan.plan_buffers == {"batch", "result"}
    batches = [dk.Buffer(dev, 32, "float32").copyin(np.full(32, k, np.float32)) for k in range(4)]
    outs = [dk.Buffer(dev, 32, "float32") for _ in range(2)]
    for step in range(8):
        k, out = step % 4, outs[step % 2]
        plan.run(batch=batches[k], result=out, n=32, wait=True)
        np.testing.assert_array_equal(out.numpy(), np.full(32, k * k + 2, np.float32))
    plan.run(batch=batches[3], result=outs[0], n=5, wait=True)  # another n with the same Buffers: checked again
    assert outs[0].numpy()[4] == 11


def test_rebound_buffers_are_checked_once_per_distinct_set(monkeypatch):
    from devicekit.errors import FreedBufferError
    from devicekit.runtime import Program
    dev = dk.device("CPU")
    inc = dev.compile(kernels.elementwise("a + 1.0", inputs=("a",), name="plan_rebound_checked"))
    plan = dk.Plan(dev).add(inc, a="x", out="y", n=16).add(inc, a="y", out="x", n=16)
    x, y = (dk.Buffer(dev, 16, "float32").copyin(np.zeros(16, np.float32)) for _ in range(2))
    checks = []
    real = Program.check
    monkeypatch.setattr(Program, "check", lambda self, *a: checks.append(1) or real(self, *a))
    for _ in range(5):
        plan.run(x=x, y=y)
    assert len(checks) == 2, "one check per launch on the first run of a set, none after"
    np.testing.assert_array_equal(x.numpy(), np.full(16, 10, np.float32))
    plan.run(x=y, y=x)  # a new set: checked
    assert len(checks) == 4
    for bad, err, what in ((dk.Buffer(dev, 16, "int32"), TypeError, "param 'a' is .*float32, the buffer is"),
                           (dk.Buffer(dev, 8, "float32"), ValueError, "param 'a' needs 16 elements"),
                           (np.zeros(16, np.float32), TypeError, "must be a devicekit Buffer, got ndarray: .*dk.from_numpy"),
                           (x, ValueError, "params 'a' and 'out' are the same buffer")):
        with pytest.raises(err, match=what):
            plan.run(x=bad, y=y if bad is not x else x)
    with pytest.raises(TypeError, match="plan argument 'x' is a Buffer elsewhere"):
        plan.add(inc, a=y, out=dk.Buffer(dev, 16, "float32"), n="x")
    y.free()
    with pytest.raises(FreedBufferError, match="param 'out'"):
        plan.run(x=x, y=y)  # a set prepared before the free is checked again


def test_rebound_buffers_are_refused_by_a_typo_with_a_hint():
    dev = dk.device("CPU")
    inc = dev.compile(kernels.elementwise("a + 1.0", inputs=("a",), name="plan_rebound_typo"))
    plan = dk.Plan(dev).add(inc, a="batch", out=dk.Buffer(dev, 16, "float32"), n=16)
    with pytest.raises(TypeError, match=r"unknown plan var\(s\) Batch \(did you mean 'batch' for 'Batch'\?\)"):
        plan.run(Batch=dk.Buffer(dev, 16, "float32"))
