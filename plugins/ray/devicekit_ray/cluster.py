"""The driver's view of the cluster: whether one is reachable (never starting one), and discovery: each alive node
lists its own devicekit devices in a task pinned to it, in parallel; the answers, in a stable order, are the RAY ids.

Discovery runs once per registry (the probe and count() of the RAY kind); `forget()` makes the next registry ask
again, so a node that joined (or came back) is a device on the next discovery. An unavailable answer is probed again
when asked RECHECK_AFTER (5) seconds later (the RAY kind's `recheck_after`): a cluster started later is found then,
or at once after `devicekit_ray.rediscover()`."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from . import settings
from .plugin import RECHECK_AFTER

__all__ = ["Discovery", "RemoteDevice", "connected", "discover", "forget", "reachable"]

INTERNAL_KINDS = frozenset({"RAY"})  # never offered again by a node (a RAY inside RAY)
DEFAULT_SKIPPED = frozenset({"PYTHON"})  # the reference interpreter: offered only when DEVICEKIT_RAY_KINDS names it
# RAY's "unavailable" is probed again when asked RECHECK_AFTER seconds later (docs/distributed.md, "A cluster that
# comes up later")
LATER = (f"; devicekit asks again when devices are listed or used {RECHECK_AFTER:g}s or more after this answer, so a "
         "cluster that comes up later is seen then (at once: devicekit_ray.rediscover())")


@dataclass(frozen=True)
class RemoteDevice:
    """One devicekit device of one node: what the node's own registry says about it."""

    node_id: str
    address: str  # the node's IP, as Ray reports it
    spec: str  # its id on that node: "CPU", "CUDA:1"
    kind: str
    pairs: tuple[tuple[str, str], ...]  # (pair name, compiler identity), best first, as built on that node
    head: bool = False

    @property
    def where(self) -> str:
        return f"{self.spec} on node {self.node_id[:8]} ({self.address})"


@dataclass
class Discovery:
    """What one discovery found: the devices in id order, and the nodes left out with the reason."""

    devices: list[RemoteDevice] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


_lock = threading.Lock()
_found: Discovery | None = None


def connected() -> bool:
    """Whether this process is connected to a Ray cluster, without importing ray when nobody has."""
    ray = sys.modules.get("ray")
    return ray is not None and bool(ray.is_initialized())


def reachable() -> str | None:
    """None when a cluster is connected or can be connected (RAY_ADDRESS: connect now), else why not in words.
    Never starts a cluster: ray.init() is only called with an explicit address."""
    if connected():
        return None
    address = settings.get("RAY_ADDRESS")
    if not address:
        return ("no Ray cluster: RAY_ADDRESS is not set and this process has not called ray.init(); devicekit never "
                "starts a cluster (start one with `ray start --head` and set RAY_ADDRESS, or call ray.init() first)"
                + LATER)
    if (why := _unanswered(address)) is not None:
        return f"cannot connect to the Ray cluster at RAY_ADDRESS={address}: {why}{LATER}"
    try:
        import ray
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    except Exception as e:  # noqa: BLE001 - unreachable is an answer, not a failure
        return f"cannot connect to the Ray cluster at RAY_ADDRESS={address}: {type(e).__name__}: {e}{LATER}"
    return None


def _unanswered(address: str, limit: float = 2.0) -> str | None:
    """Why nothing accepts a TCP connection at a host:port address within `limit` seconds (ray.init would retry
    for a long time), or None; other address forms (ray://, auto) are left to Ray."""
    import socket
    host, sep, port = address.rpartition(":")
    if not sep or "/" in address or not port.isdigit():
        return None
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=limit).close()
    except OSError as e:
        return f"nothing answers at {address} ({type(e).__name__}: {e})"
    return None


def _wanted(kind: str, example: bool) -> bool:
    chosen = {k.upper() for k in settings.get("DEVICEKIT_RAY_KINDS")}
    if kind in INTERNAL_KINDS:
        return False
    if chosen:
        return kind in chosen
    return kind not in DEFAULT_SKIPPED and not example


def discover() -> Discovery:
    """The remote devices of every alive node (cached until `forget`). Each node answers from a task pinned to it
    (NodeAffinitySchedulingStrategy, soft=False, no CPU reserved); a node that does not answer within
    DEVICEKIT_RAY_DISCOVERY_TIMEOUT seconds, or fails, is left out with a note."""
    global _found
    with _lock:
        if _found is not None:
            return _found
        _found = _discover()
        return _found


def forget() -> None:
    """Drop the cached discovery: the next one asks the cluster again."""
    global _found
    with _lock:
        _found = None


def _discover() -> Discovery:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from .agent import node_devices
    task = ray.remote(num_cpus=0, max_retries=0)(node_devices)
    chosen = {k.upper() for k in settings.get("DEVICEKIT_RAY_KINDS")}
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    head = {n["NodeID"] for n in nodes if "node:__internal_head__" in n.get("Resources", {})}
    nodes.sort(key=lambda n: (n["NodeID"] not in head, n.get("NodeManagerAddress", ""), n["NodeID"]))
    refs = {n["NodeID"]: task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
            .remote(sorted(chosen) or None) for n in nodes}
    limit = settings.get("DEVICEKIT_RAY_DISCOVERY_TIMEOUT")
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=limit)
    ready_set = set(ready)
    out = Discovery()
    for n in nodes:
        nid, addr = n["NodeID"], n.get("NodeManagerAddress", "?")
        ref = refs[nid]
        if ref not in ready_set:
            ray.cancel(ref, force=True)
            out.notes.append(f"node {nid[:8]} ({addr}) did not list its devices within {limit:g}s "
                             "(DEVICEKIT_RAY_DISCOVERY_TIMEOUT); left out")
            continue
        try:
            rows: list[dict[str, Any]] = ray.get(ref)
        except Exception as e:  # noqa: BLE001 - one node's failure leaves the others listed
            out.notes.append(f"node {nid[:8]} ({addr}) failed to list its devices: {type(e).__name__}: "
                             f"{str(e).splitlines()[0] if str(e) else ''}; left out")
            continue
        for r in rows:
            if _wanted(r["kind"], r["example"]):
                out.devices.append(RemoteDevice(nid, addr, r["spec"], r["kind"], tuple(map(tuple, r["pairs"])),
                                                nid in head))
    return out
