"""RAY after `ray.shutdown()` (issue 30.10): an old RAY Buffer or Program made Ray quietly start a new local instance
for the dead actor handle, then raised Ray's raw "Failed to submit task to actor", and `dk.device("RAY")` kept
returning the dead device. Now: RemoteDeviceLost naming the shutdown, Ray not started again, and dk.device probes
again (unavailable without a session; a new device in a new one). A local Ray (ray.init, one CPU), ~15 s."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def local_ray(monkeypatch):
    ray = pytest.importorskip("ray")
    from devicekit_ray import rediscover
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    opts = {"num_cpus": 1, "object_store_memory": 100 << 20, "include_dashboard": False, "log_to_driver": False}
    ray.init(**opts)
    rediscover()
    try:
        yield ray, opts
    finally:
        ray.shutdown()
        rediscover()


def test_old_buffers_after_shutdown_are_remote_device_lost_and_the_device_is_probed_again(local_ray):
    import devicekit as dk
    from devicekit import kernels
    from devicekit.errors import DeviceUnavailableError, RemoteDeviceLost
    ray, _ = local_ray
    dev = dk.device("RAY")
    prog = dev.compile(kernels.elementwise("a + b", name="ray_shutdown_add"))
    a, b, out = (dk.Buffer(dev, 8, "float32").copyin(np.arange(8, dtype=np.float32)) for _ in range(3))
    prog.execute([a, b, out], [8], wait=True)
    assert out.numpy().tolist() == [2.0 * i for i in range(8)]

    ray.shutdown()
    with pytest.raises(RemoteDeviceLost, match=r"RAY .* is lost: Ray was shut down in this process"):
        out.numpy()
    with pytest.raises(RemoteDeviceLost, match="ray.shutdown"):
        prog.execute([a, b, out], [8], wait=True)
    with pytest.raises(RemoteDeviceLost):
        dk.Buffer(dev, 4, "float32").copyin(np.zeros(4, np.float32))
    assert not ray.is_initialized(), "using the old device started a new local Ray instance"
    with pytest.raises(DeviceUnavailableError, match="no Ray cluster"):  # probed again, not the dead device
        dk.device("RAY")
    assert not ray.is_initialized()
    del a, b, out  # freeing a lost session's buffers is quiet



def test_a_new_session_gives_a_new_device_and_old_buffers_stay_lost(local_ray):
    import devicekit as dk
    from devicekit.errors import RemoteDeviceLost
    ray, opts = local_ray
    dev = dk.device("RAY")
    out = dk.Buffer(dev, 8, "float32").copyin(np.arange(8, dtype=np.float32))
    assert out.numpy()[7] == 7
    ray.shutdown()
    ray.init(**opts)  # a new session before devicekit noticed: dk.device sees the old one is over and probes again
    dev2 = dk.device("RAY")
    assert dev2 is not dev
    x = dk.Buffer(dev2, 4, "float32").copyin(np.arange(4, dtype=np.float32))
    assert x.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(RemoteDeviceLost, match="started again"):  # the old session's buffer, in the new session
        out.numpy()
    del out  # freeing a lost session's buffer is quiet
