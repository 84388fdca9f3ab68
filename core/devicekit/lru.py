"""One bounded, thread-safe, least-recently-used map for every in-process memo of the core and its plugins.

Each memo used to carry its own OrderedDict, lock and eviction loop (`Device._programs`, the CPU plugin's render
and loader memos, the compile cache's memory layer, the stored search choices); they differed only in how they
bound themselves. `LRU` bounds by entry count and, when given a `weigh` function, also by total weight (bytes).
Its lock comes from `forksafe`, so a child forked while another thread was inside a memo still uses it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from . import forksafe

__all__ = ["LRU"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most `size` entries (and, with `weigh`, at most `max_weight` in all: one entry heavier than that is kept
    alone); a `get` hit or a `put` makes an entry the youngest, the oldest goes first. None is never stored as a
    value (`get` answers None for a miss)."""

    def __init__(self, size: int, weigh: Callable[[V], int] | None = None, max_weight: int | None = None):
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"LRU(size=) takes an int >= 1, got {size!r}")
        if (weigh is None) != (max_weight is None):
            raise ValueError("LRU: weigh= and max_weight= go together")
        self.size = size
        self.max_weight = max_weight
        self._weigh = weigh
        self._weight = 0
        self._d: OrderedDict[K, V] = OrderedDict()
        self._lock = forksafe.lock()

    def get(self, key: K) -> V | None:
        """The value under `key` (made the youngest), or None."""
        with self._lock:
            v = self._d.get(key)
            if v is not None:
                self._d.move_to_end(key)
            return v

    def put(self, key: K, value: V) -> V:
        """Store `value` under `key` (replacing what was there) and return it."""
        with self._lock:
            self._store(key, value)
            return value

    def setdefault(self, key: K, value: V) -> V:
        """The value already under `key` (made the youngest), else `value`, stored: the first of two racing
        builders wins, and both callers get the same object."""
        with self._lock:
            old = self._d.get(key)
            if old is not None:
                self._d.move_to_end(key)
                return old
            self._store(key, value)
            return value

    def pop(self, key: K) -> V | None:
        """Forget `key`; its value, or None."""
        with self._lock:
            v = self._d.pop(key, None)
            if v is not None and self._weigh is not None:
                self._weight -= self._weigh(v)
            return v

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self._weight = 0

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: object) -> bool:
        return key in self._d

    @property
    def weight(self) -> int:
        """The total weight held (0 without `weigh`)."""
        return self._weight

    def _store(self, key: K, value: V) -> None:
        if value is None:
            raise ValueError("LRU: None is not stored (it means a miss)")
        if self._weigh is not None:
            if (old := self._d.get(key)) is not None:
                self._weight -= self._weigh(old)
            self._weight += self._weigh(value)
        self._d[key] = value
        self._d.move_to_end(key)
        while len(self._d) > self.size or (self.max_weight is not None and self._weight > self.max_weight
                                           and len(self._d) > 1):
            _, old = self._d.popitem(last=False)
            if self._weigh is not None:
                self._weight -= self._weigh(old)
