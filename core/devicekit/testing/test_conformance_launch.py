"""Conformance: the launch API framework authors build on, on every device.

- A Program launches by name (`program(a=ba, b=bb, out=bo, n=100, wait=True)`), in any order, with the device's own
  Buffers used as they are; a missing or unknown name is a TypeError naming it, before anything runs.
- Buffers stay resident: a chain of launches reads what the previous one wrote, with no copy in between.
- A `dk.Plan` of two launches with a plan var replays them in order, with new values, checked once per value.
- `execute(wait=False)` returns a handle whose `wait()` returns the seconds; launches on one device run in
  submission order.
- Where the allocator maps memory to the host (`as_buffer`), `np.from_dlpack(buf)` reads the Buffer's own memory;
  where it wraps host memory (`from_host`), a kernel writes the caller's array through `dk.from_numpy(arr)`.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.devicekit_conformance


def _fma():
    from devicekit import kernels
    return kernels.elementwise("a * b + 1.0", name="dk_conf_named")


def test_named_launch_runs_like_execute(dk_device):
    import devicekit as dk
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(100).astype(np.float32), rng.standard_normal(100).astype(np.float32)
    prog = dk_device.compile(_fma())
    ba, bb = (dk.Buffer(dk_device, 100, dk.dtypes.float32).copyin(x) for x in (a, b))
    bo = dk.Buffer(dk_device, 100, dk.dtypes.float32).copyin(np.zeros(100, np.float32))
    prog(out=bo, n=100, b=bb, a=ba, wait=True)
    np.testing.assert_allclose(bo.numpy(), a * b + np.float32(1), rtol=1e-5)
    with pytest.raises(TypeError, match="missing argument"):
        prog(a=ba, b=bb, n=100)
    with pytest.raises(TypeError, match="unexpected argument"):
        prog(a=ba, b=bb, out=bo, n=100, bogus=1)


def test_buffers_stay_resident_across_launches(dk_device):
    import devicekit as dk
    prog = dk_device.compile(_fma())
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    bufs = [dk.Buffer(dk_device, 64, dk.dtypes.float32).copyin(x) for _ in range(3)]
    want = x.copy()
    a0, b1, b2 = bufs
    for src, dst in ((a0, b1), (b1, b2), (b2, b1), (b1, b2)):  # each launch reads what the one before wrote
        prog(a=src, b=a0, out=dst, n=64)
        want = want * x + np.float32(1)
    np.testing.assert_allclose(b2.numpy(), want, rtol=1e-5)


def test_dlpack_export_of_host_memory(dk_device):
    import devicekit as dk
    if not dk_device.allocator.supports("as_buffer"):
        pytest.skip(f"{dk_device.spec}'s allocator has no as_buffer: its memory is not exported through DLPack")
    # cpu_access: BufferOptions' promise that the host can map it (CUDA maps only such buffers and host=True ones)
    buf = dk.Buffer(dk_device, 50, dk.dtypes.int32, dk.BufferOptions(cpu_access=True))
    buf.copyin(np.arange(50, dtype=np.int32))
    arr = np.from_dlpack(buf)
    np.testing.assert_array_equal(arr, np.arange(50))
    arr[3] = -7  # the same memory, no copy
    assert buf.numpy()[3] == -7


def test_wrapped_host_array_is_written_by_a_kernel(dk_device):
    import devicekit as dk
    if not dk_device.allocator.supports("from_host"):
        pytest.skip(f"{dk_device.spec}'s allocator has no from_host: it does not wrap host arrays")
    a = np.linspace(0, 1, 100, dtype=np.float32)
    out = np.zeros(100, np.float32)
    dk_device.compile(_fma())(a=dk.from_numpy(a, dk_device), b=dk.from_numpy(a, dk_device),
                              out=dk.from_numpy(out, dk_device), n=100, wait=True)
    np.testing.assert_allclose(out, a * a + np.float32(1), rtol=1e-6)


def test_launches_not_waited_for_return_handles_and_run_in_order(dk_device):
    import devicekit as dk
    prog = dk_device.compile(_fma())
    x = np.full(256, 0.5, np.float32)
    a, b = (dk.Buffer(dk_device, 256, dk.dtypes.float32).copyin(x) for _ in range(2))
    handles = [prog.execute([a, a, b], [256]), prog.execute([b, b, a], [256]), prog.execute([a, a, b], [256])]
    assert all(callable(getattr(h, "wait", None)) for h in handles), handles  # execute(wait=False): a handle
    t = handles[-1].wait()  # waits for it and everything queued on the device before it
    assert isinstance(t, float) and t >= 0
    want = x
    for _ in range(3):
        want = want * want + np.float32(1)
    np.testing.assert_allclose(b.numpy(), want, rtol=1e-5)
    dk_device.synchronize()
    assert all(h.wait() >= 0 for h in handles)


def test_a_plan_replays_its_launches_in_order(dk_device):
    import devicekit as dk
    prog = dk_device.compile(_fma())
    x = np.full(128, 0.25, np.float32)
    a, b = (dk.Buffer(dk_device, 128, dk.dtypes.float32).copyin(x) for _ in range(2))
    plan = dk.Plan(dk_device).add(prog, a=a, b=a, out=b, n="n").add(prog, a=b, b=b, out=a, n="n")
    want = x.copy()
    for n in (128, 128, 64):
        plan.run(n=n)
        w = want[:n] * want[:n] + np.float32(1)
        want[:n] = w * w + np.float32(1)
    dk_device.synchronize()
    np.testing.assert_allclose(a.numpy(), want, rtol=1e-5)
    with pytest.raises(TypeError, match="missing plan var"):
        plan.run()
