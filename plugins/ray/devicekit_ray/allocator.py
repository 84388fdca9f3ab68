"""RAY's allocator: the memory is the remote device's, held by its actor; a handle here is only a reference
(`RemoteHandle`: buffer id, byte offset, size). Copies go through Ray's object store: copyin sends the bytes as a
numpy array (serialized once, out of band; the actor reads it in place from shared memory), copyout returns one.
Freed allocations are kept on the driver (LRU) so a reused size costs no round trip."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from devicekit.memory import Allocator, BufferOptions, LRUAllocator

from .connection import Connection, RemoteDeviceLost

__all__ = ["RayAllocator", "RemoteHandle", "allocator_for"]


@dataclass(frozen=True)
class RemoteHandle:
    """A reference to `nbytes` bytes at `offset` of buffer `buf_id` in the actor of device `device`."""

    device: str
    buf_id: int
    offset: int
    nbytes: int

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.buf_id, self.offset, self.nbytes)


class RayAllocator(LRUAllocator):
    """Allocations in the actor of one RAY id; every failure of the actor or its node is a RemoteDeviceLost."""

    def __init__(self, conn: Connection, max_cached_bytes: int = 64 << 20):
        super().__init__(conn.name, max_cached_bytes)
        self.conn = conn

    def alloc(self, nbytes: int, options: BufferOptions | None = None) -> RemoteHandle:
        """As any allocator's, but a lost device is a RemoteDeviceLost, not a MemoryError (no memory can help)."""
        self.conn.check()
        try:
            return super().alloc(nbytes, options)
        except MemoryError as e:
            if isinstance(e.__cause__, RemoteDeviceLost):
                raise e.__cause__ from None
            raise

    def _alloc(self, nbytes: int, options: BufferOptions) -> RemoteHandle:
        buf_id = next(self.conn.buffer_ids)
        self.conn.call("alloc", buf_id, nbytes, dataclasses.asdict(options))
        self.conn.live_buffers += 1
        self.conn.live_bytes += nbytes
        return RemoteHandle(self.conn.name, buf_id, 0, nbytes)

    def _free(self, handle: RemoteHandle, nbytes: int, options: BufferOptions) -> None:
        try:
            self.conn.check()
        except RemoteDeviceLost:
            return  # the memory went with the actor (or with the Ray session)
        self.conn.live_buffers -= 1
        self.conn.live_bytes -= nbytes
        self.conn.post("free", handle.buf_id)

    def copyin(self, handle: RemoteHandle, src: memoryview) -> None:
        data = np.frombuffer(src, dtype=np.uint8)
        self.conn.post("copyin", handle.key, data)  # serialized now: the caller may reuse src at once

    def copyout(self, dest: memoryview, handle: RemoteHandle) -> None:
        n = dest.nbytes
        got = self.conn.call("copyout", handle.key, n)
        np.frombuffer(dest, dtype=np.uint8)[:] = got

    def synchronize(self) -> None:
        self.conn.synchronize()

    def gone(self) -> bool:
        """The registry's question before it hands out this device again (devicekit.registry.device): True once
        the Ray session it was found in is over; the plugin then forgets its discovery and connections, so the
        registry's next probe asks Ray again instead of returning the dead device."""
        if self.conn.session_over() is None:
            return False
        from . import forget_session
        forget_session()
        return True


class RayViewAllocator(RayAllocator):
    """A RayAllocator whose remote allocator supports views (`offset`) and device-to-device copies on the actor."""

    def offset(self, handle: RemoteHandle, nbytes: int, offset: int) -> RemoteHandle:
        return RemoteHandle(handle.device, handle.buf_id, handle.offset + offset, nbytes)

    def transfer(self, dest: RemoteHandle, src: RemoteHandle, nbytes: int,
                 src_allocator: Allocator | None = None) -> None:
        if src.device != dest.device:
            raise NotImplementedError(f"{self.conn.name}: transfer from {src.device} (another remote device) is not "
                                      "supported; copy through the host")
        self.conn.post("transfer", dest.key, src.key, nbytes)


def allocator_for(conn: Connection) -> Any:
    """The allocator class the remote device's own allocator allows (views where it has `offset`)."""
    info = conn.info()
    cls = RayViewAllocator if info["offset"] and info["transfer"] else RayAllocator
    return cls(conn)
