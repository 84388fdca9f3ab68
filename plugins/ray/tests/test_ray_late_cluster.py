"""A cluster that comes up after this process listed devices (issue 35): the registry keeps RAY's "unavailable" for
its life, as it keeps every kind's answer (no kind's answer expires in a process: docs/distributed.md, "A cluster
that comes up later"); the reason says so and names the one call that looks again, `devicekit_ray.rediscover()`,
which then finds the cluster. A local Ray (ray.init, one CPU), ~10 s."""

from __future__ import annotations

import pytest


def test_a_cluster_started_later_is_found_after_rediscover_and_the_reason_says_so(monkeypatch):
    ray = pytest.importorskip("ray")
    import devicekit as dk
    from devicekit.errors import DeviceUnavailableError
    from devicekit_ray import rediscover
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert not ray.is_initialized()
    rediscover()
    row = next(d for d in dk.devices() if d.kind == "RAY")
    assert not row.available and "no Ray cluster" in row.reason
    assert "devicekit_ray.rediscover()" in row.reason, row.reason
    ray.init(num_cpus=1, object_store_memory=100 << 20, include_dashboard=False, log_to_driver=False)
    try:
        # the registry's answer stands, like every kind's (a probe per registry): listing and dk.device say so
        assert not next(d for d in dk.devices() if d.kind == "RAY").available
        with pytest.raises(DeviceUnavailableError, match="no Ray cluster"):
            dk.device("RAY")
        rediscover()
        assert [d.spec for d in dk.devices() if d.kind == "RAY" and d.available] == ["RAY"]
        assert dk.device("RAY").spec.kind == "RAY"
    finally:
        ray.shutdown()
        rediscover()
