"""Compiler: source -> bytes, through the compile cache. CompiledSpec: those bytes with the ProgramSpec they run."""

from __future__ import annotations

import functools
import hashlib
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..debug import debug_level, dprint
from ..errors import CompileError
from . import deps
from .cache import CacheKey, CompileCache, default_cache

if TYPE_CHECKING:  # not at run time: the compile side must not need the IR to load
    from ..render.program_spec import ParamSpec, ProgramSpec, VarSpec


def short_identity(ident: str, limit: int = 100) -> str:
    """A compiler identity for one debug line: its words without the long ones (a CPU feature list, a flag dump),
    cut at `limit` characters (the full identity stays in the cache key)."""
    words = [w for w in ident.split() if len(w) <= 40]
    out = " ".join(words)
    if len(words) < len(ident.split()) or len(out) > limit:
        out = out[:limit].rstrip() + " ..."
    return out


@functools.lru_cache(maxsize=64)
def source_digest(src: str) -> str:
    """sha256 of a source, hex: the cache key's last part. Remembered for the last 64 sources (a str keeps its hash,
    so a lookup of the same object is O(1)): loading one kernel asked for it up to four times."""
    return hashlib.sha256(src.encode()).hexdigest()


@dataclass(frozen=True)
class CompiledSpec:
    """Compiled bytes (`lib`) of `spec`, made by the compiler whose identity() is `compiler_id`.

    `trusted` is set by the core only: True when `Compiler.compile` just produced the bytes in this process, or read
    them from a cache entry whose MAC verified under this user's secret. A runtime may skip structural checks of
    trusted bytes (they are what a compiler of this process emitted); bytes from anywhere else (a CompiledSpec built
    by hand, unpickled, read from a file) have `trusted=False` and must be checked before they are loaded.
    `from_cache` says the bytes came from the compile cache rather than a compile in this call: when such bytes fail
    to load, `Device` discards the entry and recompiles once. Neither field takes part in equality.
    """

    spec: ProgramSpec
    lib: bytes
    compiler_id: str
    trusted: bool = field(default=False, compare=False)
    from_cache: bool = field(default=False, compare=False)
    tier: str = field(default="final", compare=False)  # "quick": Compiler.first_build's cheap build (see there)

    def __reduce__(self):  # trust does not travel: unpickled bytes are checked
        return (type(self), (self.spec, self.lib, self.compiler_id, False, False, self.tier))

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def params(self) -> tuple[ParamSpec, ...]:
        return self.spec.params

    @property
    def vars(self) -> tuple[VarSpec, ...]:
        return self.spec.vars


