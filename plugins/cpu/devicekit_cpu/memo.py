"""Process-wide memos that make a second build of a known kernel cost microseconds, not milliseconds."""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from devicekit import forksafe


class LRU:
    """A small thread-safe LRU dict."""

    def __init__(self, size: int):
        self.size = size
        self._d: OrderedDict = OrderedDict()
        self._lock = forksafe.lock()

    def get(self, key):
        with self._lock:
            v = self._d.get(key)
            if v is not None:
                self._d.move_to_end(key)
            return v

    def put(self, key, value):
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > self.size:
                self._d.popitem(last=False)
        return value


class MemoRender:
    """Mixin for a Renderer: `render(kernel, name)` is a pure function of the kernel's content, the name and the
    renderer's class, so its ProgramSpec is reused (lowering is the costly part of building a cached kernel)."""

    _render_memo = LRU(2048)

    def memo_salt(self) -> str:
        """Anything besides the kernel and the name that changes the output (an environment knob)."""
        return ""

    def render(self, kernel, name: str | None = None):
        key = getattr(kernel, "key", None)
        if key is None:
            return super().render(kernel, name)
        from devicekit import settings
        k = (type(self), key, name, self.memo_salt(), settings.get("DEVICEKIT_OPT"))  # the optimizer changes the source
        spec = self._render_memo.get(k)
        if spec is None:
            spec = self._render_memo.put(k, super().render(kernel, name))
        return spec


_loaded = LRU(4096)


def loaded(lib: bytes, symbol: str, load):
    """(keepalive, address) of `symbol` in `lib`, loading each distinct object once per process."""
    k = (hashlib.sha256(lib).digest(), symbol)
    hit = _loaded.get(k)
    return hit if hit is not None else _loaded.put(k, load(lib, symbol))
