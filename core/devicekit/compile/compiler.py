"""Compiler: source -> bytes, through the compile cache. CompiledSpec: those bytes with the ProgramSpec they run."""

from __future__ import annotations

import hashlib
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..debug import debug_level, dprint
from ..errors import CompileError
from .cache import CacheKey, CompileCache, default_cache

if TYPE_CHECKING:  # not at run time: the compile side must not need the IR to load
    from ..render.program_spec import ParamSpec, ProgramSpec, VarSpec


@dataclass(frozen=True)
class CompiledSpec:
    """Compiled bytes (`lib`) of `spec`, made by the compiler whose identity() is `compiler_id`."""

    spec: ProgramSpec
    lib: bytes
    compiler_id: str

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
    """

    name: str = "compiler"
    use_cache: bool = True
    cache: CompileCache | None = None

    def identity(self) -> str:
        """Compiler name + version + flags + arch: the part of the cache key that belongs to this compiler."""
        return self.name

    @abstractmethod
    def compile_src(self, src: str) -> bytes:
        """Compile `src`; raise CompileError(message, log, src) when the source is rejected."""

    def compile(self, spec: ProgramSpec) -> CompiledSpec:
        """Compile `spec.src`, through the cache keyed by (spec.device, identity(), sha256(src))."""
        ident = self.identity()
        if debug_level() >= 3:
            dprint(3, f"source of {spec.name} ({spec.device}, {spec.lang}):\n{spec.src}")
        key = CacheKey(spec.device, ident, hashlib.sha256(spec.src.encode()).hexdigest())
        compiled_now = False

        def build() -> bytes:
            nonlocal compiled_now
            compiled_now = True
            t0 = time.perf_counter()
            try:
                lib = self.compile_src(spec.src)
            except CompileError as e:
                if not e.src:
                    raise CompileError(e.message, e.log, spec.src) from e
                raise
            if not isinstance(lib, (bytes, bytearray, memoryview)):
                raise TypeError(f"compiler {self.name!r}: compile_src must return bytes, got {type(lib).__name__}")
            dprint(2, f"compiled {spec.name} with {ident} in {(time.perf_counter() - t0) * 1e3:.2f} ms")
            return bytes(lib)

        if not self.use_cache:
            lib = build()
        else:
            cache = self.cache if self.cache is not None else default_cache()
            lib = cache.get_or_compile(key, build)
            if not compiled_now:
                dprint(2, f"compile cache hit for {spec.name} ({ident})")
        return CompiledSpec(spec, lib, ident)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.identity()}>"