class Compiler(ABC):
    """Turns the source of a ProgramSpec into bytes its runtime loads.

    Subclasses set `name`, implement `compile_src`, and override `identity()` with everything that changes the
    output (toolchain version, flags, target arch): it is part of the cache key, so a toolchain upgrade never
    reuses stale bytes. Set `cache` (a CompileCache) on an instance to use another cache than the process-wide one;
    `use_cache = False` bypasses caching (for compilers whose output is not reproducible).

    Tiers (optional): a compiler whose `quick_tier(src)` answers True for a source also builds it cheaply
    (`quick_compile_src`: LLVM's O0, ~1 ms, where O3 takes ~20), and `Device.compile` loads that quick build first
    when the final bytes are not cached; the Program swaps to the final build once it has run enough
    (`Program.upgrade`). The contract: the quick build's program computes the very values the final one does (the
    CPU plugin offers it only for IR without fast-math flags), so a program changes speed, never results.
    """

    name: str = "compiler"
    use_cache: bool = True
    cache: CompileCache | None = None
    #: True where the compiler downstream of the source may reassociate float arithmetic and assume finite values
    #: (WGSL permits both): results are then checked against the exact reference or, failing that, the widened one
    #: (`devicekit.reference.wide`), never bit for bit. False (IEEE as written) for every compiler devicekit drives.
    reassociates: bool = False

    def identity(self) -> str:
        """Compiler name + version + flags + arch: the part of the cache key that belongs to this compiler."""
        return self.name

    @abstractmethod
    def compile_src(self, src: str) -> bytes:
        """Compile `src`; raise CompileError(message, log, src) when the source is rejected."""

    def compile_tracked(self, src: str, ctx: deps.SourceContext) -> tuple[bytes, list[str] | None]:
        """Compile hand-written `src` under `ctx` (its working dir, include dirs, defines): the bytes and every file
        the compile read (paths), or None when this compiler cannot tell (then the signature reader's inclusion list
        stands for it). The default takes no include dirs nor defines: a compiler that honours them overrides this."""
        if ctx.include_dirs or ctx.defines:
            raise CompileError(f"the {self.name} compiler takes no include_dirs= nor defines=", "", src)
        return self.compile_src(src), None

    def quick_tier(self, src: str) -> bool:
        """Whether `quick_compile_src` builds `src` (default False: no quick tier)."""
        return False

    def quick_compile_src(self, src: str) -> bytes:
        """A cheap build of `src` (when `quick_tier(src)`) whose program computes the same values as
        `compile_src(src)`'s, only slower."""
        raise NotImplementedError(f"compiler {self.name!r} has no quick tier")

    def quick_identity(self) -> str:
        """The identity the quick build is cached under: never `identity()`, so the tiers' bytes never mix."""
        return f"{self.identity()} tier=quick"

    def first_build(self, spec: ProgramSpec) -> CompiledSpec:
        """What `Device.compile` loads first: `compile(spec)` when its bytes are cached, when tiers are off
        (DEVICEKIT_TIERS=0) or when this compiler has no quick tier for the source; else the quick build (through
        the cache under `quick_identity()`), a CompiledSpec with `tier="quick"`."""
        from .. import settings
        if not self.use_cache or not settings.get("DEVICEKIT_TIERS") or spec.get_meta("source_ctx") is not None:
            return self.compile(spec)
        ident = self.identity()
        # the final bytes first: asking for a quick tier reads the whole source (the llvm pair's regex: ~150 us)
        if (lib := self._cache().get(self.cache_key(spec))) is not None:
            dprint(2, f"compile cache hit for {spec.name} ({short_identity(ident)})")
            return CompiledSpec(spec, lib, ident, trusted=True, from_cache=True)
        if not self.quick_tier(spec.src):
            return self.compile(spec)
        quick = self.quick_identity()
        return self._cached_build(spec, quick, self._key(spec, quick), self.quick_compile_src, tier="quick")

    def cache_key(self, spec: ProgramSpec) -> CacheKey:
        """The cache key of `spec` for this compiler: (spec.device, identity(), sha256(spec.src)); a hand-written
        source's header search setup (meta "source_ctx") is part of the identity."""
        return self._key(spec, self.identity())

    @staticmethod
    def _ctx_ident(spec: ProgramSpec, ident: str) -> str:
        ctx = spec.get_meta("source_ctx")
        return ident if ctx is None else f"{ident} ctx={ctx.key_text()}"

    @staticmethod
    def _key(spec: ProgramSpec, ident: str) -> CacheKey:
        return CacheKey(spec.device, Compiler._ctx_ident(spec, ident), source_digest(spec.src))

    def _cache(self) -> CompileCache:
        return self.cache if self.cache is not None else default_cache()

    def _build(self, spec: ProgramSpec, ident: str, compile_src: Callable[[str], bytes] | None = None) -> bytes:
        """`compile_src(spec.src)` (default: this compiler's), its CompileError given the source, its result checked
        to be bytes."""
        fn = compile_src or self.compile_src
        t0 = time.perf_counter()
        try:
            lib = fn(spec.src)
        except CompileError as e:
            if not e.src:
                raise CompileError(e.message, e.log, spec.src) from e
            raise
        if not isinstance(lib, (bytes, bytearray, memoryview)):
            raise TypeError(f"compiler {self.name!r}: {fn.__name__} must return bytes, got {type(lib).__name__}")
        dprint(2, f"compiled {spec.name} with {short_identity(ident)} in {(time.perf_counter() - t0) * 1e3:.2f} ms")
        return bytes(lib)

    def _cached_build(self, spec: ProgramSpec, ident: str, key: CacheKey,
                      compile_src: Callable[[str], bytes] | None = None, tier: str = "final") -> CompiledSpec:
        """The bytes of `spec` under `key` (identity `ident`): from the cache, else built by `_build` and stored."""
        compiled_now = False

        def build() -> bytes:
            nonlocal compiled_now
            compiled_now = True
            return self._build(spec, ident, compile_src)

        lib = self._cache().get_or_compile(key, build)
        if not compiled_now:
            dprint(2, f"compile cache hit for {spec.name} ({short_identity(ident)})")
        return CompiledSpec(spec, lib, ident, trusted=True, from_cache=not compiled_now, tier=tier)

    def compile(self, spec: ProgramSpec) -> CompiledSpec:
        """Compile `spec.src`, through the cache keyed by (spec.device, identity(), sha256(src))."""
        ident = self.identity()
        if debug_level() >= 3:
            dprint(3, f"source of {spec.name} ({spec.device}, {spec.lang}):\n{spec.src}")
        if (ctx := spec.get_meta("source_ctx")) is not None:
            lib, cached = self.tracked(spec, self.cache_key(spec), lambda: self.compile_tracked(spec.src, ctx))
            return CompiledSpec(spec, lib, ident, trusted=True, from_cache=cached)
        if not self.use_cache:
            return CompiledSpec(spec, self._build(spec, ident), ident, trusted=True)
        return self._cached_build(spec, ident, self.cache_key(spec))

    def tracked(self, spec: ProgramSpec, key: CacheKey,
                build: Callable[[], tuple[bytes, list[str] | None]]) -> tuple[bytes, bool]:
        """(bytes, from the cache) of a hand-written source under `key`, through its dependency manifest
        (compile/deps.py): a cached entry is used only while every file its compile read hashes as it did; else
        `build()` (bytes, files read or None: the reader's list, meta "reader_deps") runs and the entry is
        replaced."""
        ctx = spec.get_meta("source_ctx")
        cache = self._cache() if self.use_cache else None
        if cache is not None and (payload := cache.get(key)) is not None:
            got = deps.unpack(payload)
            why = "no dependency manifest" if got is None else deps.stale(got[0])
            if why is None:
                dprint(2, f"compile cache hit for {spec.name} ({len(got[0])} dependencies unchanged)")
                return got[1], True
            dprint(1, f"compile cache: {spec.name}: {why}: recompiling")
        try:
            lib, read = build()
        except CompileError as e:
            if not e.src:
                raise CompileError(e.message, e.log, spec.src) from e
            raise
        files = read if read is not None else list(spec.get_meta("reader_deps", ()))
        if cache is not None:
            cache.put(key, deps.pack(deps.record(files, ctx.cwd if ctx else os.getcwd()), bytes(lib)), replace=True)
        return bytes(lib), False

    def recompile(self, spec: ProgramSpec, reason: str = "") -> CompiledSpec:
        """Compile `spec.src` again, bypassing the cache, and replace its entry (memory and disk): the cached bytes
        failed to load (`reason`). Used by Device, once per failure, for every runtime."""
        ident = self.identity()
        if not self.use_cache:
            return self.compile(spec)
        key = self.cache_key(spec)
        cache = self._cache()
        cache.discard(key, reason or "its bytes failed to load")
        if spec.get_meta("source_ctx") is not None:
            return self.compile(spec)
        lib = self._build(spec, ident)
        cache.put(key, lib, replace=True)
        return CompiledSpec(spec, lib, ident, trusted=True)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.identity()}>"
