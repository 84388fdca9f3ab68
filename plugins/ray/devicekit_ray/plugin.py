"""The devicekit entry point of devicekit-ray: declarations only. Ray is imported only when this process is already
connected to a cluster or RAY_ADDRESS names one; listing devices never starts a cluster.

RAY ids are the remote devices in discovery order (the head node's first, then by address): RAY is the first
device of the first node. Each id's pairs are its remote device's pairs, by name."""

from __future__ import annotations

from devicekit.backend import Backend
from devicekit.hookspecs import hookimpl
from devicekit.plugin import Availability, CompilerPairFactory

from . import settings as _settings  # noqa: F401 - declares RAY_ADDRESS and DEVICEKIT_RAY_* (devicekit info)

DEVICEKIT_API = (1, 0)
KIND = "RAY"
# the probe connects and lists every node's devices (a cold node: 2.5-8.3 s measured, bounded per node by
# DEVICEKIT_RAY_DISCOVERY_TIMEOUT, 20 s); the core's 5 s would cut it short. DEVICEKIT_PROBE_TIMEOUT still wins
PROBE_TIMEOUT = 30.0
# an "unavailable" (no cluster, RAY_ADDRESS unreachable, no node offering a device) is probed again when devices are
# next listed or used this many seconds after it (DeviceKind.recheck_after), so a process that listed devices before
# ray.init() sees RAY later without rediscover(). 5 s: about what a local ray.init() takes (6.3 s measured on 2
# loaded cores), so the first ask after it usually probes again; and at most one probe per 5 s of asking, where a
# probe costs microseconds without a cluster but up to 2 s (RAY_ADDRESS's TCP check) or one discovery (an empty
# cluster) otherwise. A probe that raised or timed out is the plugin's failure and is not asked again
RECHECK_AFTER = 5.0
IN_AGENT = False  # set in the processes of devicekit-ray's own tasks and actors: no RAY inside RAY


def _probe() -> Availability:
    if IN_AGENT:
        return Availability.no("this process is a devicekit-ray actor or task: remote devices are the driver's")
    from .cluster import discover, reachable
    why = reachable()
    if why is not None:
        return Availability.no(why)
    found = discover()
    if not found.devices:
        from .cluster import LATER, forget
        forget()  # nothing to keep: the next probe (after RECHECK_AFTER) discovers again
        notes = "; ".join(found.notes)
        return Availability.no("the Ray cluster's nodes offer no devicekit device (is devicekit installed on them, "
                               f"and DEVICEKIT_RAY_KINDS right?){'; ' + notes if notes else ''}{LATER}")
    return Availability.yes()


def _count() -> int:
    from .cluster import discover
    return len(discover().devices)


def describe_id(index: int) -> str:
    """Where RAY id `index` is, for `devicekit info`: its remote kind, node and state."""
    from .cluster import discover
    from .connection import _connections
    devs = discover().devices
    if index >= len(devs):
        return "not in the last discovery"
    r = devs[index]
    conn = _connections.get(str(_spec(index)))
    state = f"lost: {conn.lost}" if conn is not None and conn.lost else "available"
    pairs = ", ".join(name for name, _ in r.pairs)
    return f"{r.kind} on node {r.node_id[:8]} ({r.address}{', head' if r.head else ''}), as {r.spec} there; " \
           f"pairs {pairs}; {state}"


def _spec(index: int):
    from devicekit.spec import DeviceSpec
    return DeviceSpec(KIND, index)


def _remote(spec):
    from .cluster import discover
    devs = discover().devices
    if spec.index >= len(devs):
        raise LookupError(f"{spec}: the last discovery found {len(devs)} remote devices")
    return devs[spec.index]


def _conn(spec):
    from .connection import connection
    return connection(str(spec), _remote(spec))


def _allocator(spec):
    from .allocator import allocator_for
    return allocator_for(_conn(spec))


def _runtime(spec):
    from .runtime import runtime_factory
    return runtime_factory(_conn(spec))


def _pair(name: str, identity: str, priority: int) -> CompilerPairFactory:
    def renderer(s):
        from .compiler import RayRenderer
        return RayRenderer(_local_pair(s, name)[0])

    def compiler(s):
        from . import settings
        from .compiler import ActorCompiler, DriverCompiler
        where = settings.get("DEVICEKIT_RAY_COMPILE")
        if where != "actor":
            try:
                local = _local_pair(s, name)[1]
            except Exception:
                if where == "driver":
                    raise
                local = None
            if local is not None and (where == "driver" or local.identity() == identity):
                return DriverCompiler(_remote(s).kind, local)
        return ActorCompiler(_conn(s), name, identity)
    return CompilerPairFactory(name, renderer, compiler, priority=priority)


def _local_pair(spec, name: str):
    """The pair `name` of the remote device's kind built here (its renderer, and its compiler when identities
    match); raises, with what to install, where that kind's plugin is missing."""
    import devicekit as dk
    r = _remote(spec)
    try:
        t = dk.target(r.kind)
    except Exception as e:
        raise LookupError(f"{spec} is {r.where}; kernels for it are rendered here, and {r.kind} has no compile side "
                          f"here ({type(e).__name__}: {e}): install the plugin of {r.kind} on this machine") from e
    return t.pair(name)


# the kind, its allocator and runtime: a record (devicekit.backend); its pairs are the remote device's, found at run
# time, so they stay a hook of this module
DEVICEKIT_BACKEND = Backend(
    KIND, "the devices of a Ray cluster's nodes, one actor each (RAY_ADDRESS or ray.init())", priority=1,
    probe=_probe, count=_count, describe_id=describe_id, probe_timeout=PROBE_TIMEOUT,
    recheck_after=RECHECK_AFTER,
    allocator=_allocator, runtime=_runtime)


@hookimpl
def devicekit_compiler_pairs(spec) -> list[CompilerPairFactory]:
    if spec.kind != KIND:
        return []
    from .cluster import connected
    if not connected():
        return [CompilerPairFactory("remote", _unreachable, _unreachable)]
    try:
        r = _remote(spec)
    except LookupError:
        return [CompilerPairFactory("remote", _unreachable, _unreachable)]
    return [_pair(name, identity, len(r.pairs) - i) for i, (name, identity) in enumerate(r.pairs)]


def _unreachable(spec):
    from .cluster import reachable
    raise LookupError(reachable() or f"{spec}: not among the remote devices of the last discovery")
