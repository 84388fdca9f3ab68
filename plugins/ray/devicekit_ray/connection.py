"""The driver's link to one RAY id: its actor (created on first use, pinned to its node), calls that wait
(`call`) and calls that do not (`post`: their refs are checked at the next synchronize), and the one place where
Ray's failures become devicekit's: a dead actor or node is a `RemoteDeviceLost` naming the device and the node,
raised by that call and by every later one without touching Ray again; nothing waits without a limit
(DEVICEKIT_RAY_TIMEOUT)."""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
from typing import Any

from devicekit.errors import DeviceKitError, RemoteDeviceLost

from . import settings
from .cluster import RemoteDevice

__all__ = ["Connection", "RemoteDeviceLost", "RemoteTimeout", "connection", "forget_connections"]

_MAX_PENDING = 256  # calls not waited for before the oldest are collected


class RemoteTimeout(DeviceKitError, TimeoutError):
    """A remote device did not answer within DEVICEKIT_RAY_TIMEOUT seconds."""


class Connection:
    """One RAY id's actor and its bookkeeping (live buffers, programs loaded there)."""

    def __init__(self, name: str, remote: RemoteDevice):
        self.name, self.remote = name, remote
        self.lost: str | None = None
        self._actor: Any = None
        self._info: dict[str, Any] | None = None
        self._pending: list[Any] = []
        self._lock = threading.Lock()
        self.buffer_ids = itertools.count(1)
        self.program_slots = itertools.count(1)
        self.live_buffers = 0
        self.live_bytes = 0
        self.loaded: dict[str, int] = {}  # program content hash -> slot on the actor
        self.replay = self._replay  # one bound method: dk.Plan packs launches whose replay `is` the same
        self.session = _session()  # the Ray session this device was found in: its actors live and die with it

    @property
    def where(self) -> str:
        return f"{self.name} ({self.remote.where})"

    # ---- the actor
    @property
    def actor(self) -> Any:
        self.check()
        if self._actor is None:
            with self._lock:
                if self._actor is None:
                    import ray
                    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

                    from .agent import DeviceActor
                    cls = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)(DeviceActor)
                    strategy = NodeAffinitySchedulingStrategy(self.remote.node_id, soft=False)
                    self._actor = cls.options(scheduling_strategy=strategy, name=None).remote(self.remote.spec)
        return self._actor

    def info(self) -> dict[str, Any]:
        """What the actor's device offers (allocator features, pairs); waits for the actor to be up."""
        if self._info is None:
            self._info = self.call("info")
        return self._info

    # ---- calls
    def call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        """Run `method` on the actor and return its result; everything queued before it runs first."""
        ref = getattr(self.actor, method).remote(*args)
        return self._get(ref, method, timeout)

    def post(self, method: str, *args: Any) -> None:
        """Queue `method` on the actor without waiting (its failure is raised by the next synchronize)."""
        ref = getattr(self.actor, method).remote(*args)
        with self._lock:
            self._pending.append(ref)
            full = len(self._pending) > _MAX_PENDING
        if full:
            self._collect(done_only=True)

    def synchronize(self) -> None:
        if self._actor is None:
            self.check()
            return
        self.call("synchronize")
        self._collect()

    def _collect(self, done_only: bool = False) -> None:
        import ray
        with self._lock:
            refs, self._pending = self._pending, []
        if done_only:
            done, rest = ray.wait(refs, num_returns=len(refs), timeout=0)
            with self._lock:
                self._pending[:0] = rest
            refs = done
        for ref in refs:
            self._get(ref, "a queued call", None)

    def _get(self, ref: Any, what: str, timeout: float | None) -> Any:
        import ray
        from ray import exceptions as rex
        limit = settings.get("DEVICEKIT_RAY_TIMEOUT") if timeout is None else timeout
        try:
            return ray.get(ref, timeout=limit or None)
        except rex.GetTimeoutError:
            raise RemoteTimeout(f"{self.where}: {what} got no answer within {limit:g}s (DEVICEKIT_RAY_TIMEOUT); "
                                "the node may be overloaded or unreachable") from None
        except (rex.RayActorError, rex.ObjectLostError, rex.NodeDiedError, rex.WorkerCrashedError) as e:
            self._lose(e)
            raise RemoteDeviceLost(self._lost_message()) from e
        except rex.RayTaskError as e:  # the actor's method raised: the cause, as itself
            cause = getattr(e, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise

    # ---- faults
    def _lose(self, e: BaseException) -> None:
        first = next((line.strip() for line in str(e).splitlines() if "died" in line or "dead" in line), "")
        why = first or f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        with self._lock:
            if self.lost is None:
                self.lost = (f"{type(e).__name__}: {why}; its {self.live_buffers} buffers ({self.live_bytes} bytes) "
                             "and loaded programs on it are lost")
            self._pending = []

    def _lost_message(self) -> str:
        return (f"{self.where} is lost: {self.lost}. Other devices keep working; dk.device('{self.name}') probes "
                "again (a restarted node or a new Ray session is a device again)")

    def session_over(self) -> str | None:
        """Why the Ray session this device was found in is over (ray.shutdown(), or a new ray.init() since), else
        None. Checked before every call: Ray, shut down, would quietly start a new local instance for the old actor
        handle and then fail with its raw "Failed to submit task to actor"."""
        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized():
            return "Ray was shut down in this process (ray.shutdown())"
        if self.session is not None and _session() != self.session:
            return "Ray was shut down and started again in this process (a new ray.init())"
        return None

    def check(self) -> None:
        if self.lost is None and (why := self.session_over()) is not None:
            with self._lock:
                if self.lost is None:
                    self.lost = (f"{why}; its {self.live_buffers} buffers ({self.live_bytes} bytes) and loaded "
                                 "programs went with that session")
                self._pending = []
        if self.lost is not None:
            raise RemoteDeviceLost(self._lost_message())

    # ---- plans
    def _replay(self, records: Any, n: int) -> None:
        self.post("replay", records, n)


def _session() -> str | None:
    """The current Ray session's id in this process (its GCS address and job), or None when Ray is not running."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    try:
        ctx = ray.get_runtime_context()
        return f"{ctx.gcs_address}/{ctx.get_job_id()}"
    except Exception:  # noqa: BLE001 - an older Ray without these: only shutdown is detected
        return None


_connections: dict[str, Connection] = {}
_lock = threading.Lock()


def connection(name: str, remote: RemoteDevice) -> Connection:
    """The one Connection of RAY id `name` (its allocator, compilers and runtime share it)."""
    with _lock:
        c = _connections.get(name)
        if c is None or c.remote != remote:
            c = _connections[name] = Connection(name, remote)
        return c


def forget_connections() -> None:
    """Drop every Connection, ending the actors of those still alive (their buffers go with them)."""
    with _lock:
        conns = list(_connections.values())
        _connections.clear()
    for c in conns:
        if c._actor is not None and c.lost is None:
            import ray
            with contextlib.suppress(Exception):  # an actor of a session already shut down
                if ray.is_initialized():
                    ray.kill(c._actor)
