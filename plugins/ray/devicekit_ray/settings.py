"""RAY's environment variables, declared once through devicekit.settings (`devicekit info` lists them)."""

from __future__ import annotations

from devicekit import settings
from devicekit.settings import get

__all__ = ["get"]

OWNER = "devicekit-ray"

settings.register("RAY_ADDRESS", settings.text, None,
                  "Ray's own variable: the cluster to connect to (host:port or ray://host:port); devicekit only ever "
                  "connects to it, it never starts a cluster", OWNER, shown_default="unset: only a ray.init() made "
                  "by this process counts")
settings.register("DEVICEKIT_RAY_KINDS", settings.name_list, frozenset(),
                  "which remote kinds become RAY ids (e.g. CPU,CUDA)", OWNER,
                  shown_default="every available kind of each node but PYTHON and example devices")
settings.register("DEVICEKIT_RAY_COMPILE", settings.one_of("auto", "driver", "actor"), "auto",
                  "where kernels are compiled: auto (on the driver when the remote kind's plugin is installed here "
                  "with the same compiler identity, else on the device's actor), driver or actor", OWNER)
settings.register("DEVICEKIT_RAY_TIMEOUT", settings.seconds, 300.0,
                  "seconds a call to a remote device may take before it is an error (never a hang)", OWNER)
settings.register("DEVICEKIT_RAY_DISCOVERY_TIMEOUT", settings.seconds, 20.0,
                  "seconds each node has to list its devices; a node that does not answer is left out, with a note",
                  OWNER)
