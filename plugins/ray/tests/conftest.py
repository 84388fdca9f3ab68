"""Fixtures for devicekit-ray's tests: a real local Ray cluster of two nodes (Ray's own `ray.cluster_utils.Cluster`,
one CPU and a 100 MB object store each, no dashboard), shared by the tests of one module and always shut down; RAY
ids are then the nodes' CPU devices: RAY on the head node, RAY:1 on the other."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
NODE = {"num_cpus": 1, "object_store_memory": 100 << 20}
ENV = {"DEVICEKIT_RAY_KINDS": "CPU"}  # no DEVICEKIT_PROBE_TIMEOUT: RAY's own 30 s covers a cold discovery (2.5-8.3 s)


@pytest.fixture(scope="module")
def cluster():
    """(Cluster, the worker node): the driver (this process) is connected, the registry sees RAY and RAY:1."""
    ray = pytest.importorskip("ray")
    import devicekit as dk
    from devicekit_ray import rediscover
    from ray.cluster_utils import Cluster
    env = pytest.MonkeyPatch()
    for k, v in ENV.items():
        env.setenv(k, v)
    env.delenv("RAY_ADDRESS", raising=False)
    c = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    try:
        worker = c.add_node(**NODE)
        c.wait_for_nodes()
        ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
        rediscover()
        assert [d.spec for d in dk.devices() if d.kind == "RAY"] == ["RAY", "RAY:1"]
        yield c, worker
    finally:
        ray.shutdown()
        c.shutdown()
        env.undo()
        rediscover()


@pytest.fixture(autouse=True)
def _ray_env(monkeypatch):
    """The RAY settings of these tests, for each test (the repository's conftest removes DEVICEKIT_* per test)."""
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)


@pytest.fixture
def run_py(tmp_path):
    """run_py(*args, env=...) -> CompletedProcess of `python *args` in the repository root, with a private cache
    and none of the caller's DEVICEKIT_* or RAY_ADDRESS settings."""
    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        e = {k: v for k, v in os.environ.items() if not k.startswith(("DEVICEKIT_", "RAY_ADDRESS"))}
        e["DEVICEKIT_CACHE_DIR"] = str(tmp_path / "dk-cache")
        e.update(env or {})
        return subprocess.run([sys.executable, *args], cwd=ROOT, env=e, capture_output=True, text=True,
                              timeout=timeout, check=False)
    return run
