"""What runs on the nodes: `node_devices` (the discovery task) and `DeviceActor`, the one actor per remote device that
owns a real devicekit Device there. Buffers live in the actor, keyed by the driver's buffer ids; Programs are cached
by content hash; launches arrive already checked by the driver's `Program.execute`, so the actor calls `_launch`.

Both mark their process (`plugin.IN_AGENT`) so that the node's own registry never lists RAY again."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

__all__ = ["DeviceActor", "node_devices"]

Key = tuple[int, int, int]  # (buffer id, byte offset, nbytes): a RemoteHandle on the wire
_PLAN_MEMO = 64  # decoded plan batches kept per actor


def _mark() -> None:
    from . import plugin
    plugin.IN_AGENT = True


def node_devices(kinds: list[str] | None = None) -> list[dict[str, Any]]:
    """The available devicekit devices of this node (only `kinds` are probed when given), with the compiler identity
    of each pair (what the driver compares with its own to compile there), in the node registry's order."""
    _mark()
    import devicekit as dk
    from devicekit.registry import get_registry
    from devicekit.spec import DeviceSpec
    reg = get_registry()
    rows = []
    for kind, e in sorted(reg.kind_table().items(), key=lambda kv: (-kv[1].priority, kv[0])):
        if kind == "RAY" or (kinds is not None and kind not in kinds) or not reg.availability(e).ok:
            continue
        example = bool(getattr(e.decl, "example", False))
        for i in range(e.count or 0):
            spec = str(DeviceSpec(kind, i))
            try:
                t = dk.target(spec)
                pairs = [(name, c.identity()) for name, (_, c) in zip(t.pair_names, t.compilers)]
            except Exception:  # noqa: BLE001,S112 - a kind without a compile side here is not offered
                continue
            rows.append({"spec": spec, "kind": kind, "example": example, "pairs": pairs})
    return rows


class DeviceActor:
    """The remote half of one RAY id. Created by the driver with `ray.remote(DeviceActor).options(...)`, pinned to its
    node; every method is called in submission order (one caller, max_concurrency 1)."""

    def __init__(self, spec: str):
        _mark()
        import devicekit as dk
        import ray
        self.dev = dk.device(spec)
        self.node_id = ray.get_runtime_context().get_node_id()
        self.bufs: dict[int, tuple[Any, int, Any]] = {}  # id -> (handle, nbytes, options)
        self.progs: dict[str, Any] = {}  # content hash -> Program
        self.slots: dict[int, Any] = {}  # the driver's small int per program (plan records)
        self.inflight: list[Any] = []  # backend handles of launches not waited for
        self.plans: OrderedDict[bytes, list[tuple[Any, tuple]]] = OrderedDict()
        self._lock = threading.Lock()

    # ---- identity
    def info(self) -> dict[str, Any]:
        a = self.dev.allocator
        return {"node_id": self.node_id, "spec": str(self.dev.spec), "offset": a.supports("offset"),
                "transfer": a.supports("transfer"), "pairs": list(self.dev.pair_names)}

    # ---- memory
    def alloc(self, buf_id: int, nbytes: int, options: dict[str, bool]) -> None:
        from devicekit.memory import BufferOptions
        opts = BufferOptions(**options)
        self.bufs[buf_id] = (self.dev.allocator.alloc(nbytes, opts), nbytes, opts)

    def free(self, buf_id: int) -> None:
        entry = self.bufs.pop(buf_id, None)
        if entry is not None:
            self.dev.allocator.free(*entry)

    def _handle(self, key: Key) -> Any:
        buf_id, off, nbytes = key
        try:
            h, total, _ = self.bufs[buf_id]
        except KeyError:
            raise ValueError(f"{self.dev.spec}: no buffer #{buf_id} here (freed, or allocated on another actor)"
                             ) from None
        if off == 0 and nbytes == total:
            return h
        return self.dev.allocator.offset(h, nbytes, off)

    def copyin(self, key: Key, data: np.ndarray) -> None:
        self.dev.allocator.copyin(self._handle(key), memoryview(data).cast("B"))

    def copyout(self, key: Key, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, dtype=np.uint8)
        self.dev.allocator.copyout(memoryview(out), self._handle(key))
        return out

    def transfer(self, dest: Key, src: Key, nbytes: int) -> None:
        self.dev.allocator.transfer(self._handle(dest), self._handle(src), nbytes, self.dev.allocator)

    def synchronize(self) -> None:
        for t in self.inflight:
            t.wait()
        self.inflight.clear()
        self.dev.synchronize()

    # ---- programs
    def compile_src(self, pair: str, src: str) -> tuple:
        """The node's compiler for `pair` on source rendered by the driver: ("ok", bytes) or ("error", message,
        log) for a rejected source (the driver raises the CompileError)."""
        from devicekit.errors import CompileError
        compiler = self.dev.pair(pair)[1]
        try:
            return ("ok", bytes(compiler.compile_src(src)))
        except CompileError as e:
            return ("error", e.message, e.log)

    def load(self, digest: str, slot: int, parts: list) -> bool:
        """Load a program once per content hash: `parts` is [] when the driver knows this actor has it, else
        [ObjectRef of (spec, lib, compiler_id)], fetched from the object store only when missing here."""
        if digest not in self.progs:
            if not parts:
                return False
            import dataclasses

            import ray
            from devicekit.compile.compiler import CompiledSpec
            spec, lib, compiler_id = ray.get(parts[0])
            spec = dataclasses.replace(spec, device=self.dev.spec.kind)  # rendered as RAY's; runs as this kind
            self.progs[digest] = self.dev._program(CompiledSpec(spec, lib, compiler_id))
        self.slots[slot] = self.progs[digest]
        return True

    def launch(self, slot: int, keys: list[Key], vals: list, var_vals: dict, global_size: Any, local_size: Any,
               wait: bool) -> float | None:
        prog = self.slots[slot]
        t = prog._launch([self._handle(k) for k in keys], vals, var_vals, global_size, local_size, wait)
        if wait:
            return t
        if hasattr(t, "wait"):
            self.inflight.append(t)
        return None

    def replay(self, records: np.ndarray, n: int) -> None:
        """Run `n` packed plan records ([slot, nkeys, id, off, nbytes, ..., nvals, vals...] each), natively where
        the node's Program has a plan hook (consecutive ones packed as dk.Plan does), else through `_launch`."""
        blob = records.tobytes()
        calls = self.plans.get(blob)
        if calls is None:
            calls = self._decode(records, n)
            self.plans[blob] = calls
            while len(self.plans) > _PLAN_MEMO:
                self.plans.popitem(last=False)
        for fn, args in calls:
            fn(*args)

    def _decode(self, records: np.ndarray, n: int) -> list[tuple[Any, tuple]]:
        from devicekit.plan import CallBatcher
        r = [int(x) for x in records]
        batch = CallBatcher()
        i = 0
        for _ in range(n):
            prog = self.slots[r[i]]
            nk = r[i + 1]
            keys = [tuple(r[i + 2 + 3 * j:i + 5 + 3 * j]) for j in range(nk)]
            i += 2 + 3 * nk
            nv = r[i]
            vals = r[i + 1:i + 1 + nv]
            i += 1 + nv
            var_vals = dict(zip((v.name for v in prog.spec.vars), vals))
            g, loc = prog.spec.launch_dims(var_vals)
            batch.launch(prog, [self._handle(k) for k in keys], vals, var_vals, g, loc)
        return batch.calls()
