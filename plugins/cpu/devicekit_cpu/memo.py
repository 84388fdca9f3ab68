"""Process-wide memos that make a second build of a known kernel cost microseconds, not milliseconds. Both go
through the core's one memo machinery: `devicekit.lru.LRU`, and for rendered specs the lowered-kernel cache
(`devicekit.compile.lowered`), whose key holds every setting that may change lowering: none is added here by hand."""

from __future__ import annotations

import hashlib

from devicekit.lru import LRU

__all__ = ["LRU", "MemoRender", "loaded"]


class MemoRender:
    """Mixin for a Renderer: `render(kernel, name)` (the seed's `dev.renderer.render(k)` as well as
    `Device.compile`) answers from the lowered-kernel cache, in memory and on disk: a kernel is lowered once, ever.
    `memo_salt()` names host facts besides the renderer's attributes and the settings (the lowered cache keys by it)."""

    def memo_salt(self) -> str:
        """Anything besides the kernel, the name, the renderer's attributes and the settings that changes the output
        (a host fact: the CPU's streaming threshold)."""
        return ""

    def render(self, kernel, name: str | None = None):
        if getattr(kernel, "key", None) is None:
            return self.render_uncached(kernel, name)
        from devicekit.compile import lowered
        return lowered.render(self, kernel, name)

    def render_uncached(self, kernel, name: str | None = None):
        """The lowering itself (what the lowered cache calls on a miss)."""
        return super().render(kernel, name)


_loaded: LRU = LRU(4096)


def loaded(lib: bytes, symbol: str, load):
    """(keepalive, address) of `symbol` in `lib`, loading each distinct object once per process."""
    k = (hashlib.sha256(lib).digest(), symbol)
    hit = _loaded.get(k)
    return hit if hit is not None else _loaded.setdefault(k, load(lib, symbol))
