"""RAY's compile side: each pair of a RAY id is the remote device's pair of the same name. Kernels are rendered here
by the remote kind's own renderer (its plugin must be installed on the driver), marked as RAY's; the bytes are made
either here, by the same compiler when its identity equals the node's (`DriverCompiler`: compile once, and the
compile cache shares the bytes with every RAY id of that kind and identity), or by the node (`ActorCompiler`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from devicekit.compile.compiler import Compiler
from devicekit.errors import CompileError
from devicekit.render.renderer import Renderer

from .connection import Connection

__all__ = ["ActorCompiler", "DriverCompiler", "RayRenderer", "compiler_identity"]

KIND = "RAY"
_CAPS = ("lang", "supported_dtypes", "native_ops", "gpu_indexing", "core_split", "has_local", "vectors",
         "unaligned_vectors", "global_max", "local_max", "shared_max", "max_buffers")


def compiler_identity(kind: str, identity: str) -> str:
    """The identity of a RAY pair whose bytes the remote `kind`'s compiler `identity` makes (wherever it runs)."""
    return f"ray {kind}: {identity}"


class RayRenderer(Renderer):
    """The remote kind's renderer; its ProgramSpecs say RAY (the compile cache keys them apart from local ones)."""

    device = KIND

    def __init__(self, inner: Renderer):
        self.inner = inner
        for name in _CAPS:
            setattr(self, name, getattr(inner, name))
        if hasattr(inner, "parse_source"):
            self.parse_source = self._parse_source

    @property
    def capabilities(self) -> Any:
        return self.inner.capabilities

    def render(self, kernel: Any, name: str | None = None) -> Any:
        return dataclasses.replace(self.inner.render(kernel, name=name), device=KIND)

    def render_linear(self, lk: Any, name: str) -> str:
        return self.inner.render_linear(lk, name)

    def entry_symbol(self, name: str) -> str:
        return self.inner.entry_symbol(name)

    def _parse_source(self, src: str, entry: str, **options: Any) -> Any:
        return dataclasses.replace(self.inner.parse_source(src, entry, **options), device=KIND)

    def __reduce__(self):
        return (type(self), (self.inner,))


class DriverCompiler(Compiler):
    """The remote kind's compiler, run here: its identity equals the node's, so its bytes are the node's."""

    def __init__(self, kind: str, inner: Compiler):
        self.kind, self.inner = kind, inner
        self.name = inner.name
        self.use_cache = inner.use_cache

    def identity(self) -> str:
        return compiler_identity(self.kind, self.inner.identity())

    def compile_src(self, src: str) -> bytes:
        return self.inner.compile_src(src)


class ActorCompiler(Compiler):
    """The node's compiler, through the device's actor: for a kind whose compiler here differs (another toolchain,
    another CPU) or is missing. The bytes still go through this process's compile cache."""

    def __init__(self, conn: Connection, pair: str, identity: str):
        self.conn, self.pair, self._identity = conn, pair, identity
        self.name = pair

    def identity(self) -> str:
        return compiler_identity(self.conn.remote.kind, self._identity)

    def compile_src(self, src: str) -> bytes:
        answer = self.conn.call("compile_src", self.pair, src)
        if answer[0] == "error":
            raise CompileError(f"{self.conn.where}: {answer[1]}", answer[2], src)
        return answer[1]
