"""devicekit-ray on a real local Ray cluster of two nodes (conftest.py): discovery, execution on both nodes,
compile once on the driver or on the actor, plan replay on the actor, copies through the object store, the
conformance kit on a remote CPU device (in a fresh driver process), then faults: a killed actor, a removed node.
The faults run last (they take RAY:1 away). Cost: ~35 s on two cores, of which ~9 s start the cluster and ~17 s are
the kit's subprocess; DEVICEKIT_SLOW=1 runs the whole kit (~60 s more)."""

from __future__ import annotations

import re
import time

import devicekit as dk
import numpy as np
import pytest
from devicekit import kernels, settings
from devicekit.testing.conformance import check_against_reference

from .conftest import ENV

SCALE = kernels.elementwise("a * 2.0 + 1.0", name="scale")


def _conn(spec: str):
    from devicekit_ray.connection import _connections
    return _connections[spec]


def test_each_node_is_one_id_head_first(cluster):
    _c, worker = cluster
    from devicekit_ray.cluster import discover
    devs = discover().devices
    assert [d.kind for d in devs] == ["CPU", "CPU"]
    assert devs[0].head and not devs[1].head
    assert devs[1].node_id == worker.node_id and devs[0].node_id != worker.node_id


def test_info_shows_the_node_and_remote_kind_per_id(cluster):
    from devicekit.cli.info import report, text_report
    from devicekit.registry import get_registry
    _, worker = cluster
    rep = report(get_registry())
    k = rep["kinds"]["RAY"]
    assert k["available"] and k["ids"] == ["RAY", "RAY:1"]
    assert k["id_details"]["RAY:1"].startswith(f"CPU on node {worker.node_id[:8]}"), k["id_details"]
    assert "head" in k["id_details"]["RAY"] and k["id_details"]["RAY:1"].endswith("available")
    text = text_report(rep)
    assert f"RAY:1: CPU on node {worker.node_id[:8]}" in text


def test_a_kernel_runs_on_both_nodes_compiled_once_here(cluster):
    d0, d1 = dk.device("RAY"), dk.device("RAY:1")
    from devicekit_ray.compiler import DriverCompiler
    assert isinstance(d0.compiler, DriverCompiler), "same toolchain on driver and nodes: the driver compiles"
    spec = d0.renderer.render(SCALE)
    assert spec.device == "RAY"
    first, again = d0.compiler.compile(spec), d1.compiler.compile(spec)
    assert again.lib == first.lib and again.from_cache, "RAY:1 reuses RAY's bytes (one base device key)"
    for d in (d0, d1):
        check_against_reference(SCALE, {"a": np.linspace(-3, 3, 100, dtype=np.float32), "n": 100}, d, str(d.spec))
    p = d1.compile(SCALE)
    assert d1.compile(SCALE) is p
    assert p.digest in _conn("RAY:1").loaded, "loaded in the actor by content hash"


def test_the_actor_compiles_when_asked(cluster, monkeypatch):
    from devicekit.registry import reset_registry
    from devicekit_ray.compiler import ActorCompiler
    monkeypatch.setenv("DEVICEKIT_RAY_COMPILE", "actor")
    reset_registry()
    try:
        d1 = dk.device("RAY:1")
        assert isinstance(d1.compiler, ActorCompiler)
        k = kernels.elementwise("a - 3.0", name="minus3")
        check_against_reference(k, {"a": np.arange(64, dtype=np.float32), "n": 64}, d1, "RAY:1 actor-compiled")
        bad = d1.compiler.compile_src
        with pytest.raises(dk.CompileError, match="RAY:1"):
            bad("this is not C or LLVM IR")
    finally:
        monkeypatch.delenv("DEVICEKIT_RAY_COMPILE")
        reset_registry()


def test_buffers_stay_in_the_actor_and_copies_round_trip(cluster):
    d1 = dk.device("RAY:1")
    big = np.random.default_rng(1).standard_normal(1 << 20).astype(np.float32)  # 4 MB: through the object store
    b = dk.Buffer(d1, big.size, dk.dtypes.float32).copyin(big)
    assert type(b.handle).__name__ == "RemoteHandle"
    np.testing.assert_array_equal(b.numpy(), big)
    v = b.view(10, offset=5)
    np.testing.assert_array_equal(v.numpy(), big[5:15])


def test_a_plan_replays_on_the_actor_in_one_call(cluster):
    d1 = dk.device("RAY:1")
    p = d1.compile(SCALE)
    a = dk.Buffer(d1, 256, dk.dtypes.float32).copyin(np.arange(256, dtype=np.float32))
    t = dk.Buffer(d1, 256, dk.dtypes.float32)
    o = dk.Buffer(d1, 256, dk.dtypes.float32)
    plan = dk.Plan(d1).add(p, a=a, out=t, n="n").add(p, a=t, out=o, n="n")
    plan.run(n=256, wait=True)
    np.testing.assert_allclose(o.numpy(), (np.arange(256) * 2 + 1) * 2 + 1)
    calls = next(iter(plan._prepared.values()))
    assert len(calls) == 1 and calls[0][0] is _conn("RAY:1").replay, "both launches packed into one actor call"
    plan.run(n=100, wait=True)  # another value of the plan var: prepared again, replayed again
    assert o.numpy()[99] == (99 * 2 + 1) * 2 + 1


