"""RAY after `ray.shutdown()` (issue 30.10): an old RAY Buffer or Program made Ray quietly start a new local instance
for the dead actor handle, then raised Ray's raw "Failed to submit task to actor", and `dk.device("RAY")` kept
returning the dead device. Now: RemoteDeviceLost naming the shutdown, Ray not started again, and dk.device probes
again (a new device in a new session, unavailable without one). A local Ray (ray.init, one CPU) twice, ~20 s."""

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
    ray, opts = local_ray
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
    del a, b  # freeing a lost session's buffers is quiet

    ray.init(**opts)  # a new session: dk.device sees the old device's session is over and probes again
    dev2 = dk.device("RAY")
    assert dev2 is not dev
    x = dk.Buffer(dev2, 4, "float32").copyin(np.arange(4, dtype=np.float32))
    assert x.numpy().tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(RemoteDeviceLost, match="lost"):  # the first session's buffer, in the second session
        out.numpy()

    ray.shutdown()  # no session: probed again, RAY is unavailable (not the dead device), and Ray is not started
    with pytest.raises(RemoteDeviceLost, match="ray.shutdown"):
        x.numpy()
    with pytest.raises(DeviceUnavailableError, match="no Ray cluster"):
        dk.device("RAY")
    assert not ray.is_initialized()
