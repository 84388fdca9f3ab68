"""devicekit-ray: the devices of a Ray cluster's nodes as devicekit devices (kind RAY). Nothing heavy here: the
entry point (plugin.py) imports this package whenever devices are listed."""

from __future__ import annotations

__all__ = ["forget_session", "rediscover"]


def forget_session() -> None:
    """Forget the last discovery, this process's connections and refs (the registry is left as it is)."""
    from .cluster import forget
    from .connection import forget_connections
    from .runtime import forget_refs
    forget()
    forget_connections()
    forget_refs()


def rediscover() -> None:
    """Forget the last discovery and this process's connections, and reset devicekit's registry: the next listing
    asks the cluster again (a node that joined or came back is a device again; RAY ids may be renumbered). A cluster
    that came up after this process listed devices is seen without it once RAY's "unavailable" is 5 s old (the
    kind's recheck_after, docs/distributed.md); this call sees it at once."""
    from devicekit.registry import reset_registry
    forget_session()
    reset_registry()