def test_conformance_kit_on_a_remote_cpu(cluster, run_py):
    c, _ = cluster
    slow = settings.get("DEVICEKIT_SLOW")
    if slow:
        args = ["devicekit.testing", "--devicekit-seeds=12", "--devicekit-fuzz=30"]
    else:  # bounded: everything but the three hook checks that start fresh drivers (~5 s each)
        # and the two kit checks that start a fresh driver (huge sizes, Ctrl-C: a spinning remote kernel holds the
        # node's CPU until its driver exits), and truncated bytes (a fresh driver too, ~4.5 s: the bytes go to the
        # node's CPU loader, whose check is the CPU kit's); tests/test_ray_shutdown.py and the CPU kit cover them.
        # Every third case of the per-kernel checks (--devicekit-sample=3: library kernels, memory-order kernels,
        # hand-written C sources): each is a CPU kernel through the same actor calls, and the CPU kit runs every case
        # on the CPU plugin the node uses; the names checks (the actor keys vars by name) run whole
        args = ["devicekit.testing", "--devicekit-seeds=2", "--devicekit-sample=3", "-k", ("not its_own and not "
                "imports_no_toolchain and not info_json and not pathological and not ctrl_c and not huge_sizes "
                "and not truncated_bytes")]
    p = run_py("-m", "pytest", "--pyargs", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rfEs", *args,
               "--devicekit-device=RAY:1", env={**ENV, "RAY_ADDRESS": c.address})
    tail = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped)", tail)}
    assert counts.get("passed", 0) >= (130 if slow else 100) and "failed" not in counts, tail
    skips = [line for line in p.stdout.splitlines() if line.startswith("SKIPPED")]
    allowed = ("has no as_buffer", "has no from_host", "fuzzer is off")
    assert all(any(a in s for a in allowed) for s in skips), skips


def test_a_killed_actor_is_a_clear_error_and_the_other_device_works(cluster):
    import ray
    from devicekit_ray.connection import RemoteDeviceLost
    _, worker = cluster
    d0, d1 = dk.device("RAY"), dk.device("RAY:1")
    p1, p0 = d1.compile(SCALE), d0.compile(SCALE)
    a1 = dk.Buffer(d1, 64, dk.dtypes.float32).copyin(np.ones(64, np.float32))
    o1 = dk.Buffer(d1, 64, dk.dtypes.float32)
    ray.kill(_conn("RAY:1").actor)
    t0 = time.perf_counter()
    with pytest.raises(RemoteDeviceLost) as e:
        p1.execute([a1, o1], [64], wait=True)
    assert time.perf_counter() - t0 < 30, "an error, not a hang"
    msg = str(e.value)
    assert "RAY:1" in msg and worker.node_id[:8] in msg and "buffers" in msg and "lost" in msg, msg
    with pytest.raises(RemoteDeviceLost, match="RAY:1"):  # every later call too, at once
        a1.numpy()
    with pytest.raises(RemoteDeviceLost, match="RAY:1"):
        dk.Buffer(d1, 8, dk.dtypes.float32).copyin(np.zeros(8, np.float32))
    check_against_reference(SCALE, {"a": np.arange(32, dtype=np.float32), "n": 32}, d0, "RAY after RAY:1 died")
    assert p0.execute([dk.Buffer(d0, 4, dk.dtypes.float32).copyin(np.ones(4, np.float32)),
                       dk.Buffer(d0, 4, dk.dtypes.float32)], [4], wait=True) is not None


def test_a_removed_node_is_lost_and_leaves_the_next_discovery(cluster):
    from devicekit_ray import rediscover
    from devicekit_ray.connection import RemoteDeviceLost
    c, worker = cluster
    rediscover()  # fresh actors for RAY and RAY:1 (the killed one is forgotten)
    d1 = dk.device("RAY:1")
    b = dk.Buffer(d1, 16, dk.dtypes.float32).copyin(np.ones(16, np.float32))
    np.testing.assert_array_equal(b.numpy(), np.ones(16, np.float32))
    c.remove_node(worker)
    with pytest.raises(RemoteDeviceLost, match=f"RAY:1.*{worker.node_id[:8]}"):
        b.numpy()
    check_against_reference(SCALE, {"a": np.arange(8, dtype=np.float32), "n": 8}, dk.device("RAY"), "RAY")
    rediscover()
    assert [d.spec for d in dk.devices() if d.kind == "RAY"] == ["RAY"], "the dead node is no device any more"
