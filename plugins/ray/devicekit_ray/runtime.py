"""RAY's runtime: a Program here is a reference to the node's Program, loaded once per content hash (the bytes go
through the object store once per driver, and only to actors that lack them). `execute` checks everything here, as
for any device; `_launch` forwards the launch (not waited for unless `wait`). `plan_record` packs a dk.Plan's
launches into int64 records that the actor replays in one call, natively where the node's Program has a plan hook."""

from __future__ import annotations

import dataclasses
import hashlib
import numbers
import threading
from typing import Any

from devicekit.runtime import Program
from devicekit.spec import DeviceSpec

from .connection import Connection

__all__ = ["RayProgram", "content_hash", "forget_refs", "runtime_factory"]

_refs: dict[str, Any] = {}  # content hash -> ObjectRef of (spec, lib, compiler_id): one put per driver process
_refs_lock = threading.Lock()


def content_hash(compiled: Any) -> str:
    """What identifies a Program on a node: its bytes, the compiler that made them and the spec they implement."""
    spec = dataclasses.replace(compiled.spec, kernel=None)
    h = hashlib.sha256(compiled.lib)
    h.update(compiled.compiler_id.encode())
    h.update(repr(spec).encode())
    return h.hexdigest()


def _shared_ref(digest: str, compiled: Any) -> Any:
    import ray
    with _refs_lock:
        ref = _refs.get(digest)
        if ref is None:
            spec = dataclasses.replace(compiled.spec, kernel=None)
            ref = _refs[digest] = ray.put((spec, bytes(compiled.lib), compiled.compiler_id))
        return ref


class RayProgram(Program):
    """A Program of one RAY id: loaded in its actor at construction (a load failure raises here, not at launch)."""

    def __init__(self, compiled: Any, conn: Connection):
        super().__init__(compiled)
        self.conn = conn
        # the id it was loaded on (RAY:1): a Program made without a Device (the seed's dev.runtime(...)) runs there,
        # not on the kind's first id, whose Buffers are another actor's (dk.run read zeros back)
        self.home = DeviceSpec.parse(conn.name)
        self.digest = content_hash(compiled)
        with conn._lock:
            slot = conn.loaded.get(self.digest)
            known = slot is not None
            if slot is None:
                slot = conn.loaded[self.digest] = next(conn.program_slots)
        self.slot = slot
        if not known:
            try:
                conn.call("load", self.digest, slot, [_shared_ref(self.digest, compiled)])
            except BaseException:
                with conn._lock:
                    conn.loaded.pop(self.digest, None)
                raise

    def _launch(self, handles: list, vals: list, var_vals: dict, global_size: Any, local_size: Any,
                wait: bool) -> float | None:
        keys = [h.key for h in handles]
        g = tuple(global_size) if global_size is not None else None
        loc = tuple(local_size) if local_size is not None else None
        if wait:
            return self.conn.call("launch", self.slot, keys, list(vals), dict(var_vals), g, loc, True)
        self.conn.post("launch", self.slot, keys, list(vals), dict(var_vals), g, loc, False)
        return None

    def plan_record(self, handles: list, vals: list) -> Any:
        """(the device's replay, [slot, nkeys, id, offset, nbytes, ..., nvals, vals...]); None when a value is not
        an int (a float scalar travels with `_launch`)."""
        if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in vals):
            return None
        rec = [self.slot, len(handles)]
        for h in handles:
            rec.extend(h.key)
        rec.append(len(vals))
        rec.extend(int(v) for v in vals)
        return self.conn.replay, rec


def forget_refs() -> None:
    """Drop the object-store refs of compiled bytes (they belong to the Ray session that made them)."""
    with _refs_lock:
        _refs.clear()


def runtime_factory(conn: Connection) -> Any:
    return lambda compiled: RayProgram(compiled, conn)
