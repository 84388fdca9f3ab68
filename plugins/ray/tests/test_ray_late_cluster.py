"""A cluster that comes up after this process listed devices (issue 35): RAY declares `recheck_after` (5 s), so its
"unavailable" is probed again when devices are listed or used that long after it, and the cluster is found without
`devicekit_ray.rediscover()`, which still finds it at once. The reason says both. A local Ray (ray.init, one CPU),
~15 s."""

from __future__ import annotations

import time

import pytest


def _row():
    import devicekit as dk
    return next(d for d in dk.devices() if d.kind == "RAY")


def test_a_cluster_started_later_is_found_by_listing_again_after_recheck_after(monkeypatch):
    ray = pytest.importorskip("ray")
    import devicekit as dk
    from devicekit.errors import DeviceUnavailableError
    from devicekit_ray import rediscover
    from devicekit_ray.plugin import RECHECK_AFTER
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert not ray.is_initialized()
    rediscover()
    row = _row()
    answered = time.monotonic()
    assert not row.available and "no Ray cluster" in row.reason
    assert f"asks again when devices are listed or used {RECHECK_AFTER:g}s" in row.reason, row.reason
    assert "devicekit_ray.rediscover()" in row.reason, row.reason
    ray.init(num_cpus=1, object_store_memory=100 << 20, include_dashboard=False, log_to_driver=False)
    try:
        if time.monotonic() - answered < RECHECK_AFTER:  # ray.init was quick: the answer still stands until then
            with pytest.raises(DeviceUnavailableError, match="no Ray cluster"):
                dk.device("RAY")
            time.sleep(answered + RECHECK_AFTER - time.monotonic() + 0.1)
        # the same registry, no rediscover(): listing probes RAY again and finds the head node's device
        assert [d.spec for d in dk.devices() if d.kind == "RAY" and d.available] == ["RAY"]
        assert dk.device("RAY").spec.kind == "RAY"
        rediscover()  # still the way to look again at once (a new discovery, a new registry)
        assert [d.spec for d in dk.devices() if d.kind == "RAY" and d.available] == ["RAY"]
    finally:
        ray.shutdown()
        rediscover()

